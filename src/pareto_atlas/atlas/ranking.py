"""A cell's points in order and the verdict on its winner: best first (objective, quality, cost, id), a tie
when the runner-up's interval overlaps by more than TIE_OVERLAP, low-confidence past LOW_CONFIDENCE_BAR, and
the projected points that would beat it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pareto_atlas.atlas.evidence import StudyRef, confirm_command, evidence_label
from pareto_atlas.atlas.regimes import Regime


# More than this share of the narrower interval shared with the runner-up's: a tie, not a winner.
TIE_OVERLAP = 0.5


# A latency or throughput bar wider than this (relative half-width): the winner is low-confidence.
LOW_CONFIDENCE_BAR = 0.5


def interval_overlap(lo0: float, hi0: float, lo1: float, hi1: float) -> float:
    """The share of the narrower of two intervals that the other covers (0 to 1); two points that
    coincide overlap fully, two distinct points not at all."""
    shared = min(hi0, hi1) - max(lo0, lo1)
    narrow = min(hi0 - lo0, hi1 - lo1)
    if narrow <= 0:
        return 1.0 if shared >= 0 else 0.0
    return float(min(max(shared / narrow, 0.0), 1.0))


def verdict(row: dict, lat_err: float, thr_err: float) -> tuple[str, str]:
    """(verdict, the words printed beside the winner) for a cell with a winner (see the module)."""
    if row.get("runner_up_label") and (row.get("overlap") or 0.0) > TIE_OVERLAP:
        return "tie", (
            f"tie with {' '.join(filter(None, (row['runner_up_label'], row.get('runner_up_where'))))} (intervals overlap {row['overlap']:.0%}, more than {TIE_OVERLAP:.0%})"
        )
    bars = [e for e in (lat_err, thr_err) if e == e]
    if bars and max(bars) > LOW_CONFIDENCE_BAR:
        return "low-confidence", f"low confidence (bar ±{max(bars):.0%}, wider than ±{LOW_CONFIDENCE_BAR:.0%})"
    return "winner", ""


def _rank(sub: pd.DataFrame, regime: Regime) -> np.ndarray:
    """Positions of `sub` best-first: objective, then quality, then cost, then id (deterministic ties)."""
    sign = 1.0 if regime.direction == "min" else -1.0
    keys = [
        sub["point_id"].astype(str).to_numpy(),
        np.nan_to_num(sub["cost_per_mtok"].to_numpy(dtype=float, na_value=np.nan), nan=np.inf),
        -np.nan_to_num(sub["quality_rel"].to_numpy(dtype=float, na_value=np.nan), nan=-np.inf),
        sign * sub[regime.objective].to_numpy(dtype=float, na_value=np.nan),
    ]
    return np.lexsort(keys)


def _better(a: float, b: float, direction: str) -> bool:
    return a < b if direction == "min" else a > b


def projected_beating(sub: pd.DataFrame, adm: pd.DataFrame, regime: Regime, value: float | None) -> pd.DataFrame:
    """The projected points of `sub` (in or boundary on quality, resting on priors) whose objective
    beats `value` (all of them when there is no winner's value), best first."""
    proj = sub[adm["projected"].to_numpy()]
    if value is not None and value == value and len(proj):
        v = proj[regime.objective].to_numpy(dtype=float, na_value=np.nan)
        proj = proj[(v < value) if regime.direction == "min" else (v > value)]
    return proj.iloc[_rank(proj, regime)] if len(proj) else proj


def _projected(sub: pd.DataFrame, adm: pd.DataFrame, regime: Regime, row: dict, study_ref: str | StudyRef) -> None:
    """The best projected point that beats the cell's winner, or any when the cell has none, with the
    command that would confirm it."""
    proj = projected_beating(sub, adm, regime, row.get("value"))
    row["n_projected"] = len(proj)
    if proj.empty:
        return
    p = proj.iloc[0]
    row.update(
        projected_label=p["label"],
        projected_hardware=p["hardware"],
        projected_value=float(p[regime.objective]),
        projected_evidence=str(evidence_label(proj.loc[[p.name]])[0]),
        confirm_command=confirm_command(p, study_ref),
    )


def _err(point: pd.Series, column: str) -> float:
    v = point.get(column)
    return float(v) if v is not None and v == v else float("nan")
