"""The quality guard the atlas applies: an arm must keep `floor` (default 95 %) of the baseline's score.

The decision uses an interval on the ratio, not the point estimate alone: clearly above the floor
passes, clearly below fails, and an interval that straddles the floor is flagged `boundary`
(with `passes` set from the point estimate) so the atlas shows it instead of deciding silently.
Prefer `guard_paired` when both arms answered the same items: pairing removes the item-difficulty
variance, so an arm that repeats the baseline exactly gets [1, 1], not a ±30 % interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from .records import QualityRecord
from .stats import Score, z_for, score

DEFAULT_FLOOR = 0.95


@dataclass(frozen=True)
class GuardResult:
    passes: bool
    boundary: bool  # the ratio's interval contains the floor: not decided by the data
    rel: float  # arm score / baseline score
    rel_lo: float
    rel_hi: float
    floor: float
    reason: str
    method: str  # "katz-log" (independent scores) or "paired-bootstrap" (same items)


def _decide(rel: float, lo: float, hi: float, floor: float, method: str) -> GuardResult:
    span = f"quality/baseline {rel:.3f} [{lo:.3f}, {hi:.3f}]"
    if lo >= floor:
        return GuardResult(True, False, rel, lo, hi, floor, f"{span} is above the floor {floor:g}", method)
    if hi < floor:
        return GuardResult(False, False, rel, lo, hi, floor, f"{span} is below the floor {floor:g}", method)
    side = "above" if rel >= floor else "below"
    return GuardResult(
        rel >= floor,
        True,
        rel,
        lo,
        hi,
        floor,
        f"boundary: {span} straddles the floor {floor:g} (point estimate {side}); measure more items",
        method,
    )


def _check_floor(floor: float) -> None:
    if not 0.0 < floor <= 1.5:
        raise ValueError(f"quality guard floor: {floor} must be in (0, 1.5] (a fraction of the baseline)")


def _undefined(floor: float, base_n: int, method: str) -> GuardResult:
    return GuardResult(
        False,
        True,
        math.nan,
        math.nan,
        math.nan,
        floor,
        f"boundary: the baseline scored 0/{base_n}, so a relative floor is undefined; "
        "use agreement with the baseline or a harder-to-fail task",
        method,
    )


def guard(arm: Score, baseline: Score, floor: float = DEFAULT_FLOOR, level: float = 0.95) -> GuardResult:
    """Guard from two independent scores: Katz log interval on the ratio of proportions
    (0.5 added to every cell of the 2x2 table when a cell is 0, Haldane's correction: so 6/6 against
    6/6 reads [0.75, 1.34], not a certain [1, 1])."""
    _check_floor(floor)
    if arm.n == 0 or baseline.n == 0:
        raise ValueError("quality guard: both scores need n > 0")
    if baseline.k == 0:
        return _undefined(floor, baseline.n, "katz-log")
    a, n1, c, n2 = float(arm.k), float(arm.n), float(baseline.k), float(baseline.n)
    rel = (a / n1) / (c / n2)
    if a == 0 or a == n1 or c == n2:
        # each cell (successes and failures of both arms) gets 0.5, so each total gets 1
        a, n1, c, n2 = a + 0.5, n1 + 1.0, c + 0.5, n2 + 1.0
    se = math.sqrt(max(0.0, 1 / a - 1 / n1 + 1 / c - 1 / n2))
    z = z_for(level)
    centre = math.log((a / n1) / (c / n2))
    # Haldane's cells centre the interval on the corrected ratio: 0 of 5 against 2 of 5 reads
    # [0.012, 3.35] around 0.2; the interval is widened to hold the observed ratio (0) too
    lo, hi = math.exp(centre - z * se), math.exp(centre + z * se)
    return _decide(rel, min(lo, rel), max(hi, rel), floor, "katz-log")


def guard_paired(
    arm: Sequence[QualityRecord],
    baseline: Sequence[QualityRecord],
    floor: float = DEFAULT_FLOOR,
    level: float = 0.95,
    n_boot: int = 4000,
    seed: int = 0,
    strict: bool = True,
) -> GuardResult:
    """Guard from per-item records of both arms on the same items: percentile bootstrap of the
    ratio of mean correctness, resampling items (pairs) together."""
    _check_floor(floor)
    base_by_id = {r.item_id: r for r in baseline}
    ids = [r.item_id for r in arm if r.item_id in base_by_id]
    if not ids:
        raise ValueError("quality guard: the arm and the baseline share no item ids")
    arm_by_id = {r.item_id: r for r in arm}
    pick = (lambda r: r.correct_strict) if strict else (lambda r: r.correct_flexible)
    x = np.array([pick(arm_by_id[i]) for i in ids], dtype=float)
    y = np.array([pick(base_by_id[i]) for i in ids], dtype=float)
    if y.sum() == 0:
        return _undefined(floor, len(ids), "paired-bootstrap")
    k_arm, k_base, n = int(x.sum()), int(y.sum()), len(ids)
    if k_arm in (0, n) or k_base == n:
        # Every resample then gives the same ratio and the bootstrap claims certainty it does not
        # have (0/3 vs 1/3 would read [0, 0]); the Katz interval with Haldane's 0.5 stays honest.
        g = guard(score(k_arm, n), score(k_base, n), floor, level)
        return replace(g, method="katz-log (paired bootstrap degenerate)")
    rel = x.mean() / y.mean()
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(ids), size=(n_boot, len(ids)))
    xs, ys = x[idx].mean(axis=1), y[idx].mean(axis=1)
    ok = ys > 0  # a resample with no baseline success has no ratio; it is dropped
    ratios = xs[ok] / ys[ok]
    alpha = (1 - level) / 2
    lo, hi = np.quantile(ratios, [alpha, 1 - alpha])
    return _decide(float(rel), float(lo), float(hi), floor, "paired-bootstrap")
