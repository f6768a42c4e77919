"""The dominant configuration per regime, per hardware and overall, with the boundary cases.

A cell of the atlas is (regime, workload, hardware) or (regime, workload, "all"). Its winner is
the admitted point with the best objective; the cell says where the number came from
(measured / simulated ± error / prior), whether the runner-up is separated beyond the error
bars, and whether a stacked combination (n_opts >= 2) beats every single method (the boxed cells).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from pareto_atlas.atlas.objectives import interval
from pareto_atlas.atlas.regimes import Regime, admission

ALL = "all"
WINNER_COLUMNS = (
    "regime", "workload", "hardware", "point_id", "label", "provenance", "quality_provenance", "objective",
    "direction", "value", "value_lo", "value_hi", "quality_rel", "cost_per_mtok", "tpot_p99_ms", "ttft_p99_ms",
    "throughput_tok_s", "n_opts", "optimizations", "stacked", "stack_beats_singles", "best_single_label",
    "best_single_value", "runner_up_label", "runner_up_value", "separated", "n_candidates", "n_boundary", "note",
)


def _rank(sub: pd.DataFrame, regime: Regime) -> np.ndarray:
    """Positions of `sub` best-first: objective, then quality, then cost, then id (deterministic ties)."""
    sign = 1.0 if regime.direction == "min" else -1.0
    keys = [sub["point_id"].astype(str).to_numpy(),
            np.nan_to_num(sub["cost_per_mtok"].to_numpy(dtype=float, na_value=np.nan), nan=np.inf),
            -np.nan_to_num(sub["quality_rel"].to_numpy(dtype=float, na_value=np.nan), nan=-np.inf),
            sign * sub[regime.objective].to_numpy(dtype=float, na_value=np.nan)]
    return np.lexsort(keys)


def _better(a: float, b: float, direction: str) -> bool:
    return a < b if direction == "min" else a > b


def _cell(sub: pd.DataFrame, adm: pd.DataFrame, regime: Regime, workload: str, hardware: str) -> dict:
    row: dict = {c: None for c in WINNER_COLUMNS}
    row.update(regime=regime.name, workload=workload, hardware=hardware, objective=regime.objective,
               direction=regime.direction, n_boundary=int((adm["boundary"] & adm["meets_constraints"]).sum()))
    cand = sub[adm["admitted"].to_numpy()]
    row["n_candidates"] = len(cand)
    if cand.empty:
        why = "no configuration meets the constraints" if not adm["meets_constraints"].any() else \
            "every configuration that meets the constraints fails the quality guard"
        row.update(point_id="", label="", note=why, stacked=False, stack_beats_singles=False, separated=False)
        return row
    order = _rank(cand, regime)
    best = cand.iloc[order[0]]
    lo, hi = interval(cand.iloc[order[:2]], regime.objective)
    for c in ("point_id", "label", "provenance", "quality_provenance", "quality_rel", "cost_per_mtok", "tpot_p99_ms",
              "ttft_p99_ms", "throughput_tok_s", "optimizations"):
        row[c] = best.get(c)
    row.update(value=float(best[regime.objective]), value_lo=float(lo[0]), value_hi=float(hi[0]),
               n_opts=int(best["n_opts"]), stacked=bool(best["n_opts"] >= 2), note="")
    if len(order) > 1:
        ru = cand.iloc[order[1]]
        row.update(runner_up_label=ru["label"], runner_up_value=float(ru[regime.objective]))
        # Separated: the winner's pessimistic bound still beats the runner-up's optimistic one.
        row["separated"] = bool(hi[0] < lo[1]) if regime.direction == "min" else bool(lo[0] > hi[1])
    else:
        row["separated"] = True
    singles = cand[cand["n_opts"] <= 1]
    if len(singles):
        s = singles.iloc[_rank(singles, regime)[0]]
        row.update(best_single_label=s["label"], best_single_value=float(s[regime.objective]))
    # Boxed cell: a stack wins and strictly beats the best single method (or no single qualifies).
    row["stack_beats_singles"] = bool(row["stacked"] and (singles.empty or _better(row["value"], row["best_single_value"], regime.direction)))
    return row


def winners(points: pd.DataFrame, regimes: Sequence[Regime], *, per_hardware: bool = True) -> pd.DataFrame:
    """One row per (regime, workload, hardware) cell plus (regime, workload, "all"); see WINNER_COLUMNS."""
    rows = []
    pts = points.reset_index(drop=True)
    workloads = pd.unique(pts["workload"].astype(str))
    hardware = sorted(pd.unique(pts["hardware"].astype(str))) if per_hardware else []
    for regime in regimes:
        adm = admission(pts, regime)
        for wl in workloads:
            in_wl = (pts["workload"].astype(str) == wl).to_numpy()
            for hw in [*hardware, ALL]:
                m = in_wl if hw == ALL else in_wl & (pts["hardware"].astype(str) == hw).to_numpy()
                rows.append(_cell(pts[m], adm[m], regime, wl, hw))
    return pd.DataFrame(rows, columns=list(WINNER_COLUMNS))


def boundary_cases(points: pd.DataFrame, regimes: Sequence[Regime], cells: pd.DataFrame | None = None) -> pd.DataFrame:
    """Points whose quality interval straddles a regime's floor, with what the verdict changes.

    `effect`: "wins" (admitted on the point estimate and wins its hardware cell), "would win if
    admitted" (rejected, but meets the constraints and beats that cell's winner), or "none".
    """
    pts = points.reset_index(drop=True)
    cells = winners(pts, regimes) if cells is None else cells
    cols = ["regime", "workload", "hardware", "point_id", "label", "provenance", "quality_rel", "quality_rel_lo",
            "quality_rel_hi", "floor", "admitted", "meets_constraints", "effect"]
    frames = []
    for regime in regimes:
        if regime.quality_floor is None:
            continue
        adm = admission(pts, regime)
        b = adm["boundary"].to_numpy() & adm["meets_constraints"].to_numpy()
        if not b.any():
            continue
        keep = list(dict.fromkeys(["workload", "hardware", "point_id", "label", "provenance", "quality_rel", regime.objective]))
        p = pts.loc[b, keep].copy()
        p[["workload", "hardware"]] = p[["workload", "hardware"]].astype(str)
        for c in ("quality_rel_lo", "quality_rel_hi", "admitted", "meets_constraints"):
            p[c] = adm.loc[b, c].to_numpy()
        cell = cells[cells["regime"] == regime.name][["workload", "hardware", "point_id", "value"]]
        cell = cell.rename(columns={"point_id": "cell_winner", "value": "cell_value"})
        p = p.merge(cell, on=["workload", "hardware"], how="left")
        mine = p[regime.objective].to_numpy(dtype=float)
        theirs = p["cell_value"].to_numpy(dtype=float, na_value=np.nan)
        beats = (mine < theirs) if regime.direction == "min" else (mine > theirs)
        no_winner = p["cell_winner"].fillna("").astype(str).to_numpy() == ""
        wins = p["admitted"].to_numpy() & (p["cell_winner"].astype(str).to_numpy() == p["point_id"].astype(str).to_numpy())
        would = ~p["admitted"].to_numpy() & p["meets_constraints"].to_numpy() & (beats | no_winner)
        p["effect"] = np.select([wins, would], ["wins", "would win if admitted"], default="none")
        p["regime"], p["floor"] = regime.name, regime.quality_floor
        frames.append(p[cols])
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)
