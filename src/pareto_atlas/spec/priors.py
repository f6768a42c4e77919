"""Literature priors: cited effect sizes from seed 000's evidence table, for methods without anchors.

A prior is a published number in its own setting; the simulator uses one only for what it cannot
derive (an EAGLE head's acceptance, sparse attention's quality) and labels the result "prior".
"""

from __future__ import annotations

import csv
import math
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

# A quality prior with no published interval ("negligible loss", "matches full KV") reads as a
# relative change of the score between -10 % and +2 %: wide enough to straddle a 95 % floor, so a
# claim without an interval can never clear the quality guard on its own.
DEFAULT_QUALITY_SPREAD = (-0.10, 0.02)

FAMILIES = (
    "speculation",
    "kv-evict",
    "kv-quant",
    "sparse-attn",
    "weight-quant",
    "batching",
    "disaggregation",
    "simulation",
)


@dataclass(frozen=True)
class Prior:
    key: str
    method: str
    family: str
    metric: str
    value: float = math.nan  # point value where the source gives one
    lo: float = math.nan  # range where the source gives one ("up to X" sets only hi)
    hi: float = math.nan
    setting: str = ""
    source: str = ""  # evidence_table.tsv key

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"priors.{self.key}.family: {self.family!r} is not one of {', '.join(FAMILIES)}")
        if all(math.isnan(v) for v in (self.value, self.lo, self.hi)):
            raise ValueError(f"priors.{self.key}: needs value, lo or hi")
        if not math.isnan(self.lo) and not math.isnan(self.hi) and self.lo > self.hi:
            raise ValueError(f"priors.{self.key}: lo {self.lo} > hi {self.hi}")

    @property
    def central(self) -> float:
        """The value, else the middle of lo..hi, else the one bound given."""
        if not math.isnan(self.value):
            return self.value
        if not math.isnan(self.lo) and not math.isnan(self.hi):
            return (self.lo + self.hi) / 2
        return self.hi if not math.isnan(self.hi) else self.lo

    @property
    def label(self) -> str:
        return f"prior:{self.source}"

    def delta_interval(self) -> tuple[float, float, float]:
        """A quality prior's relative change of the score (central, lo, hi). The interval is the
        published range where the source gives one, else DEFAULT_QUALITY_SPREAD around the value:
        a prior is weak evidence and never carries a zero-width quality."""
        c = self.central
        lo = self.lo if not math.isnan(self.lo) else c + DEFAULT_QUALITY_SPREAD[0]
        hi = self.hi if not math.isnan(self.hi) else c + DEFAULT_QUALITY_SPREAD[1]
        return c, min(lo, c), max(hi, c)


@lru_cache(maxsize=1)
def load_priors() -> dict[str, Prior]:
    """All shipped priors by key."""
    raw = tomllib.loads(resources.files("pareto_atlas.spec").joinpath("priors.toml").read_text())
    out = {}
    for key, vals in raw["priors"].items():
        unknown = set(vals) - {"method", "family", "metric", "value", "lo", "hi", "setting", "source"}
        if unknown:
            raise ValueError(f"priors.toml [priors.{key}]: unknown field {sorted(unknown)[0]!r}")
        out[key] = Prior(key=key, **{k: float(v) if k in ("value", "lo", "hi") else v for k, v in vals.items()})
    return out


@lru_cache(maxsize=1)
def evidence_keys() -> frozenset[str]:
    """Keys of the evidence table shipped with the package (a copy of seed 000's table)."""
    text = resources.files("pareto_atlas.spec").joinpath("evidence_table.tsv").read_text()
    return frozenset(row["key"] for row in csv.DictReader(text.splitlines(), delimiter="\t"))


def priors_for(family: str | None = None, metric: str | None = None) -> list[Prior]:
    return [
        p
        for p in load_priors().values()
        if (family is None or p.family == family) and (metric is None or p.metric == metric)
    ]


def get_prior(key: str) -> Prior:
    priors = load_priors()
    if key not in priors:
        raise ValueError(f"prior {key!r}: unknown; known: {', '.join(sorted(priors))}")
    return priors[key]


def acceptance_from_tokens_per_step(tokens: float, k: int) -> float:
    """The per-draft acceptance a with (1 - a^(k+1)) / (1 - a) = tokens (bisection; tokens in [1, k+1))."""
    if k <= 0:
        return 0.0
    tokens = min(max(tokens, 1.0), k + 1 - 1e-6)
    lo, hi = 0.0, 1.0 - 1e-9
    for _ in range(60):
        mid = (lo + hi) / 2
        if (1 - mid ** (k + 1)) / (1 - mid) < tokens:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2
