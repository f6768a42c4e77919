"""The Pareto frontier over any set of objectives, raw and with error bars respected.

Raw dominance (the paper's definition): A dominates B when A is at least as good on every axis
and strictly better on one. Error-bar dominance adds: on every axis where A is better, it is
better beyond both points' uncertainty (A's pessimistic bound beats B's optimistic bound); axes
where the two are equal (e.g. a quality inherited from the same arm) do not matter. Error-bar
dominance implies raw dominance, so it is never stricter than raw: a raw-frontier point is never
reported dominated. Raw-dominated points that no candidate beats beyond the error bars are
reported `tied` (cannot be separated from the frontier with the evidence at hand).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from pareto_atlas.atlas.objectives import DEFAULT_OBJECTIVES, Objective, interval

STATUSES = ("frontier", "tied", "dominated", "excluded")
_CHUNK_CELLS = 4_000_000  # bound on (targets x candidates x axes) booleans held at once


def pareto_mask(values: np.ndarray) -> np.ndarray:
    """Mask of the non-dominated rows of `values` (n, d); every column is minimised.

    Sorted lexicographically, no later row can dominate an earlier one, so each survivor in
    turn removes what it dominates: O(n x frontier size x d), vectorised over n.
    Identical rows do not dominate each other and are all kept.
    """
    x = np.asarray(values, dtype=float)
    n = len(x)
    keep = np.zeros(n, dtype=bool)
    if n == 0:
        return keep
    order = np.lexsort(x.T[::-1])
    cand, y = order, x[order]
    k = 0
    while k < len(y):
        p = y[k]
        dominated = np.all(p <= y, axis=1) & np.any(p < y, axis=1)
        alive = ~dominated
        k = int(np.count_nonzero(alive[:k])) + 1
        y, cand = y[alive], cand[alive]
    keep[cand] = True
    return keep


def _raw_dominates(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(targets, cands) mask: cand row a[j] raw-dominates target b[i]."""
    le = np.all(a[None, :, :] <= b[:, None, :], axis=2)
    lt = np.any(a[None, :, :] < b[:, None, :], axis=2)
    return le & lt


def _robust_dominates(a: np.ndarray, a_hi: np.ndarray, b: np.ndarray, b_lo: np.ndarray) -> np.ndarray:
    """(targets, cands) mask: cand beats target beyond the error bars on every axis where they differ."""
    equal = a[None, :, :] == b[:, None, :]
    separated = a_hi[None, :, :] < b_lo[:, None, :]
    better = np.any(a[None, :, :] < b[:, None, :], axis=2)
    return np.all(equal | separated, axis=2) & better


def _first_dominator(targets: np.ndarray, cands: np.ndarray, relation, scale: np.ndarray) -> np.ndarray:
    """For each target, the index of its nearest dominating candidate (-1 if none).

    Nearest (smallest normalised gap) because "dominated by X" reads best when X is the
    configuration just above it, not the far end of the frontier.
    """
    out = np.full(len(targets), -1, dtype=np.int64)
    if len(targets) == 0 or len(cands) == 0:
        return out
    step = max(1, _CHUNK_CELLS // max(1, len(cands) * targets.shape[1]))
    for s in range(0, len(targets), step):
        t = slice(s, s + step)
        dom = relation(t)
        gap = np.abs(targets[t][:, None, :] - cands[None, :, :]) / scale
        gap = np.where(dom, gap.sum(axis=2), np.inf)
        best = np.argmin(gap, axis=1)
        out[t] = np.where(dom.any(axis=1), best, -1)
    return out


def _oriented(points: pd.DataFrame, objectives: Sequence[Objective]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Values, pessimistic and optimistic bounds, all turned into "minimise" form."""
    cols, lo_cols, hi_cols = [], [], []
    for o in objectives:
        v = points[o.column].to_numpy(dtype=float, na_value=np.nan) * o.sign
        lo, hi = interval(points, o.column)
        lo, hi = lo * o.sign, hi * o.sign
        cols.append(v)
        lo_cols.append(np.minimum(lo, hi))
        hi_cols.append(np.maximum(lo, hi))
    return np.column_stack(cols), np.column_stack(lo_cols), np.column_stack(hi_cols)


def _robust_dominated_2d(xt: np.ndarray, lot: np.ndarray, xc: np.ndarray, hic: np.ndarray) -> np.ndarray:
    """Per target: whether any candidate beats it beyond the error bars (`_robust_dominates`), for two
    axes whose values lie inside their bounds, in O(n log n) instead of targets x candidates.

    With x inside [lo, hi], "separated" on an axis implies better on it, so a candidate dominates when
    it is separated on both axes, or equal on one and separated on the other (equal on both is not
    better). Each of the three is one sorted lookup."""
    out = np.zeros(len(xt), bool)
    if len(xt) == 0 or len(xc) == 0:
        return out
    # separated on both: among candidates with hi0 < lo0 of the target, the smallest hi1
    order = np.argsort(hic[:, 0], kind="stable")
    h0, pref = hic[order, 0], np.minimum.accumulate(hic[order, 1])
    k = np.searchsorted(h0, lot[:, 0], side="left")
    out |= (k > 0) & (pref[np.maximum(k - 1, 0)] < lot[:, 1])
    # equal on one axis, separated on the other: the smallest hi of the other axis per equal value
    for eq, sep in ((0, 1), (1, 0)):
        keys, inv = np.unique(xc[:, eq], return_inverse=True)
        best = np.full(len(keys), np.inf)
        np.minimum.at(best, inv.ravel(), hic[:, sep])
        pos = np.clip(np.searchsorted(keys, xt[:, eq]), 0, len(keys) - 1)
        out |= (keys[pos] == xt[:, eq]) & (best[pos] < lot[:, sep])
    return out


def _frontier_group(
    x: np.ndarray, lo: np.ndarray, hi: np.ndarray, error_bars: bool, dominators: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Status codes (0 frontier, 1 tied, 2 dominated) and dominator indices for one group.
    `dominators=False`: the statuses only where that is faster (two axes): a point beaten beyond
    the error bars by a non-frontier point then has no `robust_dominated_by` (-2)."""
    n = len(x)
    raw = pareto_mask(x)
    status = np.where(raw, 0, 2)
    dom_raw = np.full(n, -1, dtype=np.int64)
    dom_rob = np.full(n, -1, dtype=np.int64)
    f_idx, d_idx = np.flatnonzero(raw), np.flatnonzero(~raw)
    if len(d_idx) == 0:
        return status, raw, dom_raw, dom_rob
    span = np.nanmax(x, axis=0) - np.nanmin(x, axis=0)
    scale = np.where(span > 0, span, 1.0)
    xf, xd = x[f_idx], x[d_idx]
    near = _first_dominator(xd, xf, lambda t: _raw_dominates(xf, xd[t]), scale)
    dom_raw[d_idx] = f_idx[near]  # a raw-dominated point always has a dominator on the frontier
    if not error_bars:
        return status, raw, dom_raw, dom_rob
    # Error-bar pass 1: beaten beyond the error bars by a frontier point.
    rob = _first_dominator(xd, xf, lambda t: _robust_dominates(xf, hi[f_idx], xd[t], lo[d_idx][t]), scale)
    dom_rob[d_idx] = np.where(rob >= 0, f_idx[np.maximum(rob, 0)], -1)
    # Pass 2: points not separable from the frontier may still be clearly beaten by another such point.
    t_idx = d_idx[rob < 0]
    if len(t_idx):
        c_idx = np.concatenate([f_idx, t_idx])
        if not dominators and x.shape[1] == 2 and bool(np.all((lo <= x) & (x <= hi))):
            beaten = _robust_dominated_2d(x[t_idx], lo[t_idx], x[c_idx], hi[c_idx])
            dom_rob[t_idx] = np.where(beaten, -2, -1)
        else:
            xt, xc = x[t_idx], x[c_idx]
            rob2 = _first_dominator(xt, xc, lambda t: _robust_dominates(xc, hi[c_idx], xt[t], lo[t_idx][t]), scale)
            dom_rob[t_idx] = np.where(rob2 >= 0, c_idx[np.maximum(rob2, 0)], -1)
    status[d_idx] = np.where(dom_rob[d_idx] != -1, 2, 1)
    return status, raw, dom_raw, dom_rob


def frontier(
    points: pd.DataFrame,
    objectives: Sequence[str | Objective] = DEFAULT_OBJECTIVES,
    *,
    by: Sequence[str] = ("workload",),
    error_bars: bool = True,
    dominators: bool = True,
) -> pd.DataFrame:
    """The points table with the frontier marked, computed separately within each `by` group.

    Added columns: `raw_frontier` (bool, plain Pareto without error bars), `frontier_status`
    (frontier | tied | dominated | excluded), `dominated_by` (point_id of the nearest raw-frontier
    point that dominates it), `robust_dominated_by` (point_id of a point that beats it beyond the
    error bars), `excluded_reason`. Infeasible points and points with a missing objective are
    excluded, never silently dropped. With `error_bars=False`, status is the raw verdict.
    `dominators=False` (a figure's statuses): `robust_dominated_by` may be left empty for a point
    that only a non-frontier point beats; every status is the same.
    """
    objs = [Objective.parse(o) for o in objectives]
    if not objs:
        raise ValueError("frontier: objectives is empty; give at least one objective column")
    # `points` carry their derived columns (objectives.with_derived): a missing one is named below
    if "model" in points.columns and "model" not in by and by:
        by = ("model", *by)  # a frontier is always per (model, workload): Algorithm 1 of the seed paper
    missing = [o.column for o in objs if o.column not in points.columns] + [c for c in by if c not in points.columns]
    if missing:
        raise ValueError(f"frontier: points table has no column {missing[0]!r}; columns: {', '.join(points.columns)}")
    out = points.reset_index(drop=True).copy()
    n = len(out)
    ids = out["point_id"].astype(str).to_numpy() if "point_id" in out.columns else np.arange(n).astype(str)
    x, lo, hi = _oriented(out, objs)
    feasible = out["feasible"].fillna(False).astype(bool).to_numpy() if "feasible" in out.columns else np.ones(n, bool)
    finite = np.isfinite(x).all(axis=1)
    reason = np.where(~feasible, "infeasible", np.where(~finite, "missing objective", ""))
    # Unknown error bars count as none, never as infinitely wide.
    lo = np.where(np.isfinite(lo), lo, x)
    hi = np.where(np.isfinite(hi), hi, x)

    status = np.full(n, 3, dtype=np.int64)
    raw = np.zeros(n, dtype=bool)
    dom_raw = np.full(n, -1, dtype=np.int64)
    dom_rob = np.full(n, -1, dtype=np.int64)
    ok = feasible & finite
    groups = out.loc[ok].groupby(list(by), sort=False, dropna=False).indices if by else {(): np.flatnonzero(ok)}
    ok_idx = np.flatnonzero(ok)
    for g_local in groups.values():
        g = ok_idx[g_local] if by else g_local
        s, r, dr, db = _frontier_group(x[g], lo[g], hi[g], error_bars, dominators)
        status[g], raw[g] = s, r
        dom_raw[g] = np.where(dr >= 0, g[np.maximum(dr, 0)], -1)
        dom_rob[g] = np.where(db >= 0, g[np.maximum(db, 0)], -1)

    if not error_bars:
        status = np.where(status == 1, 2, status)
    out["raw_frontier"] = raw
    out["frontier_status"] = np.asarray(STATUSES, dtype=object)[status]
    out["dominated_by"] = np.where(dom_raw >= 0, ids[np.maximum(dom_raw, 0)], "")
    out["robust_dominated_by"] = np.where(dom_rob >= 0, ids[np.maximum(dom_rob, 0)], "")
    out["excluded_reason"] = reason
    return out


def projection(
    points: pd.DataFrame,
    x: str | Objective,
    y: str | Objective,
    *,
    by: Sequence[str] = ("workload",),
    error_bars: bool = True,
    dominators: bool = True,
) -> pd.DataFrame:
    """The 2-D frontier over two objectives (the figures' quality-latency and cost-quality views)."""
    return frontier(points, [x, y], by=by, error_bars=error_bars, dominators=dominators)


def frontier_line(points: pd.DataFrame, x: str | Objective, y: str | Objective) -> pd.DataFrame:
    """Raw 2-D frontier points of one group, sorted along x: the staircase a figure draws."""
    ox, oy = Objective.parse(x), Objective.parse(y)
    f = frontier(points, [ox, oy], by=(), error_bars=False)
    return f[f["raw_frontier"]].sort_values(ox.column)
