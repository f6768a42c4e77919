"""The product's own answers to the questions a published atlas asks, read from this study's atlas
alone: the regime winners and what they rest on, the best projected point that would beat them,
batch-1 TPOT ratios, who meets a regime's budget, the guard's verdicts on a family of knobs, the
frontier's stacked-versus-single counts, and where winners move under new prices.

Nothing here reads a published atlas's numbers (report.claims' references file): report.claims holds
them beside these answers and says where they agree.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pareto_atlas.atlas.constraints import satisfied
from pareto_atlas.atlas.evidence import (
    StudyRef,
    confirm_command,
    evidence_label,
    evidence_ok,
    quality_evidence,
    speed_evidence,
)
from pareto_atlas.atlas.frontier import frontier
from pareto_atlas.atlas.objectives import DEFAULT_OBJECTIVES, interval
from pareto_atlas.atlas.regimes import Regime, admission
from pareto_atlas.atlas.summary import stacked_vs_single
from pareto_atlas.atlas.winners import ALL, model_column, projected_beating, winner_cells

Pred = Callable[[pd.DataFrame], np.ndarray]


@dataclass(frozen=True)
class AtlasView:
    """One (model, workload) of a study's atlas: its points, regimes and winners."""

    points: pd.DataFrame
    regimes: tuple[Regime, ...]
    cells: pd.DataFrame
    study_ref: StudyRef
    allow_priors: bool = False

    def regime(self, name: str) -> Regime:
        for r in self.regimes:
            if r.name == name:
                return r
        raise ValueError(f"regime {name!r} is not in the study; regimes: {', '.join(r.name for r in self.regimes)}")


def atlas_view(
    points: pd.DataFrame, regimes, model: str, workload: str, study_ref: StudyRef, allow_priors: bool = False
) -> AtlasView:
    """One (model, workload) of a study's atlas; `points` carry their derived columns (atlas.answer)."""
    m = (model_column(points) == model) & (points["workload"].astype(str) == workload).to_numpy()
    pts = points[m].reset_index(drop=True)
    if pts.empty:
        raise ValueError(f"the atlas has no points for {model!r} at {workload!r}; run `pareto-atlas simulate` first")
    regs = tuple(regimes)
    return AtlasView(
        pts, regs, winner_cells(pts, regs, allow_priors=allow_priors, study_ref=study_ref), study_ref, allow_priors
    )


def is_knobs(**want) -> Pred:
    """A predicate on points: every named column equals its value."""
    return lambda p: np.logical_and.reduce([(p[c] == v).to_numpy() for c, v in want.items()])


def winner(view: AtlasView, regime: str, hardware: str = ALL) -> pd.Series | None:
    """A regime's winning point (its points-table row, with the cell's verdict columns), or None."""
    cell = view.cells[(view.cells.regime == regime) & (view.cells.hardware == hardware)]
    if cell.empty or not cell.iloc[0].point_id:
        return None
    c = cell.iloc[0]
    row = view.points[view.points.point_id == c.point_id].iloc[0].copy()
    for k in (
        "value",
        "value_lo",
        "value_hi",
        "separated",
        "runner_up_label",
        "runner_up_value",
        "evidence",
        "quality_evidence",
        "objective",
    ):
        row[f"cell_{k}"] = c[k]
    return row


def projected_beating_winner(view: AtlasView, regime: str, where: Pred | None = None) -> pd.Series | None:
    """The best projected point (in or boundary on quality, resting on priors) that beats the regime's
    winner and satisfies `where`, with its evidence and confirm command; None if none does."""
    reg = view.regime(regime)
    adm = admission(view.points, reg, allow_priors=view.allow_priors)
    w = winner(view, regime)
    proj = projected_beating(view.points, adm, reg, None if w is None else float(w.cell_value))
    if where is not None and len(proj):
        proj = proj[where(proj)]
    if proj.empty:
        return None
    p = proj.iloc[0].copy()
    p["evidence"] = str(evidence_label(proj.iloc[[0]])[0])
    p["confirm"] = confirm_command(p, view.study_ref)
    p["objective_value"] = float(p[reg.objective])
    return p


def best_admitted(view: AtlasView, regime: str, where: Pred) -> pd.Series | None:
    """The best admitted point of a regime among those satisfying `where` (e.g. one card)."""
    sub = view.points[where(view.points)]
    if sub.empty:
        return None
    cells = winner_cells(
        sub, [view.regime(regime)], per_hardware=False, allow_priors=view.allow_priors, study_ref=view.study_ref
    )
    pid = cells.iloc[0].point_id
    return sub[sub.point_id == pid].iloc[0] if pid else None


BATCH1 = dict(kv="f16", eviction="none", spec="none", batching="continuous", slots=1, sparse_budget=1.0, concurrency=1)


def batch1_tpot(view: AtlasView, hardware: str, **knobs) -> pd.Series | None:
    """The one-client, one-slot point of these knobs on a card (the paper's ratios are at batch 1)."""
    sel = view.points[is_knobs(**{**BATCH1, **knobs, "hardware": hardware})(view.points)]
    return sel.iloc[0] if len(sel) else None


def tpot_ratio(view: AtlasView, hardware: str, against: dict, **knobs) -> float:
    """TPOT p50 of `knobs` over TPOT p50 of `against`, both at batch 1 on one card (NaN: not simulated)."""
    a, b = batch1_tpot(view, hardware, **knobs), batch1_tpot(view, hardware, **against)
    return float(a.tpot_p50_ms / b.tpot_p50_ms) if a is not None and b is not None else float("nan")


@dataclass(frozen=True)
class Budget:
    """Who on one card meets a regime's constraints: surely (pessimistic bounds), on central values,
    or possibly (optimistic bounds), counted over the points whose speed is simulated with a
    calibration (not resting on a prior); the best of those on central values; and how many more
    meet it on a prior speed (a draft model's cited acceptance)."""

    sure: int
    central: int
    possible: int
    total: int
    best: pd.Series | None
    on_prior_speed: int = 0


def _bounded(points: pd.DataFrame, constraints, optimistic: bool) -> pd.DataFrame:
    out = points.copy()
    for c in constraints:
        lo, hi = interval(points, c.column)
        low_wins = c.op in ("<=", "<")
        out[c.column] = lo if low_wins == optimistic else hi
    return out


def meets_budget(view: AtlasView, regime: str, hardware: str) -> Budget:
    reg = view.regime(regime)
    pts = view.points[(view.points.hardware == hardware).to_numpy()]
    feas = pts["feasible"].fillna(False).astype(bool).to_numpy()
    prior_speed = speed_evidence(pts) == "prior"
    on_prior = int((satisfied(pts, reg.constraints) & feas & prior_speed).sum())
    feas = feas & ~prior_speed
    central = satisfied(pts, reg.constraints) & feas
    sure = satisfied(_bounded(pts, reg.constraints, optimistic=False), reg.constraints) & feas
    possible = satisfied(_bounded(pts, reg.constraints, optimistic=True), reg.constraints) & feas
    best = None
    if central.any():  # the simplest that meets it (fewest optimizations), then the best objective
        sub = pts[central]
        best = sub.sort_values(["n_opts", reg.objective], ascending=[True, reg.direction == "min"]).iloc[0]
    return Budget(int(sure.sum()), int(central.sum()), int(possible.sum()), int((~prior_speed).sum()), best, on_prior)


def guard_verdicts(view: AtlasView, where: Pred, regime: str) -> tuple[Counter, Counter, pd.DataFrame]:
    """For the points satisfying `where`: counts of the guard's verdict (in / out / boundary /
    "" unmeasured) and of their quality evidence, and the points with both columns."""
    reg = view.regime(regime)
    m = where(view.points)
    sub = view.points[m].copy()
    adm = admission(view.points, reg, allow_priors=view.allow_priors)[m]
    sub["guard"] = adm["guard"].to_numpy()
    sub["q_evidence"] = quality_evidence(sub)
    sub["q_lo"], sub["q_hi"] = adm["quality_rel_lo"].to_numpy(), adm["quality_rel_hi"].to_numpy()
    return Counter(sub["guard"]), Counter(sub["q_evidence"]), sub


def frontier_counts(view: AtlasView, evidence_only: bool = False) -> dict:
    """Points on the raw frontier (quality, TPOT p99, cost) of all considered, and stacked vs single;
    `evidence_only`: among the points whose quality and speed rest on evidence (atlas.evidence)."""
    pts = view.points[evidence_ok(view.points)] if evidence_only else view.points
    marked = frontier(pts, DEFAULT_OBJECTIVES)
    considered = marked[marked.frontier_status != "excluded"]
    svs = {r.kind: (int(r.on_frontier), int(r.total)) for r in stacked_vs_single(marked).itertuples(index=False)}
    return {
        "on": int(considered.raw_frontier.sum()),
        "considered": len(considered),
        "excluded": int((marked.frontier_status == "excluded").sum()),
        "stacked": svs.get("stacked", (0, 0)),
        "single": svs.get("single", (0, 0)),
        "baseline": svs.get("baseline", (0, 0)),
        "on_prior": int(
            (considered.raw_frontier & np.isin(quality_evidence(considered), ("prior", "unmeasured"))).sum()
        ),
    }


def reprice_moves(view: AtlasView, prices: dict[str, float]) -> dict[str, tuple[pd.Series | None, pd.Series | None]]:
    """Per regime, its winner before and after re-pricing (cost re-derived from throughput)."""
    from pareto_atlas.atlas.pick import reprice

    pts = reprice(view.points, prices, "re-priced")
    after = AtlasView(
        pts,
        view.regimes,
        winner_cells(pts, view.regimes, allow_priors=view.allow_priors, study_ref=view.study_ref),
        view.study_ref,
        view.allow_priors,
    )
    return {r.name: (winner(view, r.name), winner(after, r.name)) for r in view.regimes}


def price_of(view: AtlasView, hardware: str) -> float:
    p = view.points.loc[view.points.hardware == hardware, "price_per_hour"]
    if p.empty:
        raise ValueError(f"no points on {hardware!r}; cards: {', '.join(sorted(set(view.points.hardware)))}")
    return float(p.iloc[0])


def published_formats(hardware: str, engine: str = "vllm") -> set[str]:
    """The weight formats a card's published calibration saw (spec/published_anchors.csv)."""
    from pareto_atlas.calibrate.published_table import load_published

    rows = load_published().rows
    return set(rows[(rows.gpu == hardware) & (rows.engine == engine)].weights)


def nearest_published(card: str, weights: str, kv: str = "f16", task: str = "gsm8k"):
    """The published score the guard would use for a model card and knobs (quality.published), or None."""
    from pareto_atlas.quality.published import guard_choice, published_for

    return guard_choice(published_for(card, weights, kv), task)


def published_kv_models(kv: str) -> list[str]:
    """The models the published-quality table holds scores for with this KV cache type."""
    from pareto_atlas.quality.published import load_published_quality

    t = load_published_quality()
    return sorted(set(t[t["kv"] == kv]["model"]))


def spec_gains(view: AtlasView, spec: str) -> dict[str, tuple[float, float]]:
    """Per regime whose winner uses this speculation method: its gain over the best admitted point
    without it (a fraction, positive = better) and the winner's error bar on that objective."""
    from pareto_atlas.atlas.objectives import LATENCY_COLUMNS, QUALITY_COLUMNS

    out = {}
    for r in view.regimes:
        w = winner(view, r.name)
        if w is None or w.spec != spec:
            continue
        other = best_admitted(view, r.name, lambda p: (p.spec != spec).to_numpy())
        if other is None:
            out[r.name] = (float("inf"), 0.0)
            continue
        a, b = float(w[r.objective]), float(other[r.objective])
        gain = (b - a) / b if r.direction == "min" else (a - b) / b
        err = (
            0.0
            if r.objective in QUALITY_COLUMNS
            else float(w.lat_rel_err)
            if r.objective in LATENCY_COLUMNS
            else float(w.thr_rel_err)
        )
        out[r.name] = (gain, err)
    return out


def knob_value(view: AtlasView, column: str, **knobs) -> float:
    """A knob's value on the points that have these knobs (e.g. the n-gram knob's stated acceptance)."""
    sel = view.points[is_knobs(**knobs)(view.points)]
    return float(sel[column].iloc[0]) if len(sel) else float("nan")


def load_text(p: pd.Series) -> str:
    from pareto_atlas.simulate.space import load_label

    return load_label(p) or "?"


def evidence_of(p: pd.Series) -> str:
    return str(evidence_label(pd.DataFrame([p]))[0])


def task_verdict(lo: float, hi: float, rel: float, floor: float) -> str:
    from pareto_atlas.atlas.regimes import task_status

    return str(task_status(np.array([lo]), np.array([hi]), np.array([rel]), floor)[0]) or "unmeasured"


PRIOR_ONLY = ("prior", "unmeasured")


def winner_evidence(view: AtlasView) -> dict[str, tuple[str, str]]:
    """Per regime: its winner's quality evidence and provenance ("" when no winner)."""
    out = {}
    for r in view.regimes:
        w = winner(view, r.name)
        out[r.name] = (
            ("", "")
            if w is None
            else (str(quality_evidence(pd.DataFrame([w]))[0]), str(w.get("quality_provenance", "")))
        )
    return out


def check_winner_evidence(view: AtlasView, console) -> None:
    """Say what every winner's quality rests on, and flag any that rests on a prior alone."""
    ev = winner_evidence(view)
    bad = [n for n, (e, _) in ev.items() if e in PRIOR_ONLY]
    console.print(
        ("  [red]winners resting on prior-only quality: " + ", ".join(bad) + "[/]")
        if bad
        else "  no winner rests on prior-only quality: " + "; ".join(f"{n} {e} ({p})" for n, (e, p) in ev.items() if e),
        highlight=False,
        soft_wrap=True,
    )
