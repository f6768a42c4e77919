"""Scoring of saved records: the task registry, `rescore` and the per-run summary.

Everything here is a function of the records alone: re-scoring after a fix to an extractor
re-reads `output` and never calls an engine.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable, Sequence

from .gsm8k import score_gsm8k
from .humaneval import VARIANT as HUMANEVAL_VARIANT
from .humaneval import score_humaneval
from .records import QualityRecord
from .retrieval import score_retrieval
from .ruler import ruler_summary, score_ruler
from .stats import Score, score_bools

Scorer = Callable[[str, str, Sequence[str]], tuple[str, str, bool, bool]]

SCORERS: dict[tuple[str, str], Scorer] = {
    ("gsm8k", "lm-eval-5shot"): lambda out, tgt, stop: score_gsm8k(out, tgt, "lm-eval-5shot", stop),
    ("gsm8k", "chat-0shot"): lambda out, tgt, stop: score_gsm8k(out, tgt, "chat-0shot", stop),
    ("retrieval", "niah"): lambda out, tgt, stop: score_retrieval(out, tgt),
    # runs the answer in quality.sandbox: scoring is a subprocess, never the project's process
    ("humaneval", HUMANEVAL_VARIANT): score_humaneval,
    ("ifeval", "ifeval"): lambda out, tgt, stop: _score_ifeval(out, tgt),
    # RULER's string_match_all: strict when every reference occurs in the answer
    ("ruler", "ruler"): lambda out, tgt, stop: score_ruler(out, tgt),
}


def _score_ifeval(output: str, target: str) -> tuple[str, str, bool, bool]:
    from .ifeval import score_ifeval  # lazy: the IFEval data is read on first use

    return score_ifeval(output, target)


def task_extras(records: Sequence[QualityRecord]) -> dict:
    """Task-specific parts of a run's summary: HumanEval's sandbox outcomes, IFEval's
    instruction-level accuracies and its sentence-count prompts apart, RULER's pass rate and mean
    string_match_all per (subtask, length)."""
    task = records[0].task if records else None
    if task == "humaneval":
        counts: dict[str, int] = {}
        for r in records:
            kind = "error (request)" if r.error else r.extracted_flexible.split(":")[0]
            counts[kind] = counts.get(kind, 0) + 1
        return {"sandbox_outcomes": counts}
    if task == "ifeval":
        from .ifeval import ifeval_summary

        return ifeval_summary(records)
    if task == "ruler":
        return ruler_summary(records)
    return {}


def scorer_for(task: str, variant: str) -> Scorer:
    try:
        return SCORERS[(task, variant)]
    except KeyError:
        valid = ", ".join(f"{t}/{v}" for t, v in SCORERS)
        raise ValueError(f"quality task/variant: {task}/{variant} is not supported; supported: {valid}") from None


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
