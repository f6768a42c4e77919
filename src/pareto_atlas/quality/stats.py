"""Scores with uncertainty: every accuracy the quality stage reports is a `Score`.

The point estimate and stderr follow lm-evaluation-harness (mean, sqrt(p(1-p)/(n-1))); the interval
is Wilson's, which stays inside [0, 1] and behaves at p = 0 or 1 where the normal interval collapses
(a broken arm that answers 0/200 still gets an honest upper bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

Z95 = 1.959963984540054  # two-sided 95 % normal quantile


@dataclass(frozen=True)
class Score:
    """k successes out of n, with lm-eval's stderr and a Wilson interval at `level`."""

    k: int
    n: int
    p: float          # k / n (NaN when n = 0)
    stderr: float     # lm-eval: sqrt(p (1 - p) / (n - 1)); NaN when n < 2
    lo: float         # Wilson lower bound
    hi: float         # Wilson upper bound
    level: float = 0.95
    method: str = "wilson"

    def label(self) -> str:
        return f"{self.p:.3f} [{self.lo:.3f}, {self.hi:.3f}] ({self.k}/{self.n})"

    def to_dict(self) -> dict:
        return {"k": self.k, "n": self.n, "p": self.p, "stderr": self.stderr, "lo": self.lo, "hi": self.hi,
                "level": self.level, "method": self.method}


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for k successes in n trials; (0, 1) when n = 0 (nothing is known)."""
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"wilson_interval: need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return 0.0, 1.0
    p = k / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # Clamp float noise only; at k = 0 or k = n the bound is exactly 0 or 1 mathematically.
    lo = 0.0 if k == 0 else max(0.0, centre - half)
    hi = 1.0 if k == n else min(1.0, centre + half)
    return lo, hi


def lm_eval_stderr(k: int, n: int) -> float:
    """lm-eval's `mean_stderr` for 0/1 items: sample std (ddof=1) / sqrt(n) = sqrt(p(1-p)/(n-1))."""
    if n < 2:
        return math.nan
    p = k / n
    return math.sqrt(p * (1 - p) / (n - 1))


def z_for(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise ValueError(f"score level: {level} must be in (0, 1)")
    if abs(level - 0.95) < 1e-12:
        return Z95
    from scipy.stats import norm  # only for unusual levels; keeps import light

    return float(norm.ppf(0.5 + level / 2))


def score(k: int, n: int, level: float = 0.95) -> Score:
    lo, hi = wilson_interval(k, n, z_for(level))
    return Score(k=k, n=n, p=(k / n if n else math.nan), stderr=lm_eval_stderr(k, n), lo=lo, hi=hi, level=level)


def score_bools(values: Iterable[bool], level: float = 0.95) -> Score:
    vals = [bool(v) for v in values]
    return score(sum(vals), len(vals), level)
