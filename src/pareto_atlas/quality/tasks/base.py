"""What a quality task declares: the one type every task module (`quality.tasks.<name>`) fills in.

Everything the product does differently per task is a field or a method here, so that the campaign,
the scorer, the stages and the report ask the task instead of branching on its name. A method's
default is what most tasks do; a task overrides only where it differs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from pareto_atlas.spec.study.tasks import TaskTable, task_names

if TYPE_CHECKING:
    from pareto_atlas.quality.records import QualityItem, QualityRecord
    from pareto_atlas.spec.study import EvictionSpec, QualitySpec, Study

# (extracted strict, extracted flexible, correct strict, correct flexible) of one answer
Scored = tuple[str, str, bool, bool]


@dataclass(frozen=True)
class Task:
    """One quality task. `table`: what the study file says about it (spec.study.tasks: its [quality]
    fields, whether the eviction sweep can ask it, its longest request)."""

    table: TaskTable
    variants: tuple[str, ...]  # the scoring variants its records are stored under (QualityRecord.variant)
    metric: str  # what a run's headline (strict) score counts, with its unit
    published_benchmark: str  # the `benchmark` of spec/published_quality.csv its guard prefers (its family)
    size: int | None = None  # the items the task has (`n = all`); None: items are built per cell
    per_cell: str | None = None  # what a cell is where `n` counts items per cell ("length and depth")
    max_tokens: int | None = None  # its own max_tokens, unless the study sets max_tokens itself
    sized_by_tokenizer: bool = False  # its items are built with the serving model's tokenizer, once it serves
    sandbox: bool = False  # scoring runs the model's answer as code in quality.sandbox
    length_field: str | None = None  # the [quality] field of its context lengths (the eviction sweep's `lengths`)

    @property
    def name(self) -> str:
        return self.table.name

    # --- items -------------------------------------------------------------------------------------
    def variant(self, q: QualitySpec) -> str:
        """The scoring variant a run's rows are stored under."""
        return self.variants[0]

    def max_tokens_of(self, q: QualitySpec) -> int:
        """Tokens generated per item: the task's own unless the study sets max_tokens."""
        if self.max_tokens is not None and "max_tokens" not in q.model_fields_set:
            return self.max_tokens
        return q.max_tokens

    def run_ident(self, q: QualitySpec) -> dict[str, Any]:
        """What a quality run's id adds to the common fields (the [quality] fields its items depend on)."""
        return {}

    def items(
        self, q: QualitySpec, n: int | None = None, count_tokens: Callable[[str], int] | None = None
    ) -> list[QualityItem]:
        """The study's items of this task: `n` (default: q's) seeded items, or items per cell."""
        raise NotImplementedError(f"quality task {self.name}: items")

    def prepare(self, study: Study, n: int | None) -> Study:
        """The study the quality stage runs with `--n` (default: as it is); a one-line ValueError
        naming the field where it cannot run."""
        return study

    # --- scoring and summary -----------------------------------------------------------------------
    def score(self, variant: str, output: str, target: str, stop: Sequence[str]) -> Scored:
        """One answer scored; a function of the saved record alone (re-scoring never generates)."""
        raise NotImplementedError(f"quality task {self.name}: score")

    def summary_extras(self, records: Sequence[QualityRecord]) -> dict[str, Any]:
        """The task's own parts of a run's summary, beside the strict and flexible scores."""
        return {}

    def summary_lines(self, study: Study, summary: dict[str, Any]) -> list[str]:
        """The lines printed under an arm's score, from its saved summary."""
        return []

    # --- what it is called -------------------------------------------------------------------------
    def describe(self, q: QualitySpec, n: int | None) -> str:
        """The quality stage's line: what is scored per arm."""
        return f"{self.name}, n = {n or q.n} per arm"

    def headline(self, q: QualitySpec) -> str:
        """The report's line: what the study's quality task is."""
        return f"{self.name}, n = {q.n}"

    # --- the eviction sweep (tasks whose table says evictable) -------------------------------------
    def eviction_ident(self, q: QualitySpec, spec: EvictionSpec) -> dict[str, Any]:
        """Everything that defines the sweep's item set of this task."""
        allowed = ", ".join(task_names(evictable=True))
        raise ValueError(f"eviction.task: {self.name!r} cannot be swept for eviction; allowed: {allowed}")

    def eviction_what(self, items: dict[str, Any]) -> str:
        """The sweep's line: what its items are (from `eviction_ident`)."""
        return f"{self.name}, n = {items['n']}"
