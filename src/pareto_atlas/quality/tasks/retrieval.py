"""Needle retrieval: a secret code hidden at a depth of a haystack of each length, asked back
(quality.retrieval). What KV compression and eviction damage first; `n` counts items per length and depth."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from pareto_atlas.quality.retrieval import VARIANT, retrieval_items, score_retrieval
from pareto_atlas.quality.tasks.base import Scored, Task
from pareto_atlas.spec.study.tasks import TABLES

if TYPE_CHECKING:
    from pareto_atlas.quality.records import QualityItem
    from pareto_atlas.spec.study import EvictionSpec, QualitySpec


@dataclass(frozen=True)
class Retrieval(Task):
    def run_ident(self, q: QualitySpec) -> dict[str, Any]:
        return {"mode": VARIANT, "n": None, "lengths": q.retrieval_lengths, "per_cell": q.retrieval_per_cell}

    def items(
        self, q: QualitySpec, n: int | None = None, count_tokens: Callable[[str], int] | None = None
    ) -> list[QualityItem]:
        return retrieval_items(
            q.retrieval_lengths, per_cell=n or q.retrieval_per_cell, seed=q.seed, count_tokens=count_tokens
        )

    def score(self, variant: str, output: str, target: str, stop: Sequence[str]) -> Scored:
        return score_retrieval(output, target)

    def describe(self, q: QualitySpec, n: int | None) -> str:
        return f"needle retrieval at {q.retrieval_lengths} tokens, {n or q.retrieval_per_cell} per length and depth"

    def headline(self, q: QualitySpec) -> str:
        return f"needle retrieval at {q.retrieval_lengths} tokens"

    def eviction_ident(self, q: QualitySpec, spec: EvictionSpec) -> dict[str, Any]:
        lengths = list(spec.lengths or q.retrieval_lengths)
        return {
            "task": self.name,
            "mode": VARIANT,
            "n": spec.n or q.retrieval_per_cell,
            "seed": q.seed,
            "lengths": lengths,
        }

    def eviction_what(self, items: dict[str, Any]) -> str:
        return f"needle retrieval at {items['lengths']} tokens, {items['n']} per length and depth"


TASK = Retrieval(
    table=TABLES["retrieval"],
    variants=(VARIANT,),
    metric="the code returned exactly (strict)",
    published_benchmark="retrieval",
    per_cell="length and depth",
    sized_by_tokenizer=True,
    length_field="retrieval_lengths",
)
