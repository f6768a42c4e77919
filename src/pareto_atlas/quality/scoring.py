"""Scoring of saved records: each task's scorer (quality.tasks), `rescore` and the per-run summary.

Everything here is a function of the records alone: re-scoring after a fix to an extractor
re-reads `output` and never calls an engine.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable, Sequence

from .records import QualityRecord
from .stats import Score, score_bools
from .tasks import TASKS

Scorer = Callable[[str, str, Sequence[str]], tuple[str, str, bool, bool]]


def task_extras(records: Sequence[QualityRecord]) -> dict:
    """The task's own parts of a run's summary (quality.tasks: e.g. HumanEval's sandbox outcomes,
    IFEval's instruction-level accuracies, RULER's pass rate per subtask and length)."""
    t = TASKS.get(records[0].task) if records else None
    return t.summary_extras(records) if t is not None else {}


def scorer_for(name: str, variant: str) -> Scorer:
    """The scorer of a task's variant (quality.tasks), or a one-line ValueError listing the supported ones."""
    t = TASKS.get(name)
    if t is None or variant not in t.variants:
        valid = ", ".join(f"{n}/{v}" for n, u in TASKS.items() for v in u.variants)
        raise ValueError(f"quality task/variant: {name}/{variant} is not supported; supported: {valid}")
    return lambda output, target, stop: t.score(variant, output, target, stop)


def score_output(task: str, variant: str, output: str, target: str, stop: Sequence[str]) -> tuple[str, str, bool, bool]:
    return scorer_for(task, variant)(output, target, stop)


@dataclass(frozen=True)
class QualitySummary:
    """One arm's score on one task variant. `strict` is the headline (lm-eval strict-match)."""

    task: str
    variant: str
    n: int
    strict: Score
    flexible: Score
    n_errors: int  # failed requests; counted as wrong, never dropped
    n_truncated: int  # stopped by max_tokens (finish_reason "length")
    mean_latency_s: float
    wall_s: float | None = None  # whole run, when the runner measured it

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["strict"], d["flexible"] = self.strict.to_dict(), self.flexible.to_dict()
        return d


@dataclass(frozen=True)
class QualityRun:
    records: tuple[QualityRecord, ...]
    summary: QualitySummary


def summarize(records: Sequence[QualityRecord], wall_s: float | None = None) -> QualitySummary:
    if not records:
        raise ValueError("quality summary: no records")
    kinds = {(r.task, r.variant) for r in records}
    if len(kinds) != 1:
        raise ValueError(f"quality summary: records mix task/variants {sorted(kinds)}; summarize each separately")
    ((task, variant),) = kinds
    lat = [r.latency_s for r in records if r.error is None]
    return QualitySummary(
        task=task,
        variant=variant,
        n=len(records),
        strict=score_bools(r.correct_strict for r in records),
        flexible=score_bools(r.correct_flexible for r in records),
        n_errors=sum(r.error is not None for r in records),
        n_truncated=sum(r.finish_reason == "length" for r in records),
        mean_latency_s=(sum(lat) / len(lat)) if lat else math.nan,
        wall_s=wall_s,
    )


def rescore_record(r: QualityRecord) -> QualityRecord:
    if r.error is not None:
        return r
    strict, flexible, ok_s, ok_f = score_output(r.task, r.variant, r.output, r.target, r.stop)
    return dataclasses.replace(
        r, extracted_strict=strict, extracted_flexible=flexible, correct_strict=ok_s, correct_flexible=ok_f
    )


def rescore(records: Sequence[QualityRecord]) -> QualityRun:
    """Re-extract and re-score saved records (one task/variant). Never generates."""
    out = tuple(rescore_record(r) for r in records)
    return QualityRun(out, summarize(out))
