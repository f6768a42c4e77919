"""Deployment regimes: a binding constraint, an objective and a quality guard.

Quality guard rule (documented, applied everywhere), on intervals, never on a point estimate
alone: a point is *in* when the 95 % interval of its quality relative to the baseline lies at or
above the floor, *out* when it lies below, and a *boundary case* when it straddles the floor (the
seed's AWQ arm missed the 95 % floor inside its sampling error): not admitted, always listed on the
record. Where the point has a token-level KL divergence against the baseline (quality.kld) and the
regime a limit on it, that axis votes too: out if either axis is clearly out, in if either is
clearly in and neither is out. By default an admitted point must also rest on evidence
(atlas.evidence): one whose quality or speed rests only on priors is *projected*, never a winner,
unless the caller allows priors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from pareto_atlas.atlas.constraints import (
    Constraint,
    ConstraintError,
    constraints_from_mapping,
    parse_constraints,
    satisfied,
)
from pareto_atlas.atlas.objectives import DEFAULT_DIRECTION, OBJECTIVE_COLUMNS, quality_rel_interval

DEFAULT_QUALITY_FLOOR = 0.95
REGIME_KEYS = ("name", "objective", "direction", "constraints", "quality_floor", "description")
# Mean token-level KL divergence (nats) from the baseline that a configuration may add: about what
# one 4-bit quantization step costs a 7-8B model in llama.cpp's published tables; stricter than the
# task floor because it is measured with far more power (thousands of tokens, not tens of items).
DEFAULT_KLD_MAX = 0.05


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
    kld_max: float | None = None  # limit on mean KL divergence from the baseline (None: not used)

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("regime.name: empty; give the regime a name")
        if self.objective not in DEFAULT_DIRECTION:
            raise ValueError(
                f"regime {self.name}.objective: {self.objective!r} is not an objective column; "
                f"allowed: {', '.join(OBJECTIVE_COLUMNS)}"
            )
        if not self.direction:  # resolve "auto" before the value is used anywhere
            object.__setattr__(self, "direction", DEFAULT_DIRECTION[self.objective])
        if self.direction not in ("min", "max"):
            raise ValueError(f"regime {self.name}.direction: {self.direction!r}; allowed: min, max")
        if self.quality_floor is not None and not 0.0 <= self.quality_floor <= 2.0:
            raise ValueError(
                f"regime {self.name}.quality_floor: {self.quality_floor} must be a fraction of baseline in [0, 2]"
            )

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
        return cls(
            name=name,
            objective=str(d["objective"]),
            direction=str(d.get("direction", "")),
            constraints=cons,
            quality_floor=None if floor is None else float(floor),
            description=str(d.get("description", "")),
        )

    def describe(self) -> str:
        """The regime in one line, thresholds included, as the report states it."""
        goal = f"{'minimise' if self.direction == 'min' else 'maximise'} {self.objective}"
        parts = [str(c) for c in self.constraints]
        if self.quality_floor is not None:
            parts.append(f"quality_rel>={self.quality_floor:g} (95 % interval)")
        if self.kld_max is not None:
            parts.append(f"KL divergence<={self.kld_max:g} nats/token where measured")
        tail = f" subject to {', '.join(parts)}" if parts else ""
        auto = " (thresholds set automatically from the points' medians)" if self.thresholds_auto else ""
        return f"{goal}{tail}{auto}"


def _sig(x: float) -> float:
    """Two significant figures: a threshold a person can read and restate."""
    return float(f"{x:.2g}") if np.isfinite(x) and x > 0 else x


def default_regimes(
    points: pd.DataFrame | None = None,
    *,
    ttft_p99_ms: float | None = None,
    tpot_p99_ms: float | None = None,
    cost_cap_per_mtok: float | None = None,
    quality_floor: float = DEFAULT_QUALITY_FLOOR,
    kld_max: float | None = None,
) -> tuple[Regime, ...]:
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
    regs = (
        Regime(
            "tight-latency",
            "tpot_p99_ms",
            "min",
            (Constraint("ttft_p99_ms", "<=", ttft), Constraint("tpot_p99_ms", "<=", tpot)),
            quality_floor,
            "interactive serving under P99 latency limits",
            thresholds_auto=lat_auto,
        ),
        Regime(
            "high-throughput",
            "throughput_per_device_tok_s",
            "max",
            (),
            quality_floor,
            "batch / offline: tokens per second per device",
        ),
        Regime("low-cost", "cost_per_mtok", "min", (), quality_floor, "cheapest $ per million output tokens"),
        Regime(
            "quality-floor",
            "quality_rel",
            "max",
            (Constraint("cost_per_mtok", "<=", cost),),
            quality_floor,
            "best answers under a cost cap",
            thresholds_auto=auto,
        ),
    )
    return tuple(replace(r, kld_max=kld_max) for r in regs)


def regimes_from_study(
    tables: Sequence[Mapping[str, object]] | None, points: pd.DataFrame | None = None, **defaults: float
) -> tuple[Regime, ...]:
    """The study's `[[regimes]]` tables; the built-ins when the study defines none."""
    if not tables:
        return default_regimes(points, **defaults)
    regs = tuple(replace(Regime.from_dict(t), kld_max=defaults.get("kld_max")) for t in tables)
    names = [r.name for r in regs]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"regimes: name {sorted(dup)[0]!r} is used twice; regime names must be unique")
    return regs


def task_status(lo: np.ndarray, hi: np.ndarray, rel: np.ndarray, floor: float) -> np.ndarray:
    """in / out / boundary of a ratio's 95 % interval against a floor ("" where unknown)."""
    known = np.isfinite(rel)
    return np.select([~known, lo >= floor, hi < floor], ["", "in", "out"], default="boundary")


def kld_status(points: pd.DataFrame, kld_max: float | None) -> np.ndarray:
    """in / out / boundary of each point's KL-divergence interval against `kld_max` ("" where the
    point has no KL measurement or the regime sets no limit)."""
    n = len(points)
    if kld_max is None or "kld" not in points.columns:
        return np.full(n, "", dtype=object)
    k = points["kld"].to_numpy(dtype=float, na_value=np.nan)
    lo = points["kld_lo"].to_numpy(dtype=float, na_value=np.nan) if "kld_lo" in points.columns else k
    hi = points["kld_hi"].to_numpy(dtype=float, na_value=np.nan) if "kld_hi" in points.columns else k
    return np.select([~np.isfinite(k), hi <= kld_max, lo > kld_max], ["", "in", "out"], default="boundary")


def admission(points: pd.DataFrame, regime: Regime, *, allow_priors: bool = False) -> pd.DataFrame:
    """Per point: `meets_constraints`, `guard` (in / out / boundary, see the module doc),
    `passes_guard`, `boundary`, `evidence_ok`, `projected` (would be admitted but rests on priors),
    `admitted` and `reject_reason`. `allow_priors`: points resting on priors may be admitted, a
    prior's interval judged on its central value. `points` carry their derived columns
    (objectives.with_derived): the callers derive a table once, not once per regime."""
    from pareto_atlas.atlas.evidence import evidence_ok

    if regime.objective not in points.columns:
        raise ValueError(
            f"regime {regime.name}.objective: the points table has no column {regime.objective!r}; "
            "derive it first (atlas.objectives.with_derived)"
        )
    n = len(points)
    feasible = (
        points["feasible"].fillna(False).astype(bool).to_numpy() if "feasible" in points.columns else np.ones(n, bool)
    )
    obj = points[regime.objective].to_numpy(dtype=float, na_value=np.nan)
    meets = satisfied(points, regime.constraints) & feasible & np.isfinite(obj)
    rel = points["quality_rel"].to_numpy(dtype=float, na_value=np.nan)
    lo, hi = quality_rel_interval(points)
    explicit = np.zeros(n, bool)
    if "quality_rel_lo" in points.columns and "quality_rel_hi" in points.columns:
        explicit = np.isfinite(points["quality_rel_lo"].to_numpy(dtype=float, na_value=np.nan)) & np.isfinite(
            points["quality_rel_hi"].to_numpy(dtype=float, na_value=np.nan)
        )
    # Without a paired interval, quality_rel == 1 is the baseline's own score (or one equal to it):
    # the floor is a fraction of that very number, so its sampling error cannot move it across.
    same = (np.abs(rel - 1.0) < 1e-12) & ~explicit
    lo, hi = np.where(same, rel, lo), np.where(same, rel, hi)
    if regime.quality_floor is None:
        guard = np.full(n, "in", dtype=object)
    else:
        task = task_status(lo, hi, rel, regime.quality_floor)
        kl = kld_status(points, regime.kld_max)
        guard = np.select(
            [(task == "out") | (kl == "out"), (task == "in") | (kl == "in"), task == "boundary", kl == "boundary"],
            ["out", "in", "boundary", "boundary"],
            default="",
        )
    has_evidence = evidence_ok(points)
    ok_evidence = np.ones(n, bool) if allow_priors else has_evidence
    # Opting in to priors means taking them at their word: a prior's wide interval straddles the
    # floor by construction, so it is judged on its central value (and stays labelled a prior).
    floor = regime.quality_floor if regime.quality_floor is not None else -np.inf
    prior_passes = allow_priors & ~has_evidence & (guard == "boundary") & (np.nan_to_num(rel, nan=-np.inf) >= floor)
    passes = (guard == "in") | prior_passes
    admitted = meets & passes & ok_evidence
    reason = np.select(
        [~feasible, ~np.isfinite(obj), ~meets, guard == "", guard == "out", guard == "boundary", ~ok_evidence],
        [
            "infeasible",
            f"no {regime.objective}",
            "constraint",
            "quality unmeasured",
            "quality guard",
            "quality boundary case",
            "rests on priors (projected)",
        ],
        default="",
    )
    return pd.DataFrame(
        {
            "meets_constraints": meets,
            "guard": guard,
            "passes_guard": passes,
            "boundary": guard == "boundary",
            "evidence_ok": ok_evidence,
            "projected": meets & ~has_evidence & np.isin(guard, ("in", "boundary")) & ~admitted,
            "admitted": admitted,
            "reject_reason": reason,
            "quality_rel_lo": lo,
            "quality_rel_hi": hi,
        },
        index=points.index,
    )
