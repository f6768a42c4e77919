"""Decode step time at a number of slots, measured as anchors are: llama.cpp started on a GGUF with that
many slots, one request per slot sent at once under the exact token-count contract (prompts of exactly
P tokens as the server counts them, N output tokens, EOS ignored), TPOT per request from the stream.

With every slot decoding together, a request's TPOT is the engine's step time at that batch (the few
steps where another request's prompt joins are shared by all and diluted over N - 1 tokens). `rounds`
sends the slots' requests that many times over (a closed loop of `slots` clients), for more samples.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from pareto_atlas.spec.knobs import Knobs


@dataclass(frozen=True)
class DecodePoint:
    model: str  # the GGUF's file name
    slots: int
    prompt_tokens: int
    output_tokens: int
    tpot_ms: tuple[float, ...]  # each accepted request's TPOT: (E2E - TTFT) / (N - 1)
    server_tpot_ms: tuple[float, ...]  # llama.cpp's own predicted_per_token_ms, where it reports it
    n_rejected: int  # broke the contract (never averaged in)
    n_errors: int
    engine_version: str
    load_1m: tuple[float, float]  # the machine's 1-minute load before the engine started and after
    other_cpu_cores: float | None  # other work on the machine during the run (measure.contention)

    @property
    def step_ms(self) -> float:
        """The step time this point stands for: the median TPOT of its requests (linear interpolation)."""
        return float(np.percentile(self.tpot_ms, 50, method="linear")) if self.tpot_ms else float("nan")

    def to_dict(self) -> dict:
        return {**asdict(self), "step_ms": self.step_ms}

    @classmethod
    def from_dict(cls, d: dict) -> DecodePoint:
        d = {k: v for k, v in d.items() if k != "step_ms"}
        for k in ("tpot_ms", "server_tpot_ms", "load_1m"):
            d[k] = tuple(d[k])
        return cls(**d)


def measure_decode(
    model_path: str | Path,
    slots: int,
    *,
    prompt_tokens: int = 32,
    output_tokens: int = 64,
    rounds: int = 1,
    threads: int = 2,
    weights: str = "F32",
    seed: int = 0,
    timeout_s: float = 300.0,
    on_start: Callable[[int], None] | None = None,
) -> DecodePoint:
    """One decode point (see the module doc); raises if the engine fails or no request met the contract.
    `on_start`: called with the engine's pid once it serves, before any request (e.g. to set its priority)."""
    from pareto_atlas.measure.contention import ContentionMeter
    from pareto_atlas.measure.contract import build_contract_prompts
    from pareto_atlas.measure.engines import get_engine
    from pareto_atlas.measure.loadgen import run_load_sync
    from pareto_atlas.measure.metrics import derive_metrics

    if slots < 1 or rounds < 1 or output_tokens < 2 or prompt_tokens < 1:
        raise ValueError(
            f"measure_decode: slots {slots} and rounds {rounds} must be >= 1, output_tokens {output_tokens} >= 2 "
            f"(TPOT needs two tokens), prompt_tokens {prompt_tokens} >= 1"
        )
    P, N, warmup = prompt_tokens, output_tokens, 1
    launch = {
        "model_path": str(model_path),
        "knobs": Knobs(weights=weights, slots=slots),
        "n_ctx": P + N + 64,
        "threads": threads,
        "startup_timeout_s": 180,
    }
    load0 = os.getloadavg()[0]
    with get_engine("llamacpp").start(launch) as eng:
        if on_start is not None:
            on_start(eng.pid)
        prompts = build_contract_prompts(eng.base_url, P, warmup + rounds * slots, seed=seed)
        with ContentionMeter(eng.pid) as other:
            recs = run_load_sync(
                eng.base_url,
                prompts,
                N,
                concurrency=slots,
                warmup=warmup,
                prompt_tokens=P,
                extra_body=eng.extra_body,
                timeout_s=timeout_s,
            )
        version = eng.version
    m = derive_metrics(recs, P, N)
    ok = [r for r in recs if not r.warmup and r.ok and r.tpot_s is not None]
    if not ok:
        raise RuntimeError(f"measure_decode: no request at {slots} slots met the contract ({dict(m.reject_reasons)})")
    server = [
        float(r.server_timings["predicted_per_token_ms"])
        for r in ok
        if r.server_timings and r.server_timings.get("predicted_per_token_ms")
    ]
    return DecodePoint(
        model=Path(model_path).name,
        slots=slots,
        prompt_tokens=P,
        output_tokens=N,
        tpot_ms=tuple(r.tpot_s * 1e3 for r in ok),
        server_tpot_ms=tuple(server),
        n_rejected=m.n_rejected,
        n_errors=m.n_errors,
        engine_version=version,
        load_1m=(round(load0, 2), round(os.getloadavg()[0], 2)),
        other_cpu_cores=other.result.other_cores if other.result is not None else None,
    )
