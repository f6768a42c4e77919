"""Request-level discrete-event simulation: arrival processes (closed loop, Poisson, trace) and one run.

The event loop itself is compiled in `kernels.run_kernel`: one engine step at a time, jumping over
runs of identical decode steps in closed form, so a request costs O(1) events rather than
O(output tokens) loop turns. Policies: static, continuous, chunked prefill, SLO-aware, disaggregated
(a pool of prefill workers before the decode engine), and two engines' own: whole prompts under a
token budget (TensorRT-LLM) and prefill steps without the decodes (SGLang); see kernels.layout.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pareto_atlas.simulate.kernels import POLICIES, SUMMARY, run_kernel, summarize
from pareto_atlas.simulate.kernels.pool import run_pool_kernel


@dataclass(frozen=True)
class Arrivals:
    """Requests in arrival order. Closed loop (concurrency > 0): times are written as requests complete,
    each client waiting think[i] s (if given) before it sends request i."""

    arrival: np.ndarray  # seconds
    prompt: np.ndarray  # tokens, int64
    output: np.ndarray  # tokens, int64
    concurrency: int = 0
    think: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.prompt)
        if n < 1:
            raise ValueError("arrivals: need at least one request")
        if len(self.arrival) != n or len(self.output) != n:
            raise ValueError("arrivals: arrival, prompt and output must have the same length")
        if (np.asarray(self.output) < 1).any() or (np.asarray(self.prompt) < 1).any():
            raise ValueError("arrivals: prompt and output lengths must be >= 1 token")
        if self.think is not None:
            if self.concurrency < 1:
                raise ValueError("arrivals: think times need a closed loop (concurrency >= 1)")
            if len(self.think) != n or not (np.asarray(self.think) >= 0).all():
                raise ValueError(f"arrivals: think needs {n} times >= 0 s, one per request")


def closed_loop(concurrency: int, n: int, prompt: int, output: int, think_s: np.ndarray | None = None) -> Arrivals:
    """`concurrency` clients, each sending its next request when its last one finished, after
    think_s[i] s for request i where given (requests numbered in the order clients start thinking)."""
    if concurrency < 1:
        raise ValueError(f"concurrency: {concurrency} must be >= 1")
    think = None if think_s is None else np.asarray(think_s, float)
    return Arrivals(np.zeros(n), np.full(n, prompt, np.int64), np.full(n, output, np.int64), concurrency, think)


def poisson(rate_rps: float, n: int, prompt: int, output: int, seed: int = 0) -> Arrivals:
    if not rate_rps > 0:
        raise ValueError(f"rate_rps: {rate_rps} must be > 0")
    gaps = np.random.default_rng(seed).exponential(1.0 / rate_rps, n)
    return Arrivals(np.cumsum(gaps) - gaps[0], np.full(n, prompt, np.int64), np.full(n, output, np.int64))


def trace(times: np.ndarray, prompts: np.ndarray, outputs: np.ndarray) -> Arrivals:
    order = np.argsort(np.asarray(times, float), kind="stable")
    return Arrivals(
        np.asarray(times, float)[order], np.asarray(prompts, np.int64)[order], np.asarray(outputs, np.int64)[order]
    )


@dataclass(frozen=True)
class DesResult:
    arrival: np.ndarray
    first_t: np.ndarray
    finish_t: np.ndarray
    output: np.ndarray
    summary: dict
    steps: int
    peak_kv_tokens: float
    preemptions: int

    @property
    def ttft(self) -> np.ndarray:
        return self.first_t - self.arrival

    @property
    def e2e(self) -> np.ndarray:
        return self.finish_t - self.arrival

    @property
    def tpot(self) -> np.ndarray:
        """(E2E - TTFT) / (completion_tokens - 1); one-token requests excluded."""
        m = self.output > 1
        return (self.finish_t[m] - self.first_t[m]) / (self.output[m] - 1)


def run(
    c: np.ndarray,
    arrivals: Arrivals,
    batching: str = "continuous",
    slots: int = 1,
    chunk_tokens: int = 0,
    kv_cap_tokens: float = np.inf,
    slo: dict | None = None,
    seed: int = 0,
    *,
    prefill_c: np.ndarray | None = None,
    prefill_workers: int = 1,
    decode_workers: int = 1,
    cached: np.ndarray | None = None,
) -> DesResult:
    """Simulate one configuration. slo: {"ttft_ms": .., "tpot_ms": ..}; its TPOT also drives batching="slo".

    batching="disagg": `prefill_workers` prefill workers, each running the coefficient vector
    `prefill_c` (its own parallelism; default c), before the decode engine c; one worker is the
    prefill/decode pair. `decode_workers` > 1: that many decode engines of `slots` sequences and
    `kv_cap_tokens` each, each request to the least loaded (kernels.pool: one step at a time).
    `cached`: per request (in arrivals' order), prompt tokens a prefix cache serves (simulate.prefix_cache);
    not modelled for a pool of decode engines."""
    if batching not in POLICIES:
        raise ValueError(f"batching: {batching!r} is not one of {', '.join(POLICIES)}")
    if prefill_workers < 1:
        raise ValueError(f"prefill_workers: {prefill_workers} must be >= 1")
    if prefill_workers > 1 and batching != "disagg":
        raise ValueError(
            f"prefill_workers: {prefill_workers} needs batching='disagg' (a prefill pool); got {batching!r}"
        )
    if decode_workers < 1 or (decode_workers > 1 and batching != "disagg"):
        raise ValueError(
            f"decode_workers: {decode_workers} must be >= 1, and 1 unless batching='disagg' (got {batching!r})"
        )
    c = np.asarray(c, float)
    c_pf = c if prefill_c is None else np.asarray(prefill_c, float)
    if c_pf.shape != c.shape:
        raise ValueError(f"prefill_c: {c_pf.shape[0]} coefficients; the decode vector has {c.shape[0]}")
    slo = slo or {}
    ttft_slo = slo.get("ttft_ms", np.inf) / 1e3
    tpot_slo = slo.get("tpot_ms", np.inf) / 1e3
    arrival = np.array(arrivals.arrival, float)
    first_t = np.empty(len(arrival))
    finish_t = np.empty(len(arrival))
    # Copies: a closed loop with think times reorders requests into the order they arrive.
    prompt, output = arrivals.prompt.astype(np.int64), arrivals.output.astype(np.int64)
    think = np.empty(0) if arrivals.think is None else np.asarray(arrivals.think, float)
    hits = np.empty(0, np.int64) if cached is None else np.asarray(cached, np.int64)
    if len(hits) and (len(hits) != len(prompt) or (hits < 0).any() or (hits >= prompt).any()):
        raise ValueError("cached: one count per request, >= 0 and below its prompt (its last token is always computed)")
    if len(hits) and decode_workers > 1:
        raise ValueError("cached: a prefix cache is not modelled for a pool of decode engines (decode_workers > 1)")
    if decode_workers > 1:
        steps, peak, pre = run_pool_kernel(
            c,
            arrival,
            prompt,
            output,
            int(slots),
            int(arrivals.concurrency),
            float(kv_cap_tokens),
            int(seed),
            first_t,
            finish_t,
            think,
            c_pf,
            int(prefill_workers),
            int(decode_workers),
        )
    else:
        steps, peak, pre = run_kernel(
            c,
            arrival,
            prompt,
            output,
            POLICIES.index(batching),
            int(slots),
            int(chunk_tokens),
            tpot_slo,
            int(arrivals.concurrency),
            float(kv_cap_tokens),
            int(seed),
            first_t,
            finish_t,
            think,
            c_pf,
            int(prefill_workers),
            hits,
        )
    out = np.empty(len(SUMMARY))
    summarize(arrival, first_t, finish_t, output, ttft_slo, tpot_slo, out)
    return DesResult(
        arrival, first_t, finish_t, output, dict(zip(SUMMARY, out.tolist())), int(steps), float(peak), int(pre)
    )
