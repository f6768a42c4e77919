"""Least-squares fit of the simulator's efficiencies and overheads to measured anchors.

Predictions go through the same path as every simulated point (cost model + request-level
simulation), so what is calibrated is what is used. One fit per (hardware, engine).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from pareto_atlas.simulate import des
from pareto_atlas.simulate.api import resolve_acceptance
from pareto_atlas.simulate.cost_model import coeffs
from pareto_atlas.simulate.memory import plan_memory
from pareto_atlas.simulate.params import CalibParams, default_params
from pareto_atlas.spec.cards import HardwareCard, ModelCard
from pareto_atlas.spec.knobs import Knobs

TARGETS = ("ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "throughput_tok_s")
# Tails are noisier than medians in the anchors themselves, so they pull less on the fit.
WEIGHTS = {"ttft_p50_ms": 1.0, "ttft_p99_ms": 0.4, "tpot_p50_ms": 1.0, "tpot_p99_ms": 0.4, "throughput_tok_s": 1.0}
PRIOR_WEIGHT = 0.05      # keeps parameters the anchors cannot see at their starting values
KNOB_FIELDS = tuple(f.name for f in fields(Knobs))


def anchor_knobs(row: pd.Series) -> Knobs:
    return Knobs.from_dict({k: (row[k].item() if hasattr(row[k], "item") else row[k])
                            for k in KNOB_FIELDS if k in row.index and pd.notna(row[k])})


@dataclass(frozen=True)
class _Anchor:
    knobs: Knobs
    prompt: int
    output: int
    concurrency: int
    rate: float
    n: int


def _anchors(df: pd.DataFrame) -> list[_Anchor]:
    out = []
    for _, r in df.iterrows():
        conc = int(r.get("concurrency", 0) or 0)
        rate = float(r.get("rate_rps", 0.0) or 0.0)
        rate = 0.0 if rate != rate else rate
        if conc <= 0 and rate <= 0:
            conc = 1
        n = int(r["n_requests"]) if "n_requests" in r.index and pd.notna(r["n_requests"]) else max(32, 4 * conc)
        out.append(_Anchor(anchor_knobs(r), int(r["prompt_tokens"]), int(r["output_tokens"]), conc, rate, n))
    return out


def predict(anchors: list[_Anchor], model: ModelCard, hw: HardwareCard, params: CalibParams) -> np.ndarray:
    """Predicted TARGETS for each anchor, shape (n_anchors, len(TARGETS))."""
    out = np.full((len(anchors), len(TARGETS)), np.nan)
    for i, a in enumerate(anchors):
        accept, _ = resolve_acceptance(a.knobs)
        c = coeffs(model, hw, a.knobs, params, accept=accept)
        plan = plan_memory(model, hw, a.knobs, a.prompt, a.output, params)
        if a.concurrency > 0:
            arr = des.closed_loop(a.concurrency, a.n, a.prompt, a.output)
        else:
            arr = des.poisson(a.rate, a.n, a.prompt, a.output, seed=i)
        cap = plan.kv_cap_tokens if plan.kv_cap_tokens > 0 else np.inf
        s = des.run(c, arr, a.knobs.batching, a.knobs.slots, a.knobs.chunk_tokens, cap, None, seed=i).summary
        out[i] = [s[t] for t in TARGETS]
    return out


@dataclass(frozen=True)
class _Space:
    """Which CalibParams entries the fit moves, in log space."""

    names: tuple[str, ...]

    @classmethod
    def for_anchors(cls, anchors: list[_Anchor], fit_cv: bool) -> "_Space":
        dtypes = sorted({a.knobs.weights for a in anchors})
        names = [f"eff_bw:{d}" for d in dtypes] + [f"eff_flops:{d}" for d in dtypes]
        names += ["eff_attn", "overhead_step_s", "overhead_seq_s"]
        if any(a.knobs.spec == "ngram" for a in anchors):
            names.append("ngram_lookup_s")
        if any(a.knobs.spec in ("draft", "eagle") for a in anchors):
            names.append("draft_forward_s")
        if fit_cv:
            names.append("step_cv")
        return cls(tuple(names))

    def get(self, p: CalibParams) -> np.ndarray:
        v = []
        for n in self.names:
            kind, _, d = n.partition(":")
            if kind == "eff_bw":
                v.append(p.bw_eff(d))
            elif kind == "eff_flops":
                v.append(p.flops_eff(d))
            else:
                v.append(getattr(p, n))
        return np.log(np.maximum(np.array(v, float), 1e-6))

    def set(self, p: CalibParams, x: np.ndarray) -> CalibParams:
        bw, fl, kw = dict(p.eff_bw_by_dtype), dict(p.eff_flops_by_dtype), {}
        for n, val in zip(self.names, np.exp(x)):
            kind, _, d = n.partition(":")
            if kind == "eff_bw":
                bw[d] = min(float(val), 1.0)
            elif kind == "eff_flops":
                fl[d] = min(float(val), 1.0)
            elif n == "eff_attn":
                kw[n] = min(float(val), 1.0)
            else:
                kw[n] = float(val)
        return replace(p, eff_bw_by_dtype=bw, eff_flops_by_dtype=fl, **kw)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        lo = np.array([np.log(1e-3) if n.startswith("eff") else np.log(1e-6) for n in self.names])
        hi = np.array([0.0 if n.startswith("eff") else np.log(2.0 if n != "step_cv" else 0.5) for n in self.names])
        return lo, hi


def fit_params(anchors_df: pd.DataFrame, model: ModelCard, hw: HardwareCard, start: CalibParams | None = None,
               fit_cv: bool = True) -> tuple[CalibParams, np.ndarray]:
    """The least-squares CalibParams for these anchors and the per-anchor predictions they give."""
    anchors = _anchors(anchors_df)
    start = start or default_params(hw, str(anchors_df.get("engine", pd.Series(["llamacpp"])).iloc[0]))
    meas = anchors_df.reindex(columns=list(TARGETS)).to_numpy(float)
    w = np.array([WEIGHTS[t] for t in TARGETS])
    ok = np.isfinite(meas) & (meas > 0)
    space = _Space.for_anchors(anchors, fit_cv)
    x0 = space.get(start)
    lo, hi = space.bounds()
    x0 = np.clip(x0, lo + 1e-9, hi - 1e-9)

    def resid(x: np.ndarray) -> np.ndarray:
        pred = predict(anchors, model, hw, space.set(start, x))
        r = np.where(ok, np.log(np.where(ok, pred, 1.0) / np.where(ok, meas, 1.0)) * w, 0.0)
        r = np.nan_to_num(r, nan=5.0, posinf=5.0, neginf=-5.0)
        return np.concatenate([r.ravel(), PRIOR_WEIGHT * (x - x0)])

    # The simulation is piecewise smooth in the parameters (integer step counts), so the
    # finite-difference step must be coarse enough to see the trend, not the jumps.
    sol = least_squares(resid, x0, bounds=(lo, hi), diff_step=1e-3, x_scale=1.0, max_nfev=200)
    params = space.set(start, sol.x)
    return params, predict(anchors, model, hw, params)
