"""How a knob's damage scales with model size, measured: the same knob scored on two sizes of one
family against the same reference precision, and what the quality ladder's rung (c) makes of it.

A smaller model's measured effect carried to a larger one (store.ladder.carried) is only
conservative when the knob's damage does not grow with size. Measured on this project's CPU
(benchmarks/bench_damage.py, llama-perplexity's mean KL divergence from the Q4_K_M source over
2,040 tokens, Qwen2.5-Coder 0.5B -> 1.5B): Q4_0 weights and a q8_0 KV cache halve, a q4_0 KV cache
grows about six-fold. So rung (c) reads this table:

* a knob whose damage ratio's upper bound is <= 1 (towards the target) keeps the measured effect,
  its interval widened x CARRY_WIDENING;
* otherwise the damage the measurement cannot exclude (one minus the low end of the relative score,
  at least the interval's width) is multiplied by the ratio's upper bound, and, where the ratio's
  lower bound already exceeds 1 (growth established), the centre's damage by its point ratio;
* past the sizes measured the ratio is extrapolated as a power of the parameter ratio:
  factor = ratio ** (log(N_target / N_source) / log(N_large / N_small)), so carrying 0.5B -> 7B
  applies the 0.5B -> 1.5B growth about 2.4 times over (and carrying down inverts it);
* a knob with no row carries with the x CARRY_WIDENING rule alone, and says so.

The table (spec/damage_scaling.csv) is measured evidence, each row naming the stores, engine and
date it came from; `benchmarks/bench_damage.py --write` rewrites it from two stores.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

COLUMNS = (
    "family",
    "ref_weights",
    "ref_kv",
    "weights",
    "kv",
    "metric",
    "small_model",
    "small_params",
    "small",
    "small_lo",
    "small_hi",
    "large_model",
    "large_params",
    "large",
    "large_lo",
    "large_hi",
    "source",
)


@dataclass(frozen=True)
class DamageScaling:
    """One knob's damage measured on two sizes of a family (`metric`: larger is worse)."""

    family: str
    ref_weights: str  # the reference both damages are measured against
    ref_kv: str
    weights: str
    kv: str
    metric: str
    small_model: str
    small_params: float
    small: tuple[float, float, float]  # value, 95 % low, 95 % high
    large_model: str
    large_params: float
    large: tuple[float, float, float]
    source: str

    @property
    def ratio(self) -> tuple[float, float, float]:
        """large / small, its bounds divided crosswise (a conservative box)."""
        (s, s_lo, s_hi), (g, g_lo, g_hi) = self.small, self.large

        def div(a: float, b: float) -> float:
            return a / b if b > 0 else math.inf if a > 0 else 1.0

        return div(g, s), div(max(g_lo, 0.0), s_hi), div(g_hi, max(s_lo, 0.0))

    def exponent(self, n_from: float, n_to: float) -> float:
        """How many times the measured size step the carry from n_from to n_to parameters spans."""
        step = math.log(self.large_params / self.small_params)
        return math.log(n_to / n_from) / step if step > 0 and n_from > 0 and n_to > 0 else 0.0

    def factors(self, n_from: float, n_to: float) -> tuple[float, float]:
        """(centre, upper) factors on the damage carried from n_from to n_to parameters: the centre
        scales only where growth is established (the ratio's bounds on one side of 1); the upper
        factor is the ratio's bound on the growing side, never below 1."""
        e = self.exponent(n_from, n_to)
        r, lo, hi = self.ratio
        if e >= 0:
            up, centre = hi**e, (r**e if lo > 1 else 1.0)
        else:  # carrying down: a knob that shrinks with size grows downward
            up, centre = lo**e if lo > 0 else math.inf, (r**e if hi < 1 else 1.0)
        return max(centre, 1.0), max(up, 1.0)

    def describe(self) -> str:
        r, lo, hi = self.ratio
        return f"{self.metric} x{r:.2g} [{lo:.2g}, {hi:.2g}] {self.small_model} -> {self.large_model}"


def _f(row: dict, key: str) -> float:
    try:
        return float(row[key])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"damage_scaling.csv: field {key!r} must be a number, got {row.get(key)!r}") from None


def read_table(path: Path | None = None) -> tuple[DamageScaling, ...]:
    """The rows of a damage-scaling table (default: the shipped one)."""
    text = (
        path.read_text()
        if path is not None
        else resources.files("pareto_atlas.spec").joinpath("damage_scaling.csv").read_text()
    )
    rows = [r for r in csv.DictReader(line for line in text.splitlines() if not line.startswith("#"))]
    out = []
    for r in rows:
        missing = [c for c in COLUMNS if c not in r]
        if missing:
            raise ValueError(f"damage_scaling.csv: missing column {missing[0]!r}; columns are {', '.join(COLUMNS)}")
        out.append(
            DamageScaling(
                r["family"],
                r["ref_weights"],
                r["ref_kv"],
                r["weights"],
                r["kv"],
                r["metric"],
                r["small_model"],
                _f(r, "small_params"),
                (_f(r, "small"), _f(r, "small_lo"), _f(r, "small_hi")),
                r["large_model"],
                _f(r, "large_params"),
                (_f(r, "large"), _f(r, "large_lo"), _f(r, "large_hi")),
                r["source"],
            )
        )
    return tuple(out)


@cache
def shipped() -> tuple[DamageScaling, ...]:
    return read_table()


def scaling_for(
    family: str, ref: tuple[str, str], knob: tuple[str, str], table: tuple[DamageScaling, ...] | None = None
) -> DamageScaling | None:
    """The measured scaling of `knob` (weights, kv) against `ref` in `family`, if any."""
    for s in shipped() if table is None else table:
        if s.family == family and (s.ref_weights, s.ref_kv) == ref and (s.weights, s.kv) == knob:
            return s
    return None


def write_table(rows: list[DamageScaling], path: Path, header: str) -> None:
    """Rewrite a damage-scaling table (bench_damage --write), one commented header line per
    line of `header`."""
    with path.open("w", newline="") as fh:
        for line in header.splitlines():
            fh.write(f"# {line}\n")
        w = csv.writer(fh)
        w.writerow(COLUMNS)
        for s in rows:
            w.writerow(
                [
                    s.family,
                    s.ref_weights,
                    s.ref_kv,
                    s.weights,
                    s.kv,
                    s.metric,
                    s.small_model,
                    f"{s.small_params:.0f}",
                    *(f"{v:.6g}" for v in s.small),
                    s.large_model,
                    f"{s.large_params:.0f}",
                    *(f"{v:.6g}" for v in s.large),
                    s.source,
                ]
            )


__all__ = ["COLUMNS", "DamageScaling", "read_table", "scaling_for", "shipped", "write_table"]
