"""The quality tasks a study may name, as the study file sees them: each task's spec table.

A task's spec table is pure data: its name, the [quality] fields only it reads, whether the KV-eviction
sweep can ask it, and the longest request it makes (checked against engine.n_ctx). It sits in `spec`, below
the quality package, so that a study validates without importing how tasks load and score; the task's own
module (`quality.tasks.<name>`) names this table beside its items, scorer and summary, and
`quality.tasks.register` adds the table of a task that ships outside this list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Callable

from pydantic import AfterValidator

from pareto_atlas.spec import bounds as B

if TYPE_CHECKING:
    from pareto_atlas.spec.study.quality import QualitySpec


def _answer_only(q: QualitySpec) -> tuple[int, str]:
    return q.max_tokens, "max_tokens"


@dataclass(frozen=True)
class TaskTable:
    """What the study file says about one quality task."""

    name: str
    fields: tuple[str, ...] = ()  # the [quality] fields only this task reads (the others are every task's)
    evictable: bool = False  # the eviction sweep ([eviction] task) can ask its items in transformers
    # The longest request the task makes and what the study file calls it, held within engine.n_ctx.
    longest_request: Callable[[QualitySpec], tuple[int, str]] = _answer_only


# The shipped tasks, in the order errors list them. Their TOML fields are QualitySpec's (spec.study.quality).
TABLES: dict[str, TaskTable] = {
    t.name: t
    for t in (
        TaskTable("gsm8k", ("mode",), evictable=True),
        TaskTable(
            "retrieval",
            ("retrieval_lengths", "retrieval_per_cell"),
            evictable=True,
            longest_request=lambda q: (
                q.max_tokens + max(q.retrieval_lengths),
                "max_tokens + the longest retrieval_lengths",
            ),
        ),
        TaskTable("humaneval"),
        TaskTable("ifeval"),
        TaskTable(
            "ruler",
            ("ruler_lengths", "ruler_per_cell", "ruler_subtasks"),
            evictable=True,
            longest_request=lambda q: (max(q.ruler_lengths), "the longest ruler_lengths (prompt and answer within it)"),
        ),
    )
}


def task_names(evictable: bool = False) -> list[str]:
    return [n for n, t in TABLES.items() if t.evictable or not evictable]


def _either(names: list[str]) -> str:
    """'a', 'b' or 'c': as pydantic words a choice (the study's errors read as they did for a Literal)."""
    quoted = [repr(n) for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def _check(name: str, evictable: bool) -> str:
    allowed = task_names(evictable)
    if name not in allowed:
        raise ValueError(f"{B.show(name)} is not allowed: Input should be {_either(allowed)}")
    return name


def check_task(name: str) -> str:
    """A quality task's name, or a one-line ValueError listing the tasks (pydantic names the field)."""
    return _check(name, evictable=False)


def check_evictable(name: str) -> str:
    """A task the eviction sweep can ask, or a one-line ValueError listing them."""
    return _check(name, evictable=True)


# A field naming a quality task (checked against TABLES when the study is read, so a registered task counts).
QualityTask = Annotated[str, AfterValidator(check_task)]
EvictableTask = Annotated[str, AfterValidator(check_evictable)]
