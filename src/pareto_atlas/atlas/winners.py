"""The dominant configuration per regime, per hardware and overall, with the boundary cases and
the projected ones.

A cell of the atlas is (regime, model, workload, hardware) or (regime, model, workload, "all"): the
seed paper's frontier "for each (model, workload)", per card. Its winner is
the admitted point with the best objective (admitted: in on the quality guard and, unless priors
are allowed, resting on evidence for both quality and speed); the cell says what the winner's
quality and speed rest on, whether the runner-up is separated beyond the error bars, whether a
stacked combination (n_opts >= 2) beats every single method (the boxed cells), and the best
projected point that would beat it, with the command that would measure it.

A winner is not crowned where the figures cannot tell it from its runner-up, or cannot be trusted
to within a factor (`verdict`):
  "tie"             its objective's interval overlaps the runner-up's by more than half of the
                    narrower of the two (TIE_OVERLAP): both are named, neither is the winner;
  "low-confidence"  its latency or throughput bar is wider than +-50 % (LOW_CONFIDENCE_BAR): a card
                    calibrated on sources that disagree, or a point carried across model sizes;
  "winner"          otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from pareto_atlas.atlas.evidence import StudyRef, confirm_command, evidence_label, quality_evidence, speed_evidence
from pareto_atlas.atlas.objectives import interval, with_derived
from pareto_atlas.atlas.regimes import Regime, admission
from pareto_atlas.simulate.space import load_label
from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.atlas.ranking import interval_overlap, verdict, _rank, _better, projected_beating, _projected, _err
from pareto_atlas.atlas.ranking import (
    TIE_OVERLAP as TIE_OVERLAP,
    LOW_CONFIDENCE_BAR as LOW_CONFIDENCE_BAR,
)  # re-exported: importable from here as before
from pareto_atlas.atlas.winner_columns import ALL, WINNER_COLUMNS, model_column


def _cell(
    sub: pd.DataFrame,
    adm: pd.DataFrame,
    regime: Regime,
    workload: str,
    hardware: str,
    study_ref: str | StudyRef = "default",
    model: str = "",
) -> dict:
    row: dict = {c: None for c in WINNER_COLUMNS}
    row.update(
        regime=regime.name,
        model=model,
        workload=workload,
        hardware=hardware,
        objective=regime.objective,
        direction=regime.direction,
        n_boundary=int((adm["boundary"] & adm["meets_constraints"]).sum()),
        quality_task=str(sub["quality_task"].iloc[0]) if "quality_task" in sub and len(sub) else "",
    )
    cand = sub[adm["admitted"].to_numpy()]
    row["n_candidates"] = len(cand)
    if cand.empty:
        meets = adm["meets_constraints"].to_numpy()
        guard = adm["guard"].to_numpy()[meets]
        why = (
            "no configuration meets the constraints"
            if not meets.any()
            else "no configuration that meets the constraints has a quality measurement"
            if (guard == "").all()
            else "none of the configurations that meet the constraints is in on the quality guard with evidence "
            "(see the boundary and projected cases)"
            if np.isin(guard, ("in", "boundary")).any()
            else "every configuration that meets the constraints fails the quality guard"
        )
        row.update(
            point_id="",
            label="",
            note=why,
            stacked=False,
            stack_beats_singles=False,
            separated=False,
            verdict="",
            verdict_note="",
        )
        _projected(sub, adm, regime, row, study_ref)
        return row
    order = _rank(cand, regime)
    best = cand.iloc[order[0]]
    lo, hi = interval(cand.iloc[order[:2]], regime.objective)
    for c in (
        "point_id",
        "label",
        "concurrency",
        "rate_rps",
        "utilization",
        "provenance",
        "quality_provenance",
        "quality",
        "quality_benchmark",
        "quality_rel",
        "cost_per_mtok",
        "tpot_p99_ms",
        "ttft_p99_ms",
        "throughput_tok_s",
        "optimizations",
        "kld",
        "calib_provenance",
        "lat_rel_err",
        "weights_cost",
    ):
        row[c] = best.get(c)
    row["load"] = load_label(best)
    row["deployment"] = deployment_words(best)
    one = cand.iloc[order[:1]]
    row.update(
        quality_rel_lo=float(adm.loc[best.name, "quality_rel_lo"]),
        quality_rel_hi=float(adm.loc[best.name, "quality_rel_hi"]),
        quality_evidence=str(quality_evidence(one)[0]),
        speed_evidence=str(speed_evidence(one)[0]),
        evidence=str(evidence_label(one)[0]),
    )
    row.update(
        value=float(best[regime.objective]),
        value_lo=float(lo[0]),
        value_hi=float(hi[0]),
        n_opts=int(best["n_opts"]),
        stacked=bool(best["n_opts"] >= 2),
        note="",
    )
    if len(order) > 1:
        ru = cand.iloc[order[1]]
        row.update(
            runner_up_label=ru["label"],
            runner_up_value=float(ru[regime.objective]),
            runner_up_where=_where_else(best, ru),
        )
        # Separated: the winner's pessimistic bound still beats the runner-up's optimistic one.
        row["separated"] = bool(hi[0] < lo[1]) if regime.direction == "min" else bool(lo[0] > hi[1])
        row["overlap"] = interval_overlap(float(lo[0]), float(hi[0]), float(lo[1]), float(hi[1]))
    else:
        row["separated"] = True
    row["verdict"], row["verdict_note"] = verdict(row, _err(best, "lat_rel_err"), _err(best, "thr_rel_err"))
    singles = cand[cand["n_opts"] <= 1]
    if len(singles):
        s = singles.iloc[_rank(singles, regime)[0]]
        row.update(best_single_label=s["label"], best_single_value=float(s[regime.objective]))
    # Boxed cell: a stack wins and strictly beats the best single method (or no single qualifies).
    row["stack_beats_singles"] = bool(
        row["stacked"] and (singles.empty or _better(row["value"], row["best_single_value"], regime.direction))
    )
    _projected(sub, adm, regime, row, study_ref)
    return row


def deployment_words(point: pd.Series) -> str:
    """A point's deployment in words where it holds more than one GPU ("FP8, TP4 × 2 replicas, 8 × H100-SXM"),
    else "": the GPUs per replica and the parallelism, which the compact label abbreviates."""
    k = Knobs.from_row(point)
    return f"{k.weights}, {k.layout_words(str(point.get('hardware', '')))}" if k.gpus() > 1 else ""


def _where_else(best: pd.Series, other: pd.Series) -> str:
    """What tells `other` apart from `best` beyond its configuration's name: its card and its load
    where they differ ("" when neither does), so a tie between one configuration at two loads does
    not read as a configuration tied with itself."""
    parts = []
    if other.get("hardware") != best.get("hardware"):
        parts.append(f"on {other.get('hardware')}")
    if load_label(other) != load_label(best):
        parts.append(f"at {load_label(other)}")
    return " ".join(parts)


def winners(
    points: pd.DataFrame,
    regimes: Sequence[Regime],
    *,
    per_hardware: bool = True,
    allow_priors: bool = False,
    study_ref: str | StudyRef = "default",
) -> pd.DataFrame:
    """One row per (regime, workload, hardware) cell plus (regime, workload, "all"); see WINNER_COLUMNS.
    `allow_priors`: let points whose quality or speed rests only on priors win (default: projected).
    `study_ref`: how the confirm commands name the study. A table of any shape: its derived columns
    are added here (atlas.answer derives a study's once and calls `winner_cells`)."""
    return winner_cells(
        with_derived(points).reset_index(drop=True),
        regimes,
        per_hardware=per_hardware,
        allow_priors=allow_priors,
        study_ref=study_ref,
    )


def winner_cells(
    pts: pd.DataFrame,
    regimes: Sequence[Regime],
    *,
    per_hardware: bool = True,
    allow_priors: bool = False,
    study_ref: str | StudyRef = "default",
) -> pd.DataFrame:
    """`winners` of a table already derived (objectives.with_derived) and indexed 0..n-1."""
    rows = []
    models = model_column(pts)
    for regime in regimes:
        adm = admission(pts, regime, allow_priors=allow_priors)
        for model in pd.unique(models):
            of_model = models == model
            for wl in pd.unique(pts["workload"].astype(str)[of_model]):
                in_wl = of_model & (pts["workload"].astype(str) == wl).to_numpy()
                hardware = sorted(pd.unique(pts["hardware"].astype(str)[in_wl])) if per_hardware else []
                for hw in [*hardware, ALL]:
                    m = in_wl if hw == ALL else in_wl & (pts["hardware"].astype(str) == hw).to_numpy()
                    rows.append(_cell(pts[m], adm[m], regime, wl, hw, study_ref, model))
    return pd.DataFrame(rows, columns=list(WINNER_COLUMNS))


def projected_cases(
    points: pd.DataFrame,
    regimes: Sequence[Regime],
    cells: pd.DataFrame,
    *,
    study_ref: str | StudyRef = "default",
    top: int = 3,
) -> pd.DataFrame:
    """Per regime and hardware cell, up to `top` projected points (quality in or boundary, resting on
    priors) that beat the cell's winner: "projected — measure to confirm", each with its command."""
    return projected_of(with_derived(points).reset_index(drop=True), regimes, cells, study_ref=study_ref, top=top)


def projected_of(
    pts: pd.DataFrame,
    regimes: Sequence[Regime],
    cells: pd.DataFrame,
    *,
    study_ref: str | StudyRef = "default",
    top: int = 3,
) -> pd.DataFrame:
    """`projected_cases` of a table already derived and indexed 0..n-1."""
    cols = [
        "regime",
        "model",
        "workload",
        "hardware",
        "point_id",
        "label",
        "provenance",
        "quality_provenance",
        "quality_rel",
        "quality_rel_lo",
        "quality_rel_hi",
        "objective",
        "value",
        "winner_value",
        "evidence",
        "confirm_command",
    ]
    rows = []
    for regime in regimes:
        adm = admission(pts, regime)
        models = model_column(pts)
        for c in cells[cells["regime"] == regime.name].itertuples(index=False):
            if c.hardware == ALL:
                continue
            m = (
                (pts["hardware"].astype(str) == c.hardware).to_numpy()
                & (pts["workload"].astype(str) == c.workload).to_numpy()
                & (models == (c.model or ""))
            )
            sub = projected_beating(pts[m], adm[m], regime, c.value if c.point_id else None)
            for i in range(min(top, len(sub))):
                p = sub.iloc[i]
                rows.append(
                    {
                        "regime": regime.name,
                        "model": c.model,
                        "workload": c.workload,
                        "hardware": c.hardware,
                        "point_id": p["point_id"],
                        "label": p["label"],
                        "provenance": p["provenance"],
                        "quality_provenance": p.get("quality_provenance", ""),
                        "quality_rel": p["quality_rel"],
                        "quality_rel_lo": adm.loc[p.name, "quality_rel_lo"],
                        "quality_rel_hi": adm.loc[p.name, "quality_rel_hi"],
                        "objective": regime.objective,
                        "value": float(p[regime.objective]),
                        "winner_value": c.value,
                        "evidence": str(evidence_label(sub.iloc[[i]])[0]),
                        "confirm_command": confirm_command(p, study_ref),
                    }
                )
    return pd.DataFrame(rows, columns=cols)


def boundary_cases(points: pd.DataFrame, regimes: Sequence[Regime], cells: pd.DataFrame | None = None) -> pd.DataFrame:
    """Points whose quality interval straddles a regime's floor, with what the verdict changes.

    `effect`: "wins" (admitted on the point estimate and wins its hardware cell), "would win if
    admitted" (rejected, but meets the constraints and beats that cell's winner), or "none".
    """
    pts = with_derived(points).reset_index(drop=True)
    return boundary_of(pts, regimes, winner_cells(pts, regimes) if cells is None else cells)


def boundary_of(pts: pd.DataFrame, regimes: Sequence[Regime], cells: pd.DataFrame) -> pd.DataFrame:
    """`boundary_cases` of a table already derived and indexed 0..n-1, beside its cells."""
    cols = [
        "regime",
        "model",
        "workload",
        "hardware",
        "point_id",
        "label",
        "provenance",
        "quality_rel",
        "quality_rel_lo",
        "quality_rel_hi",
        "floor",
        "admitted",
        "meets_constraints",
        "effect",
    ]
    frames = []
    for regime in regimes:
        if regime.quality_floor is None:
            continue
        adm = admission(pts, regime)
        b = adm["boundary"].to_numpy() & adm["meets_constraints"].to_numpy()
        if not b.any():
            continue
        keep = list(
            dict.fromkeys(["workload", "hardware", "point_id", "label", "provenance", "quality_rel", regime.objective])
        )
        p = pts.loc[b, keep].copy()
        p["model"] = model_column(pts)[b]
        p[["workload", "hardware"]] = p[["workload", "hardware"]].astype(str)
        for c in ("quality_rel_lo", "quality_rel_hi", "admitted", "meets_constraints"):
            p[c] = adm.loc[b, c].to_numpy()
        cell = cells[cells["regime"] == regime.name][["model", "workload", "hardware", "point_id", "value"]].copy()
        cell["model"] = cell["model"].fillna("").astype(str)
        cell = cell.rename(columns={"point_id": "cell_winner", "value": "cell_value"})
        p = p.merge(cell, on=["model", "workload", "hardware"], how="left")
        mine = p[regime.objective].to_numpy(dtype=float)
        theirs = p["cell_value"].to_numpy(dtype=float, na_value=np.nan)
        beats = (mine < theirs) if regime.direction == "min" else (mine > theirs)
        no_winner = p["cell_winner"].fillna("").astype(str).to_numpy() == ""
        wins = p["admitted"].to_numpy() & (
            p["cell_winner"].astype(str).to_numpy() == p["point_id"].astype(str).to_numpy()
        )
        would = ~p["admitted"].to_numpy() & p["meets_constraints"].to_numpy() & (beats | no_winner)
        p["effect"] = np.select([wins, would], ["wins", "would win if admitted"], default="none")
        p["regime"], p["floor"] = regime.name, regime.quality_floor
        frames.append(p[cols])
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)
