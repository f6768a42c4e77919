"""Measured decode step times at several slot counts, fitted through the simulator's own step cost:
cost_model.coeffs and kernels.step_time on a card read from the GGUF served, so what is fitted (the
routing skew of simulate.moe's touched-experts law, the step's fixed cost, the bandwidth weights stream
at, ...) and what is predicted on the slot counts held out is the product's MoE cost, not a formula
of its own.

A step of B decoding sequences, each over `ctx` tokens of context, costs step_time(c, B, B ctx, 0, 0, 0, B)
with c = coeffs(card, hw, Knobs(weights, slots=B), params, skew=s). Free fields (FREE) are fitted by
least squares on relative error, in log space for the positive ones, from a few starts.

TwinLaw is the same step written from llama.cpp's CPU kernels instead: the dense twin's measured step
plus a pass over each touched expert and a dot product per routed row (ggml's mul_mat_id), three
costs fitted on some slot counts (benchmarks/bench_moe_cpu.py prints both on the held-out ones).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import numpy as np

from pareto_atlas.simulate.cost_model import coeffs
from pareto_atlas.simulate.kernels import step_time
from pareto_atlas.simulate.params import MAX_EFF_BW, CalibParams
from pareto_atlas.spec.cards import HardwareCard, ModelCard
from pareto_atlas.spec.knobs import Knobs

# Fields a fit may free: (lower, upper). gemv: seconds per weight per token of the matmuls (GEMV and
# GEMM alike; llama.cpp repacks no float weights, so there is no GEMM tile). eff_bw: the weights'
# streaming bandwidth as a fraction of the card's (a CPU card's is numpy's read rate, which llama.cpp's
# threads beat: up to MAX_EFF_BW).
FREE: dict[str, tuple[float, float]] = {
    "skew": (0.3, 1.5),
    "overhead_step_s": (1e-6, 0.5),
    "overhead_seq_s": (1e-7, 0.05),
    "eff_bw": (0.05, MAX_EFF_BW),
    "gemv": (1e-14, 1e-8),
}
LOG = ("overhead_step_s", "overhead_seq_s", "eff_bw", "gemv")


@dataclass(frozen=True)
class StepFit:
    """Fitted values (FREE's names) on the slot counts `slots`, and the params and skew they make."""

    values: Mapping[str, float]
    params: CalibParams
    skew: float
    slots: tuple[int, ...]
    rel_err: Mapping[int, float]  # on the fitted slot counts: predicted / measured - 1


def with_values(params: CalibParams, weights: str, values: Mapping[str, float]) -> tuple[CalibParams, float | None]:
    """`params` with the fitted fields set (per-format ones for `weights`), and the skew (None: not given)."""
    p = params
    for name, v in values.items():
        if name == "eff_bw":
            p = replace(p, eff_bw_by_dtype={**p.eff_bw_by_dtype, weights: float(v)})
        elif name == "gemv":
            p = replace(
                p,
                gemv_s_per_weight={**p.gemv_s_per_weight, weights: float(v)},
                gemm_s_per_weight={**p.gemm_s_per_weight, weights: float(v)},
            )
        elif name in ("overhead_step_s", "overhead_seq_s"):
            p = replace(p, **{name: float(v)})
        elif name != "skew":
            raise ValueError(f"fit: unknown field {name!r}; allowed: {', '.join(FREE)}")
    return p, (float(values["skew"]) if "skew" in values else None)


def step_s(
    card: ModelCard, hw: HardwareCard, weights: str, params: CalibParams, slots: int, ctx: float, skew: float | None
) -> float:
    """Seconds of one decode step of `slots` sequences of `ctx` tokens each, as the simulator costs it."""
    c = coeffs(card, hw, Knobs(weights=weights, slots=max(int(slots), 1)), params, skew=skew)
    b = float(slots)
    return float(step_time(c, b, b * ctx, 0.0, 0.0, 0.0, b))


def fit_steps(
    card: ModelCard,
    hw: HardwareCard,
    weights: str,
    base: CalibParams,
    measured: Mapping[int, float],
    free: Sequence[str],
    ctx: float,
    fixed: Mapping[str, float] | None = None,
) -> StepFit:
    """Fit the `free` fields (FREE) to measured step seconds by slot count; `fixed` values are set first."""
    from scipy.optimize import least_squares

    bad = [f for f in free if f not in FREE]
    if bad or not free:
        raise ValueError(f"fit: free fields {list(free)}: each one of {', '.join(FREE)}")
    if len(measured) < len(free):
        raise ValueError(f"fit: {len(measured)} slot counts cannot fit {len(free)} free fields ({', '.join(free)})")
    base, fixed_skew = with_values(base, weights, fixed or {})
    slots = sorted(measured)
    meas = np.array([measured[b] for b in slots], dtype=float)
    lo = np.array([np.log(FREE[f][0]) if f in LOG else FREE[f][0] for f in free])
    hi = np.array([np.log(FREE[f][1]) if f in LOG else FREE[f][1] for f in free])

    def values(x: np.ndarray) -> dict[str, float]:
        return {f: float(np.exp(v) if f in LOG else v) for f, v in zip(free, x)}

    def predict(x: np.ndarray) -> np.ndarray:
        p, skew = with_values(base, weights, values(x))
        s = skew if skew is not None else fixed_skew
        return np.array([step_s(card, hw, weights, p, b, ctx, s) for b in slots])

    def resid(x: np.ndarray) -> np.ndarray:
        return predict(x) / meas - 1.0

    best = None
    for frac in (0.2, 0.5, 0.8):  # a few starts across the box: the roofline's corner has local minima
        x0 = lo + frac * (hi - lo)
        r = least_squares(resid, x0, bounds=(lo, hi), x_scale="jac", xtol=1e-12, ftol=1e-12, gtol=1e-12)
        if best is None or r.cost < best.cost:
            best = r
    vals = values(best.x)
    params, skew = with_values(base, weights, vals)
    err = dict(zip(slots, (float(e) for e in resid(best.x))))
    return StepFit(vals, params, skew if skew is not None else fixed_skew, tuple(slots), err)


def predict_steps(
    card: ModelCard, hw: HardwareCard, weights: str, fit: StepFit, slots: Sequence[int], ctx: float
) -> dict[int, float]:
    """The fit's step seconds at each slot count."""
    return {b: step_s(card, hw, weights, fit.params, b, ctx, fit.skew) for b in slots}


@dataclass(frozen=True)
class TwinLaw:
    """An MoE's decode step as its dense twin's plus what its experts add, the way llama.cpp's CPU
    backend runs them (ggml's mul_mat_id): each expert a step's tokens touch is one pass over that
    expert's weights (its rows in blocks of 16, each block reused from cache by every token routed to
    it), and each routed token-expert pair is one more dot product per weight row (F32 vec_dot, no
    tiled GEMM for routed weights). The twin runs the same attention, router-free norms, output
    matrix and sampling per sequence, and one token's worth of expert-sized MLP, so

        step(B) = twin(B) + c0 + L (t_e (T(B) - k) + t_r k (B - 1))

    with T(B) the experts a layer's B tokens touch (simulate.moe's law at the routing's skew), L the
    MoE layers, k experts per token. c0 (seconds), t_e (seconds per touched expert per layer) and t_r
    (seconds per extra routed row per layer) are fitted on some slot counts; none may be negative."""

    c0: float
    t_expert: float
    t_row: float
    skew: float
    slots: tuple[int, ...]
    rel_err: Mapping[int, float]

    def predict(self, card: ModelCard, slots: int, twin_s: float) -> float:
        from pareto_atlas.simulate.moe import experts_touched

        k = card.experts_per_token
        extra = self.t_expert * (experts_touched(slots, card, self.skew) - k) + self.t_row * k * (slots - 1)
        return twin_s + self.c0 + card.moe_layers * extra


def fit_twin_law(card: ModelCard, moe_s: Mapping[int, float], twin_s: Mapping[int, float], skew: float) -> TwinLaw:
    """TwinLaw's c0, t_e, t_r fitted (non-negative least squares on relative error) to the MoE's step
    seconds by slot count, given the twin's at the same slot counts; needs 1 slot and two more."""
    from scipy.optimize import nnls

    from pareto_atlas.simulate.moe import experts_touched

    slots = sorted(moe_s)
    if not card.is_moe or 1 not in moe_s or len(slots) < 3 or any(b not in twin_s for b in slots):
        raise ValueError(
            f"twin law: slot counts {slots} must include 1 and two more, each with the twin's step, on an MoE card"
        )
    k, L = card.experts_per_token, card.moe_layers
    rows = []
    for b in slots:
        rows.append([1.0, L * (experts_touched(b, card, skew) - k), L * k * (b - 1)])
    a = np.array(rows) / np.array([moe_s[b] for b in slots])[:, None]
    y = np.array([(moe_s[b] - twin_s[b]) / moe_s[b] for b in slots])
    # c0 may be either sign (the MoE's router and gathers against the twin's one MLP): split it in two
    a = np.hstack([a[:, :1], -a[:, :1], a[:, 1:]])
    x, _ = nnls(a, y)
    law = TwinLaw(float(x[0] - x[1]), float(x[2]), float(x[3]), float(skew), tuple(slots), {})
    err = {b: law.predict(card, b, twin_s[b]) / moe_s[b] - 1 for b in slots}
    return replace(law, rel_err=err)
