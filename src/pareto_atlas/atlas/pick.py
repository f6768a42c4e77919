"""Re-planning without re-measuring: answer a constraint, a price change or a new card from the table.

    pick(points, "tpot_p99_ms<=40, quality_rel>=95%", "cost_per_mtok", prices={"A100-80G-PCIe": 2.085})

A new price re-derives cost from throughput (cost = $/h / (throughput_tok_s * 3600) * 1e6), never
by scaling the old cost, so the answer is exactly what the pipeline would have written.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from pareto_atlas.atlas.constraints import Constraint
from pareto_atlas.atlas.evidence import StudyRef, confirm_command, evidence_label
from pareto_atlas.atlas.objectives import gpus_of, with_derived
from pareto_atlas.atlas.regimes import DEFAULT_QUALITY_FLOOR, Regime, admission
from pareto_atlas.atlas.question import Question
from pareto_atlas.atlas.winners import _rank, deployment_words, projected_beating
from pareto_atlas.simulate.space import load_label

SHOW_COLUMNS = (
    "point_id",
    "label",
    "hardware",
    "workload",
    "provenance",
    "quality_provenance",
    "quality_rel",
    "quality_lo",
    "quality_hi",
    "quality_evidence",
    "kld",
    "calib_provenance",
    "prior_source",
    "tpot_p99_ms",
    "ttft_p99_ms",
    "throughput_tok_s",
    "cost_per_mtok",
    "gpus",
    "price_per_hour",
    "price_date",
    "lat_rel_err",
    "thr_rel_err",
    "n_opts",
    "optimizations",
)

# regimes.admission's reject reasons as a count reads them ("12 outside the constraints")
WHY_WORDS = {"constraint": "outside the constraints"}


def cost_per_mtok(price_per_hour: np.ndarray | float, throughput_tok_s: np.ndarray | float) -> np.ndarray:
    """$ per million output tokens (docs/metrics.md's definition)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(price_per_hour, dtype=float) / (np.asarray(throughput_tok_s, dtype=float) * 3600.0) * 1e6


def reprice(points: pd.DataFrame, prices: Mapping[str, float], price_date: str = "") -> pd.DataFrame:
    """A copy of `points` with new $/hour per GPU for the named hardware, times the GPUs each
    configuration holds (atlas.objectives.gpus_of), and cost re-derived from throughput."""
    known = set(points["hardware"].astype(str))
    out = points.copy()
    gpus = gpus_of(out).to_numpy(dtype=float)
    for hw, price in prices.items():
        if hw not in known:
            raise ValueError(
                f"price for {hw!r}: no such hardware in the points table; known: {', '.join(sorted(known))}"
            )
        if not price > 0:
            raise ValueError(f"price for {hw}: {price} must be > 0 $/hour")
        m = (out["hardware"].astype(str) == hw).to_numpy()
        out.loc[m, "price_per_hour"] = float(price) * gpus[m]
        out.loc[m, "price_date"] = price_date or "user override"
    out["cost_per_mtok"] = cost_per_mtok(
        out["price_per_hour"].to_numpy(dtype=float), out["throughput_tok_s"].to_numpy(dtype=float)
    )
    return out


@dataclass(frozen=True)
class PickResult:
    objective: str
    direction: str
    constraints: tuple[Constraint, ...]
    quality_floor: float | None
    winner: dict | None
    runners_up: pd.DataFrame
    boundary: pd.DataFrame
    n_points: int
    n_candidates: int
    repriced: dict = field(default_factory=dict)
    elapsed_s: float = 0.0
    allow_priors: bool = False
    projected: pd.DataFrame | None = None  # would beat the winner but rest on priors, with confirm commands
    rejected: dict = field(default_factory=dict)  # why the points that were not admitted were not, by count

    def summary(self) -> str:
        """A few lines a person reads in a terminal."""
        cons = ", ".join(str(c) for c in self.constraints) or "none"
        guard = f"quality_rel>={self.quality_floor:g}" if self.quality_floor is not None else "off"
        head = (
            f"{'minimise' if self.direction == 'min' else 'maximise'} {self.objective} | constraints: {cons} | "
            f"quality guard: {guard} | {self.n_candidates} of {self.n_points} points qualify"
        )
        if self.repriced:
            head += " | repriced: " + ", ".join(f"{k} ${v:g}/h" for k, v in self.repriced.items())
        if self.winner is None:
            # why: an empty answer names what kept each point out, and what rests on priors stays listed
            why = ", ".join(
                f"{n} {WHY_WORDS.get(r, r)}" for r, n in sorted(self.rejected.items(), key=lambda kv: -kv[1])
            )
            lines = [
                head,
                "no configuration satisfies the constraints" + (f" (of {self.n_points}: {why})" if why else ""),
            ]
        else:
            w = self.winner
            dep = w.get("deployment", "")
            lines = [
                head,
                f"winner: {w['label']}{f' ({dep})' if dep else ''} on {w['hardware']} ({w['workload']}{_at(w)}), "
                f"{self.objective} = {w[self.objective]:.4g}, provenance {w['provenance']}, quality_rel "
                f"{w['quality_rel']:.3f} [{w.get('quality_rel_lo', float('nan')):.3f}, "
                f"{w.get('quality_rel_hi', float('nan')):.3f}]",
                f"  rests on: {w.get('evidence', '')} (quality: {w.get('quality_provenance', '')})",
            ]
        for _, r in self.runners_up.iterrows():
            lines.append(
                f"  then: {r['label']} on {r['hardware']}{_at(r, ' at ')}, {self.objective} = {r[self.objective]:.4g} "
                f"({r['provenance']})"
            )
        if len(self.boundary):
            lines.append(f"boundary cases (quality interval straddles the floor): {len(self.boundary)}")
        if self.projected is not None and len(self.projected):
            lines.append("projected — measure to confirm (they rest on priors; --allow-priors lets them win):")
            for _, r in self.projected.iterrows():
                lines.append(
                    f"  {r['label']} on {r['hardware']}, {self.objective} = {r[self.objective]:.4g}, "
                    f"{r['evidence']}" + (f"\n    confirm: {r['confirm_command']}" if r["confirm_command"] else "")
                )
        return "\n".join(lines)


def _at(row, sep: str = ", ") -> str:
    """A point's load in words after `sep` (two loads of one configuration are two points), "" for none."""
    load = row.get("load", "")
    return f"{sep}{load}" if isinstance(load, str) and load else ""


def pick(
    points: pd.DataFrame,
    constraints: str | Iterable[str | Constraint] | None = None,
    objective: str = "cost_per_mtok",
    *,
    direction: str | None = None,
    prices: Mapping[str, float] | None = None,
    price_date: str = "",
    extra_hardware: pd.DataFrame | None = None,
    quality_floor: float | None = DEFAULT_QUALITY_FLOOR,
    top: int = 5,
    allow_priors: bool = False,
    kld_max: float | None = None,
    study_ref: str | StudyRef = "default",
    question: Question | None = None,
) -> PickResult:
    """The best admitted point for `objective` under `constraints`, and up to `top - 1` runners-up.

    `prices` maps hardware name -> $/hour (cost re-derived); `extra_hardware` is a points table for
    cards not in `points` (e.g. simulated rows for a new card read from the store), appended first.
    The quality guard is `quality_floor` of baseline unless the constraints state quality_rel >= x;
    pass quality_floor=None to switch it off. Boundary cases are returned, never dropped silently.
    Points whose quality or speed rests only on priors cannot win unless `allow_priors`; the best
    few that would beat the winner come back as `projected`, with the command that would confirm them.
    `question` (atlas.question.Question) states all of that as one value, with the model, workload
    and cards it is about; when given, it replaces constraints, objective, direction, quality_floor,
    allow_priors and kld_max.
    """
    t0 = time.perf_counter()
    q = question or Question.make(
        constraints,
        objective,
        direction=direction or "",
        quality_floor=quality_floor,
        allow_priors=allow_priors,
        kld_max=kld_max,
    )
    pts = with_derived(q.select(points))
    if extra_hardware is not None and len(extra_hardware):
        missing = [
            c
            for c in ("hardware", "throughput_tok_s", "price_per_hour", q.objective)
            if c not in extra_hardware.columns
        ]
        if missing:
            raise ValueError(f"extra_hardware: points table has no column {missing[0]!r} (contract 1)")
        pts = pd.concat([pts, with_derived(extra_hardware)], ignore_index=True)
    return best_under(pts, q, prices=prices, price_date=price_date, top=top, study_ref=study_ref, t0=t0)


def best_under(
    pts: pd.DataFrame,
    q: Question,
    *,
    prices: Mapping[str, float] | None = None,
    price_date: str = "",
    top: int = 5,
    study_ref: str | StudyRef = "default",
    t0: float | None = None,
) -> PickResult:
    """`pick` on a table already derived (objectives.with_derived) and already narrowed to what the
    question is about (`q.select`): atlas.answer asks every question of one derived table."""
    t0 = time.perf_counter() if t0 is None else t0
    objective, cons, allow_priors = q.objective, q.constraints, q.allow_priors
    if prices:
        pts = reprice(pts, prices, price_date)
    floor = q.quality_floor
    regime = q.regime()
    adm = admission(pts, regime, allow_priors=allow_priors)
    ok = adm["admitted"].to_numpy()
    cand_idx = np.flatnonzero(ok)
    if len(cand_idx) > 4 * top + 64:
        # Only the head of the ranking matters: partial sort on the objective, then exact ranking.
        v = pts[objective].to_numpy(dtype=float, na_value=np.nan)[cand_idx] * (
            1.0 if regime.direction == "min" else -1.0
        )
        k = 4 * top + 64
        head = np.argpartition(v, k)[:k]
        cut = v[head].max()
        cand_idx = cand_idx[v <= cut]  # keep every tie at the cut, so tie-breaking stays exact
    cand = pts.iloc[cand_idx]
    order = _rank(cand, regime)[:top] if len(cand) else np.array([], dtype=int)
    show = [c for c in SHOW_COLUMNS if c in pts.columns] + ([objective] if objective not in SHOW_COLUMNS else [])
    ranked = cand.iloc[order][show].reset_index(drop=True)
    ranked.insert(4, "load", [load_label(r) for r in cand.iloc[order].to_dict("records")])  # two loads: two points
    b = adm["boundary"].to_numpy() & adm["meets_constraints"].to_numpy()
    boundary = (
        pts.loc[b, [c for c in show]]
        .assign(
            admitted=adm.loc[b, "admitted"].to_numpy(),
            quality_rel_lo=adm.loc[b, "quality_rel_lo"].to_numpy(),
            quality_rel_hi=adm.loc[b, "quality_rel_hi"].to_numpy(),
        )
        .reset_index(drop=True)
    )
    winner = None
    if len(ranked):
        best = cand.iloc[order[:1]]
        winner = ranked.iloc[0].to_dict() | {
            "evidence": str(evidence_label(best)[0]),
            "deployment": deployment_words(best.iloc[0]),
            "quality_rel_lo": float(adm.loc[best.index[0], "quality_rel_lo"]),
            "quality_rel_hi": float(adm.loc[best.index[0], "quality_rel_hi"]),
        }
    projected = _projected(pts, adm, regime, winner, show, study_ref, top)
    return PickResult(
        objective=objective,
        direction=regime.direction,
        constraints=cons,
        quality_floor=floor,
        winner=winner,
        runners_up=ranked.iloc[1:].reset_index(drop=True),
        boundary=boundary,
        n_points=len(pts),
        n_candidates=int(ok.sum()),
        repriced=dict(prices or {}),
        elapsed_s=time.perf_counter() - t0,
        allow_priors=allow_priors,
        projected=projected,
        rejected=adm.loc[~ok, "reject_reason"].value_counts().to_dict(),
    )


def _projected(
    pts: pd.DataFrame,
    adm: pd.DataFrame,
    regime: Regime,
    winner: dict | None,
    show: list[str],
    study_ref: str | StudyRef,
    top: int,
) -> pd.DataFrame:
    """Projected points (resting on priors, quality in or boundary) that beat the winner, best first."""
    proj = projected_beating(pts, adm, regime, None if winner is None else winner[regime.objective])
    if proj.empty:
        return pd.DataFrame(columns=[*show, "evidence", "confirm_command"])
    head = proj.iloc[: max(1, top - 2)]
    out = head[show].reset_index(drop=True)
    out["evidence"] = evidence_label(head)
    out["confirm_command"] = [confirm_command(r, study_ref) for _, r in head.iterrows()]
    return out
