"""Objectives of the atlas: which column, which direction, and how wide its error bar is.

One place says how an objective's uncertainty is read from a points table (contract 1), so the
frontier, the regimes and `pick` all agree on what "beaten beyond the error bar" means.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

LATENCY_COLUMNS = ("ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "e2e_p50_ms", "e2e_p99_ms")
THROUGHPUT_COLUMNS = ("throughput_tok_s", "throughput_per_device_tok_s", "goodput_rps")
QUALITY_COLUMNS = ("quality", "quality_rel")
COST_COLUMNS = ("cost_per_mtok",)
OTHER_NUMERIC = ("mem_gb", "n_opts", "concurrency", "rate_rps", "price_per_hour")

# Direction a practitioner wants when the column is an objective.
DEFAULT_DIRECTION = {
    **{c: "min" for c in LATENCY_COLUMNS},
    **{c: "max" for c in THROUGHPUT_COLUMNS},
    **{c: "max" for c in QUALITY_COLUMNS},
    "cost_per_mtok": "min",
    "mem_gb": "min",
}
OBJECTIVE_COLUMNS = tuple(DEFAULT_DIRECTION)
DIRECTIONS = ("min", "max")

UNITS = {
    **{c: "ms" for c in LATENCY_COLUMNS},
    "throughput_tok_s": "tok/s",
    "throughput_per_device_tok_s": "tok/s/device",
    "goodput_rps": "req/s",
    "cost_per_mtok": "$/Mtok",
    "quality": "score",
    "quality_rel": "x baseline",
    "mem_gb": "GB",
}


@dataclass(frozen=True)
class Objective:
    """One axis of the frontier. `direction` is "min" or "max"."""

    column: str
    direction: str

    def __post_init__(self) -> None:
        if self.column not in DEFAULT_DIRECTION:
            raise ValueError(
                f"objective {self.column!r}: not an objective column; allowed: {', '.join(OBJECTIVE_COLUMNS)}"
            )
        if self.direction not in DIRECTIONS:
            raise ValueError(f"objective {self.column}: direction {self.direction!r}; allowed: min, max")

    @classmethod
    def parse(cls, spec: "str | Objective") -> "Objective":
        """`"tpot_p99_ms"` (default direction) or `"tpot_p99_ms:min"`."""
        if isinstance(spec, Objective):
            return spec
        column, _, direction = str(spec).strip().partition(":")
        column = column.strip()
        if column not in DEFAULT_DIRECTION:
            raise ValueError(f"objective {column!r}: not an objective column; allowed: {', '.join(OBJECTIVE_COLUMNS)}")
        return cls(column, direction.strip() or DEFAULT_DIRECTION[column])

    @property
    def sign(self) -> float:
        """Multiply by this to turn the objective into one to minimise."""
        return 1.0 if self.direction == "min" else -1.0


DEFAULT_OBJECTIVES = (
    Objective("quality_rel", "max"),
    Objective("tpot_p99_ms", "min"),
    Objective("cost_per_mtok", "min"),
)


def gpus_of(points: pd.DataFrame) -> pd.Series:
    """GPUs each point's configuration holds: its `gpus` (or `n_devices`) column where set, else from
    its knob columns (Knobs.gpus: replicas x tp x pp, both pools of a disaggregated one; a missing
    parallelism column is the one-GPU default, as every measured anchor did)."""
    from pareto_atlas.spec.knobs import PARALLEL_DEFAULTS

    def col(name: str) -> np.ndarray:
        if name not in points.columns:
            return np.full(len(points), float(PARALLEL_DEFAULTS[name]))
        return pd.to_numeric(points[name], errors="coerce").fillna(PARALLEL_DEFAULTS[name]).to_numpy(dtype=float)

    tp, pp, rep = col("tp"), col("pp"), col("replicas")
    ptp = np.where(col("prefill_tp") > 0, col("prefill_tp"), tp)
    disagg = points["batching"].astype(str).eq("disagg").to_numpy() if "batching" in points.columns else False
    n = pd.Series(
        rep * np.where(disagg, col("prefill_workers") * ptp + col("decode_workers") * tp * pp, tp * pp),
        index=points.index,
    )
    for given in ("n_devices", "gpus"):
        if given in points.columns:
            n = pd.to_numeric(points[given], errors="coerce").fillna(n)
    return n.clip(lower=1)


def with_derived(points: pd.DataFrame) -> pd.DataFrame:
    """The points with the objective columns derived from others where a table lacks them:
    `gpus` and `n_devices` (gpus_of: every GPU the configuration holds) and
    `throughput_per_device_tok_s` (a configuration's total over those GPUs); a table made before
    parallelism existed gets its parallelism columns at their one-GPU defaults."""
    if "throughput_tok_s" not in points.columns:
        return points
    from pareto_atlas.spec.knobs import PARALLEL_DEFAULTS

    missing = {f: d for f, d in PARALLEL_DEFAULTS.items() if f not in points.columns}
    if "throughput_per_device_tok_s" in points.columns:
        return points.assign(**missing, **({} if "gpus" in points.columns else {"gpus": gpus_of(points)}))
    n = gpus_of(points)
    return points.assign(**missing, gpus=n, n_devices=n, throughput_per_device_tok_s=points["throughput_tok_s"] / n)


def _col(points: pd.DataFrame, name: str, default: float = 0.0) -> np.ndarray:
    if name in points.columns:
        return points[name].to_numpy(dtype=float, na_value=np.nan)
    return np.full(len(points), default)


def quality_rel_interval(points: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The 95 % interval of quality_rel: the `quality_rel_lo/hi` columns where the table has them
    (paired against the baseline, or a prior's interval), else quality_lo..hi divided by the
    baseline quality.

    The baseline is recovered as quality / quality_rel; where quality is 0 (a collapsed arm) that
    ratio is undefined, so the median baseline of the table is used instead.
    """
    q = _col(points, "quality", np.nan)
    rel = _col(points, "quality_rel", np.nan)
    if "quality_rel_lo" in points.columns and "quality_rel_hi" in points.columns:
        lo, hi = _col(points, "quality_rel_lo", np.nan), _col(points, "quality_rel_hi", np.nan)
        given = np.isfinite(lo) & np.isfinite(hi)
        if given.all():
            return np.minimum(lo, rel), np.maximum(hi, rel)
    else:
        given = np.zeros(len(points), bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where((q > 0) & np.isfinite(rel), rel / q, np.nan)
    fallback = np.nanmedian(scale) if np.isfinite(scale).any() else 1.0
    scale = np.where(np.isfinite(scale), scale, fallback)
    lo = _col(points, "quality_lo", np.nan) * scale
    hi = _col(points, "quality_hi", np.nan) * scale
    # A point without an interval carries no quality error bar (degenerate interval).
    lo = np.where(np.isfinite(lo), lo, rel)
    hi = np.where(np.isfinite(hi), hi, rel)
    if given.any():
        lo = np.where(given, _col(points, "quality_rel_lo", np.nan), lo)
        hi = np.where(given, _col(points, "quality_rel_hi", np.nan), hi)
    return np.minimum(lo, rel), np.maximum(hi, rel)


def interval(points: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) bounds of a column's value given the point's error bar.

    Latency: ± lat_rel_err. Throughput: ± thr_rel_err. Neither goes below zero: a bar of 100 % or
    more (a card calibrated across model sizes carries ±150 % and more) bounds the value below by 0.
    Cost is price / throughput, so its bounds come from the throughput bounds (not a symmetric
    band). Quality: the measured 95 % interval. Measured anchors carry 0 relative error, so their
    interval is the point itself.
    """
    v = _col(points, column, np.nan)
    if column in LATENCY_COLUMNS:
        e = np.nan_to_num(_col(points, "lat_rel_err"), nan=0.0)
        return v * np.maximum(1 - e, 0.0), v * (1 + e)
    if column in THROUGHPUT_COLUMNS:
        e = np.nan_to_num(_col(points, "thr_rel_err"), nan=0.0)
        return v * np.maximum(1 - e, 0.0), v * (1 + e)
    if column in COST_COLUMNS:
        e = np.clip(np.nan_to_num(_col(points, "thr_rel_err"), nan=0.0), 0.0, 0.99)
        return v / (1 + e), v / (1 - e)
    if column == "quality":
        lo, hi = _col(points, "quality_lo", np.nan), _col(points, "quality_hi", np.nan)
        lo = np.where(np.isfinite(lo), lo, v)
        hi = np.where(np.isfinite(hi), hi, v)
        return np.minimum(lo, v), np.maximum(hi, v)
    if column == "quality_rel":
        return quality_rel_interval(points)
    return v, v
