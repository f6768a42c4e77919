"""GSM8K: grade-school math word problems, exact match on the final number (quality.gsm8k: lm-eval's
5-shot prompt and extraction, and a zero-shot chat variant). The study's headline task."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from pareto_atlas.quality.gsm8k import N_TEST, VARIANTS, gsm8k_items, score_gsm8k
from pareto_atlas.quality.tasks.base import Scored, Task
from pareto_atlas.spec.study.tasks import TABLES

if TYPE_CHECKING:
    from pareto_atlas.quality.records import QualityItem
    from pareto_atlas.spec.study import EvictionSpec, QualitySpec


@dataclass(frozen=True)
class Gsm8k(Task):
    def variant(self, q: QualitySpec) -> str:
        return q.mode  # [quality] mode: chat-0shot or lm-eval-5shot

    def items(
        self, q: QualitySpec, n: int | None = None, count_tokens: Callable[[str], int] | None = None
    ) -> list[QualityItem]:
        return gsm8k_items(n or q.n, q.mode, sample_seed=q.seed, max_tokens=q.max_tokens)

    def score(self, variant: str, output: str, target: str, stop: Sequence[str]) -> Scored:
        return score_gsm8k(output, target, variant, stop)

    def describe(self, q: QualitySpec, n: int | None) -> str:
        return f"{self.name} ({q.mode}), n = {n or q.n} per arm"

    def headline(self, q: QualitySpec) -> str:
        return f"GSM8K ({q.mode}), n = {q.n}"

    def eviction_ident(self, q: QualitySpec, spec: EvictionSpec) -> dict[str, Any]:
        return {"task": self.name, "mode": q.mode, "n": spec.n or q.n, "seed": q.seed, "max_tokens": q.max_tokens}

    def eviction_what(self, items: dict[str, Any]) -> str:
        return f"GSM8K ({items['mode']}), n = {items['n']}"


TASK = Gsm8k(
    table=TABLES["gsm8k"],
    variants=VARIANTS,
    metric="exact-match accuracy on the final number (strict-match)",
    published_benchmark="gsm8k",
    size=N_TEST,
)
