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
    p: float  # k / n (NaN when n = 0)
    stderr: float  # lm-eval: sqrt(p (1 - p) / (n - 1)); NaN when n < 2
    lo: float  # Wilson lower bound
    hi: float  # Wilson upper bound
    level: float = 0.95
    method: str = "wilson"

    def label(self) -> str:
        return f"{self.p:.3f} [{self.lo:.3f}, {self.hi:.3f}] ({self.k}/{self.n})"

    def to_dict(self) -> dict:
        return {
            "k": self.k,
            "n": self.n,
            "p": self.p,
            "stderr": self.stderr,
            "lo": self.lo,
            "hi": self.hi,
            "level": self.level,
            "method": self.method,
        }


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


@dataclass(frozen=True)
class PairedDifference:
    """Arm minus baseline accuracy on the same items: the difference, its 95 % interval
    (Newcombe's hybrid score interval for paired proportions, method 10 of Newcombe 1998, which
    stays honest at 0 discordant pairs where a bootstrap claims certainty), and the exact McNemar
    p-value from the discordant pairs (`b`: only the arm right, `c`: only the baseline right)."""

    n: int
    p_arm: float
    p_base: float
    b: int
    c: int
    diff: float
    lo: float
    hi: float
    mcnemar_p: float
    method: str = "newcombe-paired"

    def rel_interval(self) -> tuple[float, float, float]:
        """(ratio, lo, hi) of arm / baseline: the difference's interval over the baseline's score
        (the floor is a fraction of that measured score); NaN when the baseline scored 0."""
        if not self.p_base > 0:
            return math.nan, math.nan, math.nan
        # an arm scores in [0, 1], so its ratio lies in [0, 1 / p_base] whatever the difference's bounds
        return (
            self.p_arm / self.p_base,
            max(0.0, 1.0 + self.lo / self.p_base),
            min(1.0 / self.p_base, 1.0 + self.hi / self.p_base),
        )

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: the discordant pairs as a Binomial(b + c, 1/2) test."""
    m = b + c
    if m == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(m, i) for i in range(k + 1)) / 2.0**m
    return min(1.0, 2.0 * tail)


def paired_difference(arm: Iterable[bool], baseline: Iterable[bool], level: float = 0.95) -> PairedDifference:
    """Paired accuracy difference of two arms scored on the same items, in the same order."""
    x, y = [bool(v) for v in arm], [bool(v) for v in baseline]
    if len(x) != len(y) or not x:
        raise ValueError(f"paired_difference: need the same non-zero number of items, got {len(x)} and {len(y)}")
    n = len(x)
    a = sum(1 for i, j in zip(x, y) if i and j)
    b = sum(1 for i, j in zip(x, y) if i and not j)
    c = sum(1 for i, j in zip(x, y) if j and not i)
    d = n - a - b - c
    p1, p2 = (a + b) / n, (a + c) / n
    z = z_for(level)
    l1, u1 = wilson_interval(a + b, n, z)
    l2, u2 = wilson_interval(a + c, n, z)
    den = (a + b) * (c + d) * (a + c) * (b + d)
    phi = (a * d - b * c) / math.sqrt(den) if den > 0 else 0.0
    delta = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    eps = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    diff = p1 - p2
    return PairedDifference(
        n=n,
        p_arm=p1,
        p_base=p2,
        b=b,
        c=c,
        diff=diff,
        lo=max(-1.0, diff - delta),
        hi=min(1.0, diff + eps),
        mcnemar_p=mcnemar_exact(b, c),
    )


def items_for_halfwidth(flips: int, n: int, halfwidth: float, *, p: float | None = None, z: float = Z95) -> dict:
    """How many items a 95 % interval of half-width `halfwidth` needs, paired against the baseline
    and unpaired, at the rates a run of `n` items showed (`flips`: items whose answer changed either
    way; `p`: the baseline's accuracy, for the unpaired count). The paired difference's variance is
    about d/n for a discordance rate d (small differences); two independent proportions' is
    2 p (1 - p) / n. Where no item flipped, one flip is assumed (a rule-of-three style floor), so the
    count is a lower bound. What the time budget buys: paired flips need fewer items than accuracy."""
    if n < 1 or not 0.0 < halfwidth < 1.0:
        raise ValueError(f"n = {n}, halfwidth = {halfwidth}: need n >= 1 and 0 < halfwidth < 1")
    d = max(flips, 1) / n
    out = {"paired": math.ceil(z * z * d / halfwidth**2), "discordance": d, "floored": flips == 0}
    if p is not None:
        q = min(max(p, 1.0 / n), 1.0 - 1.0 / n)
        out["unpaired"] = math.ceil(z * z * 2.0 * q * (1.0 - q) / halfwidth**2)
    return out
