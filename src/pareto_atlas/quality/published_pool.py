"""The interval the quality guard holds against its floor where several documents score one
(model, method, task family): the envelope of the sources' 95 % intervals.

One method scored by different harnesses, prompts and engines (5-shot strict-match against 8-shot
chain-of-thought GSM8K, another lm-eval version, another engine) differs by more than either
score's binomial interval: a single source's interval is not the uncertainty of "this method on
this task". Two ways to include the spread were weighed:

* random effects (DerSimonian-Laird on log rel) estimates a between-source variance tau^2, but with
  two or three sources its tau^2 is itself unknown to within orders of magnitude, and the pooled
  interval can come out narrower than the worst source's own;
* the envelope (the lowest lower bound and the highest upper bound of the sources' intervals)
  holds every source's reading and is never narrower than any of them.

The guard takes the envelope. Its centre is the most pessimistic source's rel (as the guard took
before there was a between-source term), so no knob passes on the kinder document's point estimate.
A task family is the benchmark name: its shot counts and metrics vary across documents, and that
variation is the spread this term is for.
"""

from __future__ import annotations

import math
from dataclasses import replace

from .published import PublishedQuality, guard_choice


def per_source(results: list[PublishedQuality], benchmark: str) -> list[PublishedQuality]:
    """Each document's usable score on `benchmark`: the one guard_choice would take from it alone."""
    usable = [r for r in results if not r.informational and math.isfinite(r.rel_lo) and r.benchmark == benchmark]
    by_source: dict[str, PublishedQuality] = {}
    for r in sorted(usable, key=lambda r: (-r.n_items, r.rel_lo, r.source)):
        by_source.setdefault(r.source, r)
    return list(by_source.values())


def _lo(values: list[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return min(finite) if finite else math.nan


def _hi(values: list[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return max(finite) if finite else math.nan


def guard_interval(results: list[PublishedQuality], task: str = "gsm8k") -> PublishedQuality | None:
    """The score the guard decides on: guard_choice's benchmark, and where two or more documents
    score it, the envelope of their intervals (see the module), named in `method` and `provenance`."""
    best = guard_choice(results, task)
    if best is None:
        return None
    sources = per_source(results, best.benchmark)
    if len(sources) < 2:
        return best
    worst = min(sources, key=lambda r: (r.rel, r.source))
    names = "; ".join(r.source for r in sources)
    spread = ", ".join(f"{r.publisher} {r.rel:.3f} [{r.rel_lo:.3f}, {r.rel_hi:.3f}]" for r in sources)
    return replace(
        worst,
        rel_lo=min(r.rel_lo for r in sources),
        rel_hi=max(r.rel_hi for r in sources),
        q_lo=_lo([r.q_lo for r in sources]),
        q_hi=_hi([r.q_hi for r in sources]),
        n_items=min(r.n_items for r in sources),
        source=names,
        method=(
            f"between-source envelope of {len(sources)} documents' 95 % intervals on {best.benchmark} "
            f"(centre: the most pessimistic source's rel): {spread}"
        ),
        provenance=f"published:envelope of {len(sources)} sources {best.benchmark} ({names})",
    )
