"""Least-squares fit of the simulator's efficiencies and overheads to measured anchors: the space of
parameters it moves, where it starts, and the fit. One fit per (hardware, engine).

The anchors and their predictions (TARGETS, `_anchors`, `predict`) are calibrate.anchors', through
the same path as every simulated point, so what is calibrated is what is used; they are importable
from here as before.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from pareto_atlas.calibrate.anchors import TARGETS, _Anchor, _anchors, predict
from pareto_atlas.simulate.cost_model import compute_dtype, weight_bytes
from pareto_atlas.simulate.params import MAX_EFF_BW, CalibParams, base_format, default_params, kernel_format
from pareto_atlas.spec.cards import HardwareCard, ModelCard
from pareto_atlas.spec.knobs import Knobs

# Tails are noisier than medians in the anchors themselves, so they pull less on the fit.
WEIGHTS = {"ttft_p50_ms": 1.0, "ttft_p99_ms": 0.4, "tpot_p50_ms": 1.0, "tpot_p99_ms": 0.4, "throughput_tok_s": 1.0}
REQ_OVERHEAD_STARTS = (1e-3, 3e-2)  # s: where a request-overhead fit starts (see fit_params)
PRIOR_WEIGHT = 0.01  # keeps parameters the anchors cannot see at their starting values (at 0.05 it held llama.cpp's f16 decode attention at a tenth of its cost: a 1024-token prompt came out 10 % fast)
KNOB_FIELDS = tuple(f.name for f in fields(Knobs))
HEAD_RATIO_STARTS = (0.5, 1.0, 2.0, 4.0)
# A robust loss: residuals (weighted log ratios) up to about ROBUST_SCALE count squared, larger ones
# linearly, so one anchor a neighbour's job slowed (a TPOT 20x its repeats' was seen here) cannot
# drag every parameter to it; its leave-one-out error still shows, and so does the error bar.
ROBUST_SCALE = 0.1


def weight_format(weights: str, model: ModelCard | None = None) -> str:
    """The kernels a weight format runs on a model's rows (RANDOM runs Q4_0's; a K-quant on rows that
    do not fit its blocks, mostly legacy ones: simulate.params.kernel_format)."""
    return kernel_format(weights, model)


def _cards(model: ModelCard | Sequence[ModelCard], n: int) -> list[ModelCard]:
    return [model] * n if isinstance(model, ModelCard) else list(model)


@dataclass(frozen=True)
class _Space:
    """Which CalibParams entries the fit moves, in log space: per weight format its GEMV and GEMM
    cost per weight (dequantize + dot), per KV format the attention efficiency (reading the cache in
    decode) and, where the anchors span two prompt lengths, its matmuls' efficiency (a prompt's
    attention pairs; with one length they are confounded with the per-token weight cost and stay
    tied to the first), and the shared bandwidth efficiency, lm_head ratio and overheads."""

    names: tuple[str, ...]

    @classmethod
    def for_anchors(
        cls,
        anchors: list[_Anchor],
        fit_cv: bool,
        fixed: tuple[str, ...] = (),
        req_overhead: bool = False,
        cards: Sequence[ModelCard] | None = None,
        cpu: bool = False,
    ) -> "_Space":
        cards = list(cards) if cards is not None else [None] * len(anchors)
        fmts = sorted({weight_format(a.knobs.weights, c) for a, c in zip(anchors, cards)})
        names = [f"gemv:{d}" for d in fmts] + [f"gemm:{d}" for d in fmts]
        kvs = sorted({a.knobs.kv for a in anchors})
        names += [f"eff_attn:{kv}" for kv in kvs]
        if len({p for a in anchors for p in (a.prompts or (a.prompt,))}) >= 2:
            names += [f"attn_flops:{kv}" for kv in kvs]
        if (
            cpu and "eff_bw" not in fixed
        ):  # a bandwidth kept at another engine's fit stays the machine's for every format
            names += [f"bw:{w}" for w in _batched_formats(anchors, cards)]
        names += ["eff_bw", "head_ratio", "overhead_step_s", "overhead_seq_s"]
        if req_overhead:
            names.append("overhead_req_s")
        if any(a.knobs.spec == "ngram" and a.drafts for a in anchors):
            names.append("ngram_lookup_s")
        if any(a.knobs.spec in ("draft", "eagle") and a.drafts for a in anchors):
            names.append("draft_forward_s")
        if fit_cv:
            names.append("step_cv")
        return cls(tuple(n for n in names if n not in fixed))

    @staticmethod
    def _derived(p: CalibParams, hw: HardwareCard, d: str) -> float:
        from pareto_atlas.simulate.cost_model import per_weight_costs

        return per_weight_costs(hw, d, p)[0]  # d is a kernel format: its own table entry or derived

    def get(self, p: CalibParams, hw: HardwareCard) -> np.ndarray:
        v = []
        for n in self.names:
            kind, _, d = n.partition(":")
            if kind == "gemv":
                v.append(p.gemv_s_per_weight.get(d) or self._derived(p, hw, d))
            elif kind == "gemm":
                v.append(p.gemm_s_per_weight.get(d) or self._derived(p, hw, d))
            elif kind == "eff_attn":
                v.append(p.attn_eff(d))
            elif kind == "attn_flops":
                v.append(p.attn_flops_eff(d))
            elif kind == "bw":
                v.append(p.bw_eff(d))
            else:
                v.append(getattr(p, n))
        return np.log(np.maximum(np.array(v, float), 1e-15))

    def set(self, p: CalibParams, x: np.ndarray) -> CalibParams:
        gv, gm, at, af, bw, kw = (
            dict(p.gemv_s_per_weight),
            dict(p.gemm_s_per_weight),
            dict(p.eff_attn_by_kv),
            dict(p.eff_attn_flops_by_kv),
            dict(p.eff_bw_by_dtype),
            {},
        )
        for n, val in zip(self.names, np.exp(x)):
            kind, _, d = n.partition(":")
            if kind == "gemv":
                gv[d] = float(val)
            elif kind == "gemm":
                gm[d] = float(val)
            elif kind == "eff_attn":
                at[d] = min(float(val), 1.0)
            elif kind == "attn_flops":
                af[d] = min(float(val), 1.0)
            elif kind == "bw":
                bw[d] = min(float(val), MAX_EFF_BW)
            elif n == "eff_bw":
                kw[n] = min(float(val), MAX_EFF_BW)
            else:
                kw[n] = float(val)
        return replace(
            p,
            gemv_s_per_weight=gv,
            gemm_s_per_weight=gm,
            eff_attn_by_kv=at,
            eff_attn_flops_by_kv=af,
            eff_bw_by_dtype=bw,
            **kw,
        )

    def bounds(self, hw: HardwareCard | None = None) -> tuple[np.ndarray, np.ndarray]:
        # A GPU card's figures are spec-sheet peaks, which no kernel beats: bandwidth efficiency at
        # most 1 and at most 2 FLOPs per weight per token at the full rate (a CPU card's figures are
        # one measured SGEMM and copy, which quantized and threaded kernels do beat).
        gpu = hw is not None and hw.kind == "gpu"
        lo, hi = [], []
        for n in self.names:
            kind, _, d = n.partition(":")
            a, b = {
                "gemv": (1e-14, 1e-7),
                "gemm": (1e-14, 1e-7),
                "eff_attn": (1e-3, 1.0),
                "attn_flops": (1e-3, 1.0),
                "eff_bw": (1e-3, MAX_EFF_BW),
                "bw": (1e-3, MAX_EFF_BW),
                "head_ratio": (0.1, 10.0),
                "step_cv": (1e-6, 0.5),
            }.get(kind, (1e-7, 2.0))
            if gpu and kind in ("gemv", "gemm"):
                a = 2.0 / hw.peak_flops(compute_dtype(base_format(d), hw))
            if gpu and kind in ("eff_bw", "bw"):
                b = 1.0
            lo.append(np.log(a))
            hi.append(np.log(b))
        return np.array(lo), np.array(hi)


def _batched_formats(anchors: list[_Anchor], cards: Sequence[ModelCard | None] | None = None) -> list[str]:
    """Kernel formats (weight_format: a weight format on each anchor's model's rows, `cards`) measured at one sequence a step and at more: only there can a fit tell the
    time of streaming a format's weights (paid once a step) from computing them (paid per token), so
    only there is its own streaming efficiency fitted (CalibParams.eff_bw_by_dtype; CPU cards: a GPU
    card's published fits keep one, as before). On this CPU
    they differ by format: Q8_0's step took 74.7 ms at one slot and 68.3 ms at two (525 MB streamed
    at ~7.5 GB/s), F16's 70.5 and 98.3 ms (0.99 GB at ~14 GB/s, then compute). Keyed by the kernels, as
    the cost model reads it (CalibParams.bw_eff, which lends a kernel format without its own rate its
    family's): keyed by the weight format, the 0.5B's Q4_K_M file, mostly Q5_0 rows, set the streaming
    rate of the 1.5B's real Q4_K rows (its two-slot TPOT held out -29 %; -7 % keyed by the kernels)."""
    seen: dict[str, set[bool]] = {}
    for a, c in zip(anchors, cards if cards is not None else [None] * len(anchors)):
        batch = min(a.knobs.slots, a.concurrency) if a.concurrency > 0 else a.knobs.slots
        seen.setdefault(weight_format(a.knobs.weights, c), set()).add(batch > 1)
    return sorted(w for w, b in seen.items() if b == {True, False})


def fit_params(
    anchors_df: pd.DataFrame,
    model: ModelCard | Sequence[ModelCard],
    hw: HardwareCard,
    start: CalibParams | None = None,
    fit_cv: bool = True,
    head_ratio_starts: tuple[float, ...] = HEAD_RATIO_STARTS,
    fixed: tuple[str, ...] = (),
) -> tuple[CalibParams, np.ndarray]:
    """The least-squares CalibParams for these anchors and the per-anchor predictions they give
    (model: one card, or one per anchor as in `predict`); `fixed` names parameters kept at `start`."""
    anchors = _anchors(anchors_df)
    start = start or default_params(hw, str(anchors_df.get("engine", pd.Series(["llamacpp"])).iloc[0]))
    meas = anchors_df.reindex(columns=list(TARGETS)).to_numpy(float)
    w = np.array([WEIGHTS[t] for t in TARGETS])
    ok = np.isfinite(meas) & (meas > 0)
    # Only the formats these anchors run are fitted; anything else in `start` is dropped, so a
    # held-out format is predicted from its family (an extrapolation), never from a leaked value.
    cards = _cards(model, len(anchors))
    fmts = {weight_format(a.knobs.weights, c) for a, c in zip(anchors, cards)}
    kvs = {a.knobs.kv for a in anchors}
    start = replace(
        start,
        gemv_s_per_weight={k: v for k, v in start.gemv_s_per_weight.items() if k in fmts},
        gemm_s_per_weight={k: v for k, v in start.gemm_s_per_weight.items() if k in fmts},
        eff_attn_by_kv={k: v for k, v in start.eff_attn_by_kv.items() if k in kvs},
        eff_attn_flops_by_kv={k: v for k, v in start.eff_attn_flops_by_kv.items() if k in kvs},
    )
    # A request's overhead outside the steps shows only in TTFT (and E2E). It is fitted on a GPU,
    # where it is a large share of a TTFT of tens of ms (vLLM on an L4: 27 ms published at one
    # client, ~11 ms of it the prompt's steps). On a CPU a TTFT is seconds of prefill, the overhead
    # ~1 ms, under the anchors' repeat spread: fitting it there only moved the fit to another
    # optimum (held-out 512-token TTFT -23 % on q4_0 KV against -3 % without), so it keeps its default.
    req = hw.kind == "gpu" and bool(ok[:, [TARGETS.index("ttft_p50_ms"), TARGETS.index("ttft_p99_ms")]].any())
    space = _Space.for_anchors(anchors, fit_cv, fixed, req_overhead=req, cards=cards, cpu=hw.kind == "cpu")
    x0 = space.get(start, hw)
    lo, hi = space.bounds(hw)
    x0 = np.clip(x0, lo + 1e-9, hi - 1e-9)

    def resid(x: np.ndarray) -> np.ndarray:
        pred = predict(anchors, model, hw, space.set(start, x))
        r = np.where(ok, np.log(np.where(ok, pred, 1.0) / np.where(ok, meas, 1.0)) * w, 0.0)
        r = np.nan_to_num(r, nan=5.0, posinf=5.0, neginf=-5.0)
        return np.concatenate([r.ravel(), PRIOR_WEIGHT * (x - x0)])

    # The simulation is piecewise smooth in the parameters (integer step counts), so the
    # finite-difference step must be coarse enough to see the trend, not the jumps. How the
    # per-token cost splits between body and lm_head has local optima (a small head with a fast
    # GEMM mimics a large head at small batches), so the fit starts from a few head ratios.
    # Likewise a request's overhead trades against the prompt's compute (both in TTFT): from the
    # default's 5 ms a fit can stop at a short overhead and a slow GEMM; it starts from both sides.
    best = None
    req_starts = REQ_OVERHEAD_STARTS if "overhead_req_s" in space.names else (None,)
    for ratio, req in itertools.product(head_ratio_starts if "head_ratio" in space.names else (None,), req_starts):
        xs = x0.copy()
        if ratio is not None:
            xs[space.names.index("head_ratio")] = np.log(ratio)
        if req is not None:
            xs[space.names.index("overhead_req_s")] = np.log(req)
        sol = least_squares(
            resid, xs, bounds=(lo, hi), diff_step=1e-3, x_scale=1.0, max_nfev=200, loss="soft_l1", f_scale=ROBUST_SCALE
        )
        if best is None or sol.cost < best.cost:
            best = sol
    ridge = _ridge_start(best.x, space, start, anchors, cards, hw)
    if ridge is not None:
        sol = least_squares(
            resid,
            ridge,
            bounds=(lo, hi),
            diff_step=1e-3,
            x_scale=1.0,
            max_nfev=200,
            loss="soft_l1",
            f_scale=ROBUST_SCALE,
        )
        if sol.cost < best.cost:
            best = sol
    params = space.set(start, best.x)
    return params, predict(anchors, model, hw, params)


def _ridge_start(
    x: np.ndarray, space: _Space, start: CalibParams, anchors: list[_Anchor], cards: list[ModelCard], hw: HardwareCard
) -> np.ndarray | None:
    """`x` with each weight format's GEMV cost moved to the ridge of the fitted bandwidth (a token's
    compute as long as streaming its weights), or None where no GEMV cost is fitted. Why: a step is a
    soft max of the two sides, whose slope in the smaller one falls as its ratio to the larger to the
    power roofline_p. A fit that pushes a format's GEMV cost far under the streaming time leaves it
    where the step no longer feels it, however wrong the step: on this CPU F16 and Q8_0 stopped there
    with in-sample TPOT +54 % and -21 %, the shared bandwidth efficiency pulled between them. From
    the ridge both sides move the step, so the fit can leave it the way the anchors say. CPU cards
    only: a GPU card's GEMV costs are bounded at its peak rate, and its fits were not seen to stall."""
    names = [n for n in space.names if n.startswith("gemv:")]
    if hw.kind != "cpu" or not names or "eff_bw" not in space.names:
        return None
    p = space.set(start, x)
    out = x.copy()
    for n in names:
        d = n.partition(":")[2]
        # seconds per weight to stream it: its file's bytes per weight, as the anchors of the format ran them
        per = [
            weight_bytes(c, a.knobs.weights)
            / max(c.matmul_params, 1)
            / (hw.mem_bw_gbs * 1e9 * p.bw_eff(a.knobs.weights, c))
            for a, c in zip(anchors, cards)
            if weight_format(a.knobs.weights, c) == d
        ]
        if per:
            out[space.names.index(n)] = np.log(float(np.median(per)))
    lo, hi = space.bounds(hw)
    return np.clip(out, lo + 1e-9, hi - 1e-9)
