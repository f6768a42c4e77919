"""Published quality as evidence. Each published score for a model's knobs becomes a
`PublishedQuality`: the score, its baseline from the same document, the ratio between them, and an
interval the quality guard can hold against its floor (`published_for`, `guard_choice`).

Intervals (95 %). Each result's `method` field names the one it used.

* The absolute score q (as a proportion) uses the source's printed stderr where there is one
  (normal approximation, q +- z se). Otherwise it uses a Wilson interval from the item count.
* The ratio rel = score / baseline is taken on the log scale:
  - an arm with a printed stderr contributes (se / p)^2 to the variance of log p (delta method);
  - any other arm contributes Katz's binomial term, (1 - p) / (n p);
  - at p = 0 or 1, Haldane's 0.5 is added to each cell, as in `quality.guards.guard`.
  The two contributions are added as if the arms were independent. They were run on the same
  items, but the per-item results are not published. Two arms that mostly agree have a positive
  covariance, so leaving it out can only widen the interval: the bound is conservative, not
  tighter than the document supports.
* Some scores get no binomial interval, and the row is marked `informational`:
  - perplexity, LongBench-style averages and naive means of subject accuracies, which are not
    proportions of items;
  - a proportion with neither an item count nor a stderr;
  - a proxy row, which is another model's score.
  An informational row is printed beside an answer, and the guard never uses it. Its rel is the
  point ratio. For perplexity rel is baseline / score, so that below 1 means worse for every
  scale.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import pandas as pd

from .published_table import (
    COLUMNS,
    OWN_PRECISION,
    PROPORTION,
    PublishedQualityError,
    load_published_quality,
    read_quality_table,
)
from .stats import Z95
from .tasks import published_benchmark

__all__ = [
    "COLUMNS",
    "PublishedQuality",
    "PublishedQualityError",
    "evidence",
    "guard_choice",
    "load_published_quality",
    "published_for",
    "ratio_interval",
    "read_quality_table",
    "summary_lines",
    "wilson",
]
OWN_KV = ("f16", "bf16")


@dataclass(frozen=True)
class PublishedQuality:
    model: str
    weights: str
    kv: str
    eviction: str
    kv_budget: str  # as published: tokens, or a ratio <= 1; "" without eviction
    benchmark: str
    metric: str  # exactly as the source names it
    n_items: int  # 0 where neither the source nor the benchmark definition gives it
    score: float  # as published, on the row's scale
    baseline_score: float  # from the same document
    rel: float  # score / baseline (baseline / score for perplexity); 1 for the baseline itself
    rel_lo: float
    rel_hi: float
    q: float  # the absolute score as a proportion (NaN when it is not one)
    q_lo: float
    q_hi: float
    method: str  # how the intervals were made
    source: str
    publisher: str
    provenance: str  # published:<publisher> <benchmark> (<source>)
    informational: bool  # no interval the guard can use: printed, never decided on
    shots: str = ""
    scale: str = ""
    proxy_for: str = ""  # the model actually measured, where the row stands in for another
    reason: str = ""  # why the row is informational
    kv_method: str = ""  # a quantized KV cache's method as the row states it: scales, granularity, engine


def wilson(p: float, n: float, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a proportion p observed on n items (p need not be k/n exactly:
    published scores are rounded)."""
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(max(0.0, p * (1 - p) / n + z * z / (4 * n * n))) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def log_arm(p: float, n: float, se: float | None) -> tuple[float, float]:
    """(p, variance of log p) for one arm: (se / p)^2 from a printed stderr, else Katz's
    (1 - p) / (n p); at p = 0 or 1 the binomial arm gets Haldane's 0.5 per cell (p and n corrected)."""
    if se is not None:
        return p, ((se / p) ** 2 if p > 0 else math.inf)
    if p <= 0 or p >= 1:
        n = n + 1.0
        p = (p * (n - 1.0) + 0.5) / n
    return p, (1 - p) / (n * p)


def ratio_interval(
    p: float, pb: float, n: float, se: float | None = None, se_b: float | None = None, z: float = Z95
) -> tuple[float, float]:
    """Log-scale interval on p / pb, the arms' variances added as if independent (see the module)."""
    (p1, v1), (p2, v2) = log_arm(p, n, se), log_arm(pb, n, se_b)
    if p1 <= 0:
        return 0.0, math.inf
    centre, half = math.log(p1 / p2), z * math.sqrt(v1 + v2)
    return math.exp(centre - half), math.exp(centre + half)


def _num(v: str) -> float | None:
    return float(v) if v not in ("", None) else None


def _informational(r: pd.Series) -> str:
    if r["proxy_for"]:
        return f"proxy: measured on {r['proxy_for']}, not on this model"
    if r["scale"] not in PROPORTION:
        return f"scale {r['scale']!r} is not a proportion of items: no binomial interval"
    if not r["n_items"] and not (r["score_stderr"] and r["baseline_stderr"]):
        return "no item count and no stderr: no interval"
    if float(r["baseline_score"]) == 0:
        return "the baseline scored 0: a ratio is undefined"
    return ""


def _provenance(r: pd.Series) -> str:
    tail = f" [proxy: measured on {r['proxy_for']}]" if r["proxy_for"] else ""
    return f"published:{r['publisher']} {r['benchmark']} ({r['source']}){tail}"


def _q_interval(q: float, n: int, se: float | None) -> tuple[float, float, str]:
    if se is not None:
        return max(0.0, q - Z95 * se), min(1.0, q + Z95 * se), "q: normal on the published stderr"
    if n:
        return (*wilson(q, n), f"q: Wilson, n={n}")
    return math.nan, math.nan, "q: no interval (no item count, no stderr)"


def _arms(se_s: float | None, se_b: float | None, n: int) -> str:
    if se_s is not None and se_b is not None:
        return "the published stderrs (delta method)"
    if se_s is None and se_b is None:
        return f"independent binomials, n={n} each (Katz)"
    return f"the stderr where printed, else a binomial of n={n}"


def evidence(r: pd.Series, baseline_as: str = "") -> PublishedQuality:
    """One table row as evidence: the quantized arm against its baseline, or (baseline_as, the
    precision it is asked for under) the baseline itself, whose rel is 1 by definition and whose q
    is the baseline's score."""
    unit = 100.0 if r["scale"] == "percent" else 1.0
    s, b = float(r["score"]), float(r["baseline_score"])
    se_s, se_b = (None if v is None else v / unit for v in (_num(r["score_stderr"]), _num(r["baseline_stderr"])))
    n = int(r["n_items"]) if r["n_items"] else 0
    if baseline_as:
        s, se_s = b, se_b
    why = _informational(r)
    nan = math.nan
    q, q_lo, q_hi, qm = nan, nan, nan, f"q: none (scale {r['scale']})"
    if r["scale"] in PROPORTION:
        q = s / unit
        q_lo, q_hi, qm = _q_interval(q, n, se_s)
    rel = (b / s if s else nan) if r["scale"] == "perplexity" else (s / b if b else nan)
    rel_lo = rel_hi = nan
    if baseline_as:
        rel = rel_lo = rel_hi = 1.0
        method = f"baseline itself: rel 1 by definition; {qm}"
    elif why:
        method = f"informational ({why}); rel is the point ratio; {qm}"
    else:
        rel_lo, rel_hi = ratio_interval(q, b / unit, n, se_s, se_b)
        method = f"rel: log-ratio interval from {_arms(se_s, se_b, n)}, item pairing unknown so not assumed; {qm}"
    knobs = (
        dict(weights=baseline_as, kv="f16", eviction="none", kv_budget="")
        if baseline_as
        else dict(weights=r["weights"], kv=r["kv"], eviction=r["eviction"], kv_budget=r["kv_budget"])
    )
    return PublishedQuality(
        model=r["model"],
        **knobs,
        benchmark=r["benchmark"],
        metric=r["metric"],
        n_items=n,
        score=s,
        baseline_score=b,
        rel=rel,
        rel_lo=rel_lo,
        rel_hi=rel_hi,
        q=q,
        q_lo=q_lo,
        q_hi=q_hi,
        method=method,
        source=r["source"],
        publisher=r["publisher"],
        provenance=_provenance(r),
        informational=bool(why),
        shots=r["shots"],
        scale=r["scale"],
        proxy_for=r["proxy_for"],
        reason=why,
        kv_method=""
        if baseline_as or r["kv"] in OWN_KV
        else f"{r['kv_scales']} scales ({r['kv_granularity']}), {r['kv_engine']}",
    )


def _is_reference(r: pd.Series) -> bool:
    """A released checkpoint scored against itself at its own KV precision, no eviction: the model as
    shipped in a quantized format (gpt-oss's MXFP4), whose rows are their own baseline."""
    return r["checkpoint"] == r["baseline_checkpoint"] and r["kv"] in OWN_KV and r["eviction"] == "none"


def _budget_matches(budget: str, kv_keep: float) -> bool:
    """A ratio budget must equal kv_keep; a token budget cannot be converted to a fraction without
    the prompts' lengths, so it matches any kv_keep < 1 (its kv_budget field says what it was)."""
    v = float(budget)
    return kv_keep < 1.0 and (v > 1.0 or abs(v - kv_keep) < 1e-6)


def published_for(
    model: str,
    weights: str,
    kv: str = "f16",
    eviction: str = "none",
    kv_keep: float = 1.0,
    benchmark: str | None = None,
    table: pd.DataFrame | None = None,
    kv_scales: str | None = None,
) -> list[PublishedQuality]:
    """Every published score for this model and these knobs, each against its own document's baseline.

    Weights F16/BF16 with an f16/bf16 KV cache and no eviction mean the model's own precision: the
    result is each document's baseline (rel exactly 1, q its absolute score), one per benchmark
    setting. KV dtypes match by name (a table's int8 is not llama.cpp's q8_0). `kv_scales` (the
    knob's method, quality.kv_method): a quantized KV cache's row is used only where its document
    states the same scales; a calibrated cache's score is no evidence for one with default scales,
    and a row whose scales are "unstated" is evidence for neither."""
    t = load_published_quality() if table is None else table
    t = t[t["model"] == model]
    if benchmark is not None:
        t = t[t["benchmark"] == benchmark]
    if weights in OWN_PRECISION and kv in OWN_KV and eviction == "none":
        keys = ["source", "baseline_checkpoint", "benchmark", "metric", "shots"]
        return [evidence(r, baseline_as=weights) for _, r in t.drop_duplicates(keys).iterrows()]
    own_w = t["weights"].isin(OWN_PRECISION) if weights in OWN_PRECISION else t["weights"] == weights
    own_kv = t["kv"].isin(OWN_KV) if kv in OWN_KV else t["kv"] == kv
    t = t[own_w & own_kv & (t["eviction"] == eviction)]
    if kv_scales is not None and kv not in OWN_KV and "kv_scales" in t:
        t = t[t["kv_scales"] == kv_scales]
    if eviction != "none":
        t = t[[_budget_matches(b, kv_keep) for b in t["kv_budget"]]]
    # a released checkpoint scored against itself (gpt-oss's MXFP4) is the reference: rel 1 by definition
    return [evidence(r, baseline_as=weights) if _is_reference(r) else evidence(r) for _, r in t.iterrows()]


def guard_choice(results: list[PublishedQuality], task: str = "gsm8k") -> PublishedQuality | None:
    """The published score the quality guard decides on, or None when none can be used.

    Informational rows never qualify (they have no usable interval). Among the rest:
    1. the study's own task's benchmark first, since the guard then judges the knob on the task
       the study measures (GSM8K for the product's task), not on a neighbour;
    2. then the benchmark with the most items, since it has the narrowest interval for a
       proportion and so leaves the fewest boundary cases;
    3. then, between documents that tie, the lowest rel_lo. Where two sources disagree, the
       guard takes the more pessimistic one rather than pass a knob on the kinder document;
    4. then the source string, so that the choice is deterministic."""
    usable = [r for r in results if not r.informational and math.isfinite(r.rel_lo)]
    if not usable:
        return None
    family = published_benchmark(task)  # the task's benchmark in the published table (quality.tasks)
    return min(usable, key=lambda r: (r.benchmark != family, -r.n_items, r.rel_lo, r.source))


def summary_lines(table: pd.DataFrame) -> list[str]:
    """What a published-quality table holds: rows per source, the models and the methods."""
    if table.empty:
        return ["published quality: no rows"]
    info = sum(bool(_informational(r)) for _, r in table.iterrows())
    lines = [
        f"published quality: {len(table)} scores from {table['source'].nunique()} documents "
        f"({table['publisher'].nunique()} publishers); {info} informational (not used by the guard)",
        "models: " + ", ".join(f"{m} ({n})" for m, n in sorted(Counter(table["model"]).items())),
    ]
    for src, g in table.groupby("source", sort=False):
        methods = ", ".join(dict.fromkeys(g["method"]))
        lines.append(
            f"  {g['publisher'].iloc[0]}: {src} ({g['source_date'].iloc[0]}): {len(g)} rows; "
            f"{', '.join(sorted(set(g['model'])))}; {methods}"
        )
    lines.append("methods: " + ", ".join(f"{m} ({n})" for m, n in Counter(table["method"]).most_common()))
    return lines
