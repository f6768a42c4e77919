"""IFEval: 541 prompts with verifiable instructions, prompt- and instruction-level accuracy, strict and
loose (quality.ifeval)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from pareto_atlas.quality.ifeval import MAX_TOKENS, N_PROMPTS, VARIANT, ifeval_items, ifeval_summary, score_ifeval
from pareto_atlas.quality.tasks.base import Scored, Task
from pareto_atlas.spec.study.tasks import TABLES

if TYPE_CHECKING:
    from pareto_atlas.quality.records import QualityItem, QualityRecord
    from pareto_atlas.spec.study import QualitySpec, Study


@dataclass(frozen=True)
class IfEval(Task):
    def items(
        self, q: QualitySpec, n: int | None = None, count_tokens: Callable[[str], int] | None = None
    ) -> list[QualityItem]:
        return ifeval_items(n or q.n, seed=q.seed, max_tokens=self.max_tokens_of(q))

    def score(self, variant: str, output: str, target: str, stop: Sequence[str]) -> Scored:
        return score_ifeval(output, target)

    def summary_extras(self, records: Sequence[QualityRecord]) -> dict[str, Any]:
        """Instruction-level accuracies, and the sentence-count prompts apart."""
        return ifeval_summary(records)

    def summary_lines(self, study: Study, summary: dict[str, Any]) -> list[str]:
        out = []
        for key in ("prompt_strict", "prompt_loose", "instruction_strict", "instruction_loose"):
            sc = summary.get(key)
            if sc:
                out.append(
                    f"{key.replace('_', '-level ', 1)}: {sc['k']}/{sc['n']} = {sc['p']:.3f} "
                    f"[95% {sc['lo']:.2f}–{sc['hi']:.2f}]"
                )
        apart = summary.get("sentence_count")
        if apart:
            out.append(
                f"sentence-count prompts (counted by our own splitter, not NLTK punkt): {apart['n_prompts']} "
                f"prompts, strict {apart['prompt_strict']['k']}/{apart['n_prompts']}; "
                f"without them: prompt-level strict {apart['without']['prompt_strict']['p']:.3f}"
            )
        return out

    def describe(self, q: QualitySpec, n: int | None) -> str:
        return f"IFEval (strict and loose), max_tokens {self.max_tokens_of(q)}, n = {n or q.n} per arm"

    def headline(self, q: QualitySpec) -> str:
        return f"IFEval (strict and loose), n = {q.n}"


TASK = IfEval(
    table=TABLES["ifeval"],
    variants=(VARIANT,),
    metric="prompt-level accuracy (every instruction followed, strict)",
    published_benchmark="ifeval",
    size=N_PROMPTS,
    max_tokens=MAX_TOKENS,
)
