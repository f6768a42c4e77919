"""Quality arm: GSM8K (lm-eval definitions and a zero-shot chat variant), needle retrieval,
RULER's synthetic long-context tasks, agreement with a reference arm, and the guard the atlas applies. Eviction policies live in
`quality.eviction` (optional extra: torch + transformers)."""

from __future__ import annotations

from .agreement import AgreementSummary, ItemAgreement, agreement
from .gsm8k import gsm8k_items, load_split
from .guards import GuardResult, guard, guard_paired
from .records import QualityItem, QualityRecord
from .retrieval import retrieval_items
from .ruler import ruler_items
from .runner import arun_items, run_gsm8k, run_items, run_retrieval, run_ruler
from .scoring import QualityRun, QualitySummary, rescore, summarize
from .stats import Score, score, wilson_interval

__all__ = [
    "AgreementSummary",
    "GuardResult",
    "ItemAgreement",
    "QualityItem",
    "QualityRecord",
    "QualityRun",
    "QualitySummary",
    "Score",
    "agreement",
    "arun_items",
    "gsm8k_items",
    "guard",
    "guard_paired",
    "load_split",
    "rescore",
    "retrieval_items",
    "ruler_items",
    "run_gsm8k",
    "run_items",
    "run_retrieval",
    "run_ruler",
    "score",
    "summarize",
    "wilson_interval",
]
