"""HumanEval: 164 Python problems, pass@1 of a greedy answer to EvalPlus's chat prompt; each answer runs
against the problem's tests in quality.sandbox, never in the project's process (quality.humaneval)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from pareto_atlas.quality.humaneval import MAX_TOKENS, N_PROBLEMS, PUBLISHED_PASS_AT_1, VARIANT
from pareto_atlas.quality.humaneval import humaneval_items, score_humaneval
from pareto_atlas.quality.tasks.base import Scored, Task
from pareto_atlas.spec.study.tasks import TABLES

if TYPE_CHECKING:
    from pareto_atlas.quality.records import QualityItem, QualityRecord
    from pareto_atlas.spec.study import QualitySpec, Study


@dataclass(frozen=True)
class HumanEval(Task):
    def items(
        self, q: QualitySpec, n: int | None = None, count_tokens: Callable[[str], int] | None = None
    ) -> list[QualityItem]:
        return humaneval_items(n or q.n, seed=q.seed, max_tokens=self.max_tokens_of(q))

    def score(self, variant: str, output: str, target: str, stop: Sequence[str]) -> Scored:
        return score_humaneval(output, target, stop)

    def summary_extras(self, records: Sequence[QualityRecord]) -> dict[str, Any]:
        """The sandbox's outcomes (passed, failed, timeout, ...), a failed request apart."""
        counts: dict[str, int] = {}
        for r in records:
            kind = "error (request)" if r.error else r.extracted_flexible.split(":")[0]
            counts[kind] = counts.get(kind, 0) + 1
        return {"sandbox_outcomes": counts}

    def summary_lines(self, study: Study, summary: dict[str, Any]) -> list[str]:
        outcomes = sorted(summary.get("sandbox_outcomes", {}).items())
        out = ["sandbox outcomes: " + ", ".join(f"{k} {v}" for k, v in outcomes)]
        ref = PUBLISHED_PASS_AT_1.get(study.model.name)
        if ref is not None:
            out.append(
                f"reference (not an input): the maker reports HumanEval pass@1 {ref} % for {study.model.name} "
                "(Qwen2.5-Coder technical report, EvalPlus harness, unquantized weights)"
            )
        return out

    def describe(self, q: QualitySpec, n: int | None) -> str:
        return (
            f"HumanEval pass@1 (EvalPlus-style chat prompt, greedy, max_tokens {self.max_tokens_of(q)}, "
            f"answers run in the sandbox), n = {n or q.n} per arm"
        )

    def headline(self, q: QualitySpec) -> str:
        return f"HumanEval pass@1, n = {q.n}"


TASK = HumanEval(
    table=TABLES["humaneval"],
    variants=(VARIANT,),
    metric="pass@1 (the problem's tests pass in the sandbox)",
    published_benchmark="humaneval",
    size=N_PROBLEMS,
    max_tokens=MAX_TOKENS,
    sandbox=True,
)
