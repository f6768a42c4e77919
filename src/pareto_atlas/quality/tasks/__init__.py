"""The quality-task registry: one module per task, each declaring everything about it (quality.tasks.base.Task:
its spec table, items, scorer, summary, names and metadata); the campaign, the scorer, the stages and the
report ask `task(name)` instead of branching on a task's name.

Adding a task is one module here (plus its data): a `Task` subclass and its `TASK`, listed in `TASKS`
below, with its spec table in spec.study.tasks (where a study is validated, below this package); or,
for a task that ships outside the package, `register(TASK)` with a table of its own.
"""

from __future__ import annotations

from pareto_atlas.quality.tasks import gsm8k, humaneval, ifeval, retrieval, ruler
from pareto_atlas.quality.tasks.base import Scored, Task
from pareto_atlas.spec.study.tasks import TABLES

# In the order the study file's errors list them (spec.study.tasks.TABLES).
TASKS: dict[str, Task] = {t.name: t for t in (gsm8k.TASK, retrieval.TASK, humaneval.TASK, ifeval.TASK, ruler.TASK)}


def task(name: str) -> Task:
    """The registered task of that name, or a one-line ValueError listing them."""
    try:
        return TASKS[name]
    except KeyError:
        raise ValueError(f"quality task: {name!r} is not registered; registered: {', '.join(TASKS)}") from None


def names() -> list[str]:
    return list(TASKS)


def register(t: Task) -> Task:
    """Add a task (and its spec table, so that a study may name it); a name already taken is an error."""
    if t.name in TASKS or t.name in TABLES:
        raise ValueError(f"quality task: {t.name!r} is already registered")
    TABLES[t.name] = t.table
    TASKS[t.name] = t
    return t


def published_benchmark(name: str) -> str:
    """The published table's benchmark (task family) a task's guard prefers; a name no task has
    stands for itself (a benchmark named directly)."""
    return TASKS[name].published_benchmark if name in TASKS else name


__all__ = ["TASKS", "Scored", "Task", "names", "published_benchmark", "register", "task"]
