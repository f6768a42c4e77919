"""Which configuration to measure next: the one whose error bar most threatens frontier membership."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from pareto_atlas.spec.knobs import BITS_PER_KV, BITS_PER_WEIGHT

BATCHINGS = ("static", "continuous", "chunked", "slo", "disagg")


def knob_features(df: pd.DataFrame) -> np.ndarray:
    """Points in a normalised knob space (each axis ~unit range) for distances to anchors."""
    f = [
        np.log2(df["weights"].map(BITS_PER_WEIGHT).to_numpy(float)) / 2,
        np.log2(df["kv"].map(BITS_PER_KV).to_numpy(float)) / 2,
        np.log2(df["kv_keep"].to_numpy(float)) / 2,
        np.log2(df["sparse_budget"].to_numpy(float)) / 2,
        (df["spec"] != "none").to_numpy(float) * (0.5 + df["spec_k"].to_numpy(float) / 8),
        np.log2(df["slots"].to_numpy(float)) / 4,
        np.log2(np.maximum(df.get("concurrency", pd.Series(1, index=df.index)).to_numpy(float), 1)) / 4,
        np.log2(df["prompt_tokens"].to_numpy(float)) / 4 if "prompt_tokens" in df else np.zeros(len(df)),
        np.log2(df["output_tokens"].to_numpy(float)) / 4 if "output_tokens" in df else np.zeros(len(df)),
    ]
    f += [(df["batching"] == b).to_numpy(float) * 0.5 for b in BATCHINGS]
    return np.column_stack(f)


def _dominated(a: np.ndarray, b: np.ndarray, ref_a: np.ndarray, ref_b: np.ndarray) -> np.ndarray:
    """For points (a, b) (both minimised): is each dominated by some reference point?"""
    order = np.argsort(ref_a, kind="stable")
    sa, sb = ref_a[order], np.minimum.accumulate(ref_b[order])
    # Best b among references with ref_a <= a (strictly smaller on at least one axis).
    idx = np.searchsorted(sa, a, side="right") - 1
    best = np.where(idx >= 0, sb[np.clip(idx, 0, None)], np.inf)
    idx_strict = np.searchsorted(sa, a, side="left") - 1
    best_strict = np.where(idx_strict >= 0, sb[np.clip(idx_strict, 0, None)], np.inf)
    return (best < b) | (best_strict <= b)


def propose_next_anchor(
    candidates: pd.DataFrame,
    anchors: pd.DataFrame,
    base_rel_err: float,
    objectives: tuple[str, str] = ("tpot_p50_ms", "cost_per_mtok"),
    growth: float = 1.0,
) -> pd.Series:
    """The unmeasured candidate whose uncertainty most threatens frontier membership.

    A candidate's error bar grows with its distance from the nearest anchor in knob space:
    err = base_rel_err x (1 + growth x distance). It is contested when it is on the frontier
    at its pessimistic corner XOR at its optimistic one, i.e. the error bar alone could change
    its membership; among contested points the largest error bar wins (ties: nearest the
    nominal frontier). Both objectives are minimised (pass e.g. cost rather than throughput).
    Returns the candidate row with `distance`, `rel_err`, `contested` and `reason` added.
    """
    cand = candidates[candidates.get("feasible", True).astype(bool)].copy()
    cand = cand[np.isfinite(cand[list(objectives)]).all(axis=1)]
    if cand.empty:
        raise ValueError("propose_next_anchor: no feasible candidate with finite objectives")
    fa = knob_features(cand)
    if len(anchors):
        fb = knob_features(anchors)
        d = (
            np.sqrt(((fa[:, None, :] - fb[None, :, :]) ** 2).sum(-1)).min(axis=1)
            if len(fa) * len(fb) < 5e7
            else np.array([np.sqrt(((fb - x) ** 2).sum(-1)).min() for x in fa])
        )
    else:
        d = np.full(len(cand), math.sqrt(fa.shape[1]))
    err = base_rel_err * (1.0 + growth * d)
    a, b = (cand[o].to_numpy(float) for o in objectives)
    nominal_on = ~_dominated(a, b, a, b)
    optimistic_on = ~_dominated(a * (1 - err), b * (1 - err), a, b)
    pessimistic_on = ~_dominated(a * (1 + err), b * (1 + err), a, b)
    contested = optimistic_on & ~pessimistic_on
    score = np.where(contested, err, 0.0) + 1e-9 * nominal_on
    cand["distance"], cand["rel_err"], cand["contested"] = d, err, contested
    best = cand.iloc[int(np.argmax(score))].copy()
    where = "on" if nominal_on[int(np.argmax(score))] else "next to"
    best["reason"] = (
        f"{where} the {objectives[0]} x {objectives[1]} frontier, knob distance {best['distance']:.2f} "
        f"from the nearest anchor, error bar ±{best['rel_err']:.0%} could change its membership"
        if best["contested"]
        else "no contested point; farthest frontier point from the anchors"
    )
    if not best["contested"]:
        idx = int(np.argmax(np.where(nominal_on, d, -1.0)))
        best = cand.iloc[idx].copy()
        best["reason"] = "no contested point; farthest frontier point from the anchors"
    return best
