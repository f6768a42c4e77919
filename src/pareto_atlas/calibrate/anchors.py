"""An anchor as the fit replays it: its load, lengths and measured sends read from a stored row
(`_anchors`), and the five targets the simulator predicts for it (`predict`), through the same path
as every simulated point (cost model + request-level simulation), so what is calibrated is what is used.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from pareto_atlas.simulate import des
from pareto_atlas.simulate.api import resolve_acceptance
from pareto_atlas.simulate.cost_model import coeffs
from pareto_atlas.simulate.memory import plan_memory
from pareto_atlas.simulate.parallel import replica_load
from pareto_atlas.simulate.params import CalibParams
from pareto_atlas.spec.cards import HardwareCard, ModelCard
from pareto_atlas.spec.knobs import BATCHING, Knobs

TARGETS = ("ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "throughput_tok_s")


@dataclass(frozen=True)
class _Anchor:
    knobs: Knobs
    prompt: int
    output: int
    concurrency: int
    rate: float
    n: int
    accept: float | None = None  # measured acceptance per drafted token
    drafted_per_token: float | None = None  # measured drafts per generated token (None: not measured)
    # Open loop (Poisson, trace): the measured send times of the requests (s, from the first),
    # replayed instead of a fresh draw of the schedule.
    sends: tuple[float, ...] | None = None
    # Closed loop: each client's recorded pause before each request (s, in request order). The loop
    # itself is simulated, never replayed at its measured send times: those are when the real engine
    # finished the previous requests, so a simulation a few percent slower would find each request
    # arriving before its predecessor finished and queue them, a cascade that made the fit's
    # objective jump and its leave-one-out folds land in bad optima.
    think: tuple[float, ...] | None = None
    # Replayed open loop: each request's own prompt and output tokens, in the order of `sends` (a
    # trace's differ request by request); None: every request has `prompt` and `output`.
    prompts: tuple[int, ...] | None = None
    outputs: tuple[int, ...] | None = None
    # The share of prompt tokens the server reported serving from its prefix cache (measured, 0: none):
    # replayed as each request's cached tokens, so a cache hit is not fitted as a fast prefill.
    hit: float = 0.0
    # How the anchor's TTFT and TPOT were read: "p50" (the median of the simulated requests, the
    # summary's) or "mean" (the mean over every request of the closed loop: a row read as its source
    # reads it, calibrate.published_runs; the p50 targets then hold the mean).
    reading: str = "p50"
    # Whether the engine that served it overlapped a step's host work with the device's previous step
    # (vLLM's async scheduling: simulate.schedulers.host_overlap of its release): its steps then cost
    # max(device, host) (cost_model.coeffs host_overlap) and its batches form while the step before
    # runs (the knobs' batching under `+overlap`, _anchors).
    host_overlap: bool = False

    @property
    def drafts(self) -> bool:
        """Whether the engine actually speculated (an anchor that drafted nothing is a plain decode)."""
        return self.knobs.spec != "none" and self.knobs.spec_k > 0 and self.drafted_per_token != 0.0


def _opt(r: pd.Series, col: str) -> float | None:
    v = r.get(col)
    return None if v is None or pd.isna(v) else float(v)


def _times(v) -> tuple[float, ...] | None:
    # a column of per-request times (send offsets, think times): None where the anchor has none
    return tuple(float(t) for t in v) if isinstance(v, (list, tuple, np.ndarray)) and len(v) else None


def _lengths(r: pd.Series, sends: tuple[float, ...] | None) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    # per-request lengths of a replayed open loop, where the records gave one pair per send
    p, o = _times(r.get("req_prompt_tokens")), _times(r.get("req_output_tokens"))
    if sends is None or p is None or o is None or not len(p) == len(o) == len(sends):
        return None, None
    return tuple(int(x) for x in p), tuple(int(x) for x in o)


def _anchors(df: pd.DataFrame) -> list[_Anchor]:
    out = []
    for _, r in df.iterrows():
        conc = int(r.get("concurrency", 0) or 0)
        rate = float(r.get("rate_rps", 0.0) or 0.0)
        rate = 0.0 if rate != rate else rate
        sends, think = _times(r.get("send_offsets")), _times(r.get("think_s"))
        if conc <= 0 and rate <= 0 and sends is None:  # no load and no sends to replay: one client
            conc = 1
        n = int(r["n_requests"]) if "n_requests" in r.index and pd.notna(r["n_requests"]) else max(32, 4 * conc)
        if think is not None and conc > 0:
            n = len(think)
        lengths = _lengths(r, sends) if conc <= 0 else (None, None)
        overlap = _host_overlap(r)
        out.append(
            _Anchor(
                _overlaid(Knobs.from_row(r)) if overlap else Knobs.from_row(r),
                int(r["prompt_tokens"]),
                int(r["output_tokens"]),
                conc,
                rate,
                n,
                _opt(r, "spec_accept_measured"),
                _opt(r, "spec_drafted_per_token"),
                None if conc > 0 else sends,
                think if conc > 0 else None,
                *lengths,
                _opt(r, "prefix_hit_rate") or 0.0,
                _reading(r),
                overlap,
            )
        )
    return out


def _host_overlap(r: pd.Series) -> bool:
    # the frame's host_overlap column (calibrate.published sets it per row from the engine's release)
    v = r.get("host_overlap")
    return bool(v) if v is not None and v == v else False


def _overlaid(k: Knobs) -> Knobs:
    # the batching policy under an overlap scheduler where it has one (kernels.layout: `+overlap`)
    b = f"{k.batching}+overlap"
    return replace(k, batching=b) if b in BATCHING else k


def _reading(r: pd.Series) -> str:
    v = r.get("reading")
    if v is None or v != v or v == "":
        return "p50"
    if v not in ("p50", "mean"):
        raise ValueError(f"reading: {v!r} is not p50 or mean")
    return str(v)


def predict(
    anchors: list[_Anchor], model: ModelCard | Sequence[ModelCard], hw: HardwareCard, params: CalibParams
) -> np.ndarray:
    """Predicted TARGETS for each anchor, shape (n_anchors, len(TARGETS)). model: one card for all
    anchors, or one per anchor (published anchors of one card mix models)."""
    out = np.full((len(anchors), len(TARGETS)), np.nan)
    for i, a in enumerate(anchors):
        model_i = model if isinstance(model, ModelCard) else model[i]
        accept = a.accept if a.accept is not None else resolve_acceptance(a.knobs)[0]
        c = coeffs(
            model_i,
            hw,
            a.knobs,
            params,
            accept=accept,
            drafted_per_token=a.drafted_per_token,
            host_overlap=a.host_overlap,
        )
        # memory for the longest request a replay holds (a trace's lengths vary)
        plan = plan_memory(model_i, hw, a.knobs, max(a.prompts or (a.prompt,)), max(a.outputs or (a.output,)), params)
        # a deployment of several replicas: one replica under its share of the load, as simulate_point
        # runs it (simulate.parallel.replica_load); a replay sends each replica every r-th request (round robin)
        conc, rate, busy = replica_load(a.concurrency, a.rate, a.knobs.replicas)
        if a.sends is not None:
            r, k = a.knobs.replicas, len(a.sends)
            busy = float(min(r, k))
            arr = des.trace(
                np.array(a.sends)[::r],
                np.array(a.prompts or (a.prompt,) * k)[::r],
                np.array(a.outputs or (a.output,) * k)[::r],
            )
        elif conc > 0:
            arr = des.closed_loop(conc, a.n, a.prompt, a.output, a.think)
        else:
            arr = des.poisson(rate, a.n, a.prompt, a.output, seed=i)
        cap = plan.kv_cap_tokens if plan.kv_cap_tokens > 0 else np.inf
        cached = np.minimum(np.round(a.hit * arr.prompt), arr.prompt - 1).astype(np.int64) if a.hit > 0 else None
        res = des.run(c, arr, a.knobs.batching, a.knobs.slots, a.knobs.chunk_tokens, cap, None, seed=i, cached=cached)
        s = dict(res.summary)
        if a.reading == "mean":  # the mean over every request in the median's slots (calibrate.published_runs)
            tpot = (res.finish_t - res.first_t) / np.maximum(res.output - 1, 1)
            s["ttft_p50_ms"], s["tpot_p50_ms"] = 1e3 * float(np.mean(res.ttft)), 1e3 * float(np.mean(tpot))
        out[i] = [s[t] * (busy if t == "throughput_tok_s" else 1.0) for t in TARGETS]
    return out
