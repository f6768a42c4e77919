"""Deployment regimes: a binding constraint, an objective and a quality guard.

Quality guard rule (documented, applied everywhere): a point is admitted when its quality_rel
point estimate is >= the floor. A point that meets the regime's constraints and whose 95 %
interval straddles the floor is a *boundary case*: admitted or not by that rule, but always
listed on the record, never silently admitted or removed (the seed's AWQ arm missed the 95 %
floor inside its sampling error).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from pareto_atlas.atlas.constraints import Constraint, ConstraintError, constraints_from_mapping, parse_constraints, satisfied
from pareto_atlas.atlas.objectives import DEFAULT_DIRECTION, OBJECTIVE_COLUMNS, quality_rel_interval

DEFAULT_QUALITY_FLOOR = 0.95
REGIME_KEYS = ("name", "objective", "direction", "constraints", "quality_floor", "description")


@dataclass(frozen=True)
class Regime:
    """`constraints` bind, `objective` ranks what passes, `quality_floor` (of quality_rel) guards."""

    name: str
    objective: str
    direction: str = ""
    constraints: tuple[Constraint, ...] = ()
    quality_floor: float | None = DEFAULT_QUALITY_FLOOR
    description: str = ""
    thresholds_auto: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("regime.name: empty; give the regime a name")
        if self.objective not in DEFAULT_DIRECTION:
            raise ValueError(f"regime {self.name}.objective: {self.objective!r} is not an objective column; "
                             f"allowed: {', '.join(OBJECTIVE_COLUMNS)}")
        if not self.direction:  # resolve "auto" before the value is used anywhere
            object.__setattr__(self, "direction", DEFAULT_DIRECTION[self.objective])
        if self.direction not in ("min", "max"):
            raise ValueError(f"regime {self.name}.direction: {self.direction!r}; allowed: min, max")
        if self.quality_floor is not None and not 0.0 <= self.quality_floor <= 2.0:
            raise ValueError(f"regime {self.name}.quality_floor: {self.quality_floor} must be a fraction of baseline in [0, 2]")

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> Regime:
        """A study file's `[[regimes]]` table: name, objective, direction, constraints, quality_floor."""
        name = str(d.get("name", ""))
        where = f"regimes.{name or '?'}"
        unknown = sorted(set(d) - set(REGIME_KEYS))
        if unknown:
            raise ValueError(f"{where}: unknown key {unknown[0]!r}; allowed: {', '.join(REGIME_KEYS)}")
        if "objective" not in d:
            raise ValueError(f"{where}.objective: missing; allowed: {', '.join(OBJECTIVE_COLUMNS)}")
        raw = d.get("constraints", {})
        if isinstance(raw, Mapping):
            cons = constraints_from_mapping(raw, f"{where}.constraints")
        elif isinstance(raw, (str, list, tuple)):
            cons = parse_constraints(raw)
        else:
            raise ConstraintError(f"{where}.constraints: expected a table {{column = [op, value]}} or a string")
        floor = d.get("quality_floor", DEFAULT_QUALITY_FLOOR)
        return cls(name=name, objective=str(d["objective"]), direction=str(d.get("direction", "")),
                   constraints=cons, quality_floor=None if floor is None else float(floor),
                   description=str(d.get("description", "")))

    def describe(self) -> str:
        """The regime in one line, thresholds included, as the report states it."""
        goal = f"{'minimise' if self.direction == 'min' else 'maximise'} {self.objective}"
        parts = [str(c) for c in self.constraints]
        if self.quality_floor is not None:
            parts.append(f"quality_rel>={self.quality_floor:g}")
        tail = f" subject to {', '.join(parts)}" if parts else ""
        auto = " (thresholds set automatically from the points' medians)" if self.thresholds_auto else ""
        return f"{goal}{tail}{auto}"


def _sig(x: float) -> float:
    """Two significant figures: a threshold a person can read and restate."""
    return float(f"{x:.2g}") if np.isfinite(x) and x > 0 else x


def default_regimes(points: pd.DataFrame | None = None, *, ttft_p99_ms: float | None = None,
                    tpot_p99_ms: float | None = None, cost_cap_per_mtok: float | None = None,
                    quality_floor: float = DEFAULT_QUALITY_FLOOR) -> tuple[Regime, ...]:
    """The four built-in regimes. A threshold left None is set from `points`: the median over
    feasible points that pass the quality guard, so the constraint binds on this study's scale."""
    auto = False

    def med(col: str) -> float:
        nonlocal auto
        if points is None or col not in points.columns:
            raise ValueError(f"default_regimes: {col} threshold not given and no points to derive it from")
        ok = points["feasible"].fillna(False).astype(bool) if "feasible" in points.columns else True
        ok = ok & (points["quality_rel"] >= quality_floor)
        vals = points.loc[ok, col].to_numpy(dtype=float, na_value=np.nan)
        vals = vals[np.isfinite(vals)]
        auto = True
        return _sig(float(np.median(vals))) if len(vals) else float("nan")

    ttft = ttft_p99_ms if ttft_p99_ms is not None else med("ttft_p99_ms")
    tpot = tpot_p99_ms if tpot_p99_ms is not None else med("tpot_p99_ms")
    lat_auto = auto
    auto = False
    cost = cost_cap_per_mtok if cost_cap_per_mtok is not None else med("cost_per_mtok")
    return (
        Regime("tight-latency", "tpot_p99_ms", "min", (Constraint("ttft_p99_ms", "<=", ttft), Constraint("tpot_p99_ms", "<=", tpot)),
               quality_floor, "interactive serving under P99 latency limits", thresholds_auto=lat_auto),
        Regime("high-throughput", "throughput_tok_s", "max", (), quality_floor, "batch / offline: tokens per second per device"),
        Regime("low-cost", "cost_per_mtok", "min", (), quality_floor, "cheapest $ per million output tokens"),
        Regime("quality-floor", "quality_rel", "max", (Constraint("cost_per_mtok", "<=", cost),), quality_floor,
               "best answers under a cost cap", thresholds_auto=auto),
    )


def regimes_from_study(tables: Sequence[Mapping[str, object]] | None, points: pd.DataFrame | None = None,
                       **defaults: float) -> tuple[Regime, ...]:
    """The study's `[[regimes]]` tables; the built-ins when the study defines none."""
    if not tables:
        return default_regimes(points, **defaults)
    regs = tuple(Regime.from_dict(t) for t in tables)
    names = [r.name for r in regs]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"regimes: name {sorted(dup)[0]!r} is used twice; regime names must be unique")
    return regs


def admission(points: pd.DataFrame, regime: Regime) -> pd.DataFrame:
    """Per point: `meets_constraints`, `passes_guard`, `boundary`, `admitted` and `reject_reason`."""
    n = len(points)
    feasible = points["feasible"].fillna(False).astype(bool).to_numpy() if "feasible" in points.columns else np.ones(n, bool)
    obj = points[regime.objective].to_numpy(dtype=float, na_value=np.nan)
    meets = satisfied(points, regime.constraints) & feasible & np.isfinite(obj)
    rel = points["quality_rel"].to_numpy(dtype=float, na_value=np.nan)
    lo, hi = quality_rel_interval(points)
    if regime.quality_floor is None:
        guard = np.ones(n, bool)
        boundary = np.zeros(n, bool)
    else:
        f = regime.quality_floor
        guard = np.isfinite(rel) & (rel >= f)
        # quality_rel == 1 is the baseline's own score (or one equal to it): the floor is a fraction
        # of that very number, so its sampling error cannot move it across the floor.
        boundary = np.isfinite(rel) & (lo < f) & (hi >= f) & (np.abs(rel - 1.0) > 1e-12)
    reason = np.select(
        [~feasible, ~np.isfinite(obj), ~meets, ~guard],
        ["infeasible", f"no {regime.objective}", "constraint", "quality guard"], default="")
    return pd.DataFrame({"meets_constraints": meets, "passes_guard": guard, "boundary": boundary,
                         "admitted": meets & guard, "reject_reason": reason,
                         "quality_rel_lo": lo, "quality_rel_hi": hi}, index=points.index)
