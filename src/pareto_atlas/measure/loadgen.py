"""Async streaming load generator for OpenAI-compatible endpoints (completions and chat).

Drives an endpoint with a closed loop (fixed concurrency), Poisson arrivals (seeded), or a
replayed trace; records every request raw (send time, every chunk time, usage, server timings)
and never raises for a failed request: the failure is recorded as an error.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np

from pareto_atlas.spec.think import check_think, think_times
from pareto_atlas.spec.trace import TraceRow, load_trace  # noqa: F401 - load_trace: part of this module's face

from .contract import apply_contract, build_contract_prompts, contract_body, endpoint_path, header_secrets, redact
from .records import RequestRecord

OnRecord = Callable[[RequestRecord], None]


# ----------------------------------------------------------------------------- SSE parsing


@dataclass(frozen=True)
class SSEEvent:
    has_text: bool = False  # carries >= 1 generated token (role-only/empty/usage-only do not)
    usage: dict | None = None
    timings: dict | None = None
    done: bool = False  # the "[DONE]" sentinel
    error: str | None = None


_IGNORED = SSEEvent()


def parse_sse_line(line: str) -> SSEEvent:
    """One line of an event stream. Only `data:` lines matter (comments, `event:`, `id:` and
    blank keep-alive lines are ignored); llama.cpp reports mid-stream failures as `error:`."""
    if line.startswith("error:"):
        return SSEEvent(error=line[6:].strip()[:300] or "stream error")
    if not line.startswith("data:"):
        return _IGNORED
    payload = line[5:].strip()
    if payload == "[DONE]":
        return SSEEvent(done=True)
    if not payload:
        return _IGNORED
    try:
        obj = json.loads(payload)
    except json.JSONDecodeError:
        return SSEEvent(error=f"unparseable stream event: {payload[:120]}")
    if not isinstance(obj, dict):
        return _IGNORED
    if obj.get("error"):
        err = obj["error"]
        return SSEEvent(error=str(err.get("message", err) if isinstance(err, dict) else err)[:300])
    has_text = False
    for choice in obj.get("choices") or ():
        delta = choice.get("delta") or {}
        # completions carry "text"; chat carries delta content (reasoning models stream
        # their generated reasoning separately, still generated tokens)
        if choice.get("text") or delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning"):
            has_text = True
            break
    return SSEEvent(has_text=has_text, usage=obj.get("usage") or None, timings=obj.get("timings") or None)


# ----------------------------------------------------------------------------- load patterns


def poisson_schedule(rate_rps: float, n: int, seed: int = 0) -> list[float]:
    """Arrival offsets (s from start) of a Poisson process: exponential inter-arrival times."""
    if rate_rps <= 0:
        raise ValueError(f"rate_rps: {rate_rps} must be > 0")
    gaps = np.random.default_rng(seed).exponential(1.0 / rate_rps, size=n)
    return np.cumsum(gaps).tolist()


def trace_prompts(base_url: str, rows: Sequence[TraceRow], seed: int = 0, warmup: int = 1, **kw) -> list[str]:
    """Contract prompts for a trace: `warmup` prompts of the first row's length, then one per row."""
    lengths = [rows[0].prompt_tokens] * warmup + [r.prompt_tokens for r in rows]
    return build_contract_prompts(base_url, lengths, None, seed, **kw)


# ----------------------------------------------------------------------------- one request


async def _request(
    client: httpx.AsyncClient,
    path: str,
    body: dict,
    idx: int,
    warmup: bool,
    timeout_s: float,
    secrets: tuple[str, ...],
    think_s: float = 0.0,
) -> RequestRecord:
    chunks: list[float] = []
    usage = timings = None
    error = None
    done = False
    send_ts = time.monotonic()
    sent: list[float] = []

    async def trace(event: str, info: dict) -> None:
        # TTFT starts when the request's bytes start to leave, not when Python began building
        # it: client-side request construction and pool checkout are harness cost, not latency
        if event == "http11.send_request_headers.started" and not sent:
            sent.append(time.monotonic())

    try:
        async with asyncio.timeout(timeout_s):
            async with client.stream("POST", path, json=body, extensions={"trace": trace}) as resp:
                if resp.status_code >= 400:
                    detail = (await resp.aread()).decode(errors="replace")[:200]
                    error = f"HTTP {resp.status_code}: {detail}"
                else:
                    async for line in resp.aiter_lines():
                        ts = time.monotonic()  # before parsing: parse cost is ours, not the server's
                        ev = parse_sse_line(line)
                        if ev.has_text:
                            chunks.append(ts)
                        usage = ev.usage or usage
                        timings = ev.timings or timings
                        if ev.error:
                            error = f"stream error: {ev.error}"
                        if ev.done:
                            done = True
                            break
                    if error is None and not done and usage is None:
                        error = "stream closed before [DONE] without usage"
    except TimeoutError:
        error = f"timeout after {timeout_s:g} s"
    except (httpx.HTTPError, OSError) as e:
        error = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    end_ts = time.monotonic()
    send_ts = sent[0] if sent else send_ts
    if error is not None:
        error = redact(" ".join(error.split()), secrets)
    return RequestRecord(
        idx=idx,
        warmup=warmup,
        send_ts=send_ts,
        chunk_ts=tuple(chunks),
        first_token_ts=chunks[0] if chunks else None,
        end_ts=end_ts,
        prompt_tokens=(usage or {}).get("prompt_tokens"),
        completion_tokens=(usage or {}).get("completion_tokens"),
        error=error,
        server_timings=timings,
        think_s=think_s,
        cached_tokens=RequestRecord.cached_of(usage, timings),
    )


def _per_request(value: int | Sequence[int] | None, n: int, name: str) -> list[int | None]:
    if value is None or isinstance(value, int):
        return [value] * n
    if len(value) != n:
        raise ValueError(f"{name}: {len(value)} values given for {n} prompts")
    return list(value)


# ----------------------------------------------------------------------------- the run


async def run_load(
    base_url: str,
    prompts: Sequence[str],
    output_tokens: int | Sequence[int] | None,
    *,
    concurrency: int | None = None,
    rate_rps: float | None = None,
    trace: Sequence[TraceRow] | str | Path | None = None,
    warmup: int = 1,
    api: str = "completions",
    model: str | None = None,
    timeout_s: float = 300.0,
    on_record: OnRecord | None = None,
    prompt_tokens: int | Sequence[int] | None = None,
    headers: Mapping[str, str] | None = None,
    extra_body: Mapping | None = None,
    seed: int = 0,
    think: float | str = 0.0,
) -> list[RequestRecord]:
    """Send every prompt, return one record per prompt in index order.

    The first `warmup` prompts are sent one at a time before the load starts and are flagged
    warmup=True; the rest follow exactly one pattern: `concurrency` (closed loop), `rate_rps`
    (Poisson, seeded by `seed`) or `trace` (rows' arrival times; their lengths fill in
    `output_tokens`/`prompt_tokens` when those are None). Each record gets its contract
    verdict (completion_tokens == N always; prompt_tokens == P when P is given) before
    `on_record` sees it, so a caller can persist records as they come.

    `think` (closed loop only): each client waits a seeded exponential time of this mean (s)
    before each send, its first included; "auto" takes the warm-up requests' median TTFT as the
    mean (a prompt's prefill on an idle engine; 0 without warm-up). Clients of identical requests
    that send in the same instant otherwise race the engine's loop (which of them it takes into its
    next step) and then stay phase-locked: the outcome of one race decides how long every later
    request waits. Random pauses on the scale of a prefill give each request a fresh phase, and
    each record keeps its pause, so a simulation can replay the same ones.
    """
    if sum(x is not None for x in (concurrency, rate_rps, trace)) != 1:
        raise ValueError("run_load: give exactly one of concurrency, rate_rps, trace")
    if concurrency is not None and concurrency < 1:
        raise ValueError(f"concurrency: {concurrency} must be >= 1")
    check_think(think)
    warmup = min(max(warmup, 0), len(prompts))
    n_measured = len(prompts) - warmup
    rows: list[TraceRow] | None = None
    if trace is not None:
        rows = load_trace(trace) if isinstance(trace, (str, Path)) else list(trace)
        if len(rows) != n_measured:
            raise ValueError(
                f"trace: {len(rows)} rows for {n_measured} measured prompts (prompts beyond warmup={warmup})"
            )
        first = rows[0] if rows else None
        if output_tokens is None and first:
            output_tokens = [first.output_tokens] * warmup + [r.output_tokens for r in rows]
        if prompt_tokens is None and first:
            prompt_tokens = [first.prompt_tokens] * warmup + [r.prompt_tokens for r in rows]
    if output_tokens is None:
        raise ValueError("output_tokens: required unless a trace gives them")
    n_out = _per_request(output_tokens, len(prompts), "output_tokens")
    n_in = _per_request(prompt_tokens, len(prompts), "prompt_tokens")
    path = endpoint_path(api)
    secrets = header_secrets(headers)
    records: list[RequestRecord | None] = [None] * len(prompts)

    pauses = np.zeros(len(prompts))

    async def one(client: httpx.AsyncClient, i: int) -> None:
        body = contract_body(api, prompts[i], n_out[i], model=model, extra=extra_body)
        if pauses[i] > 0:
            await asyncio.sleep(pauses[i])
        rec = await _request(client, path, body, i, i < warmup, timeout_s, secrets, float(pauses[i]))
        rec = apply_contract(rec, n_in[i], n_out[i])
        records[i] = rec
        if on_record is not None:
            on_record(rec)

    # Unbounded pool: an open-loop generator must never queue behind its own connection limit.
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=max(concurrency or 0, 64))
    timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0))
    async with httpx.AsyncClient(
        base_url=base_url, timeout=timeout, limits=limits, headers=dict(headers or {})
    ) as client:
        for i in range(warmup):
            await one(client, i)
        measured = list(range(warmup, len(prompts)))
        if concurrency is not None and think:
            mean = think
            if think == "auto":
                ttfts = sorted(r.ttft_s for r in records[:warmup] if r is not None and r.ok and r.ttft_s)
                mean = float(np.median(ttfts)) if ttfts else 0.0
            pauses[warmup:] = think_times(float(mean), n_measured, seed)
        if concurrency is not None:
            queue = iter(measured)

            async def worker() -> None:
                for i in queue:  # a shared iterator: each worker takes the next request
                    await one(client, i)

            await asyncio.gather(*(worker() for _ in range(min(concurrency, max(n_measured, 1)))))
        else:
            offsets = poisson_schedule(rate_rps, n_measured, seed) if rows is None else [r.arrival_s for r in rows]
            t0 = time.monotonic()
            tasks = []
            for i, off in zip(measured, offsets):
                delay = t0 + off - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.create_task(one(client, i)))
            await asyncio.gather(*tasks)
    return [r for r in records if r is not None]


def run_load_sync(
    base_url: str, prompts: Sequence[str], output_tokens: int | Sequence[int] | None, **kw
) -> list[RequestRecord]:
    """`run_load` for callers without an event loop."""
    return asyncio.run(run_load(base_url, prompts, output_tokens, **kw))
