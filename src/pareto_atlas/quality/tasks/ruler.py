"""RULER: its synthetic long-context subtasks (needles, variable tracking, common words) at whole-request
lengths, string_match_all (quality.ruler); `n` counts items per subtask and length."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from pareto_atlas.quality.ruler import VARIANT, ruler_items, ruler_summary, score_ruler
from pareto_atlas.quality.tasks.base import Scored, Task
from pareto_atlas.spec.study import QualitySpec
from pareto_atlas.spec.study.tasks import TABLES

if TYPE_CHECKING:
    from pareto_atlas.quality.records import QualityItem, QualityRecord
    from pareto_atlas.spec.study import EvictionSpec, Study


def _own_max_tokens(q: QualitySpec) -> int | None:
    """None: each subtask's own max_tokens (RULER's), unless the study sets max_tokens."""
    return q.max_tokens if "max_tokens" in q.model_fields_set else None


@dataclass(frozen=True)
class Ruler(Task):
    def run_ident(self, q: QualitySpec) -> dict[str, Any]:
        return {"n": None, "lengths": q.ruler_lengths, "per_cell": q.ruler_per_cell, "subtasks": q.ruler_subtasks}

    def items(
        self, q: QualitySpec, n: int | None = None, count_tokens: Callable[[str], int] | None = None
    ) -> list[QualityItem]:
        return ruler_items(
            q.ruler_lengths,
            q.ruler_subtasks,
            per_cell=n or q.ruler_per_cell,
            seed=q.seed,
            count_tokens=count_tokens,
            max_tokens=_own_max_tokens(q),
        )

    def prepare(self, study: Study, n: int | None) -> Study:
        """--n is items per cell: part of what the run scores (its id); every length must fit n_ctx."""
        q = study.quality
        if n:
            q = QualitySpec.model_validate(q.model_dump(exclude_unset=True) | {"ruler_per_cell": n})
            study = study.model_copy(update={"quality": q})
        if max(q.ruler_lengths) > study.engine.n_ctx:
            raise ValueError(
                f"quality.ruler_lengths: {max(q.ruler_lengths)} tokens is not allowed: within "
                f"engine.n_ctx = {study.engine.n_ctx}"
            )
        return study

    def score(self, variant: str, output: str, target: str, stop: Sequence[str]) -> Scored:
        return score_ruler(output, target)  # RULER's string_match_all: strict when every reference occurs

    def summary_extras(self, records: Sequence[QualityRecord]) -> dict[str, Any]:
        """The pass rate and mean string_match_all per (subtask, length)."""
        return ruler_summary(records)

    def summary_lines(self, study: Study, summary: dict[str, Any]) -> list[str]:
        out = []
        for c in summary.get("ruler_cells", []):
            st = c["strict"]
            out.append(
                f"{c['subtask']} at {c['context_tokens']}: {st['k']}/{st['n']} = {st['p']:.3f} "
                f"[95% {st['lo']:.2f}–{st['hi']:.2f}], string_match_all {c['string_match_all']:.3f}"
            )
        return out

    def describe(self, q: QualitySpec, n: int | None) -> str:
        return (
            f"RULER {', '.join(q.ruler_subtasks)} at {q.ruler_lengths} tokens (whole requests), "
            f"{q.ruler_per_cell} per subtask and length"
        )

    def headline(self, q: QualitySpec) -> str:
        return f"RULER {', '.join(q.ruler_subtasks)} at {q.ruler_lengths} tokens"

    def eviction_ident(self, q: QualitySpec, spec: EvictionSpec) -> dict[str, Any]:
        return {
            "task": self.name,
            "mode": VARIANT,
            "n": spec.n or q.ruler_per_cell,
            "seed": q.seed,
            "lengths": list(spec.lengths or q.ruler_lengths),
            "subtasks": list(q.ruler_subtasks),
            "max_tokens": _own_max_tokens(q),
        }

    def eviction_what(self, items: dict[str, Any]) -> str:
        subtasks = ", ".join(items.get("subtasks", ()))
        return f"RULER {subtasks} at {items['lengths']} tokens, {items['n']} per subtask and length"


TASK = Ruler(
    table=TABLES["ruler"],
    variants=(VARIANT,),
    metric="every reference in the answer (RULER's string_match_all = 1)",
    published_benchmark="ruler",
    per_cell="subtask and length",
    sized_by_tokenizer=True,
    length_field="ruler_lengths",
)
