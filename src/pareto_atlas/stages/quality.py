"""The quality stage: score the study's quality arms on its tasks, print each arm's score and its agreement
with the baseline."""

from __future__ import annotations

from pareto_atlas.spec.study.tasks import TABLES
from pareto_atlas.stages.context import Context, consented, needs_arms
from pareto_atlas.stages.progress import print_agreement, quality_progress
from pareto_atlas.store import StoreError

QUALITY_TASKS = tuple(TABLES)  # the shipped tasks' spec tables, one module each in quality.tasks


def parse_n(value: int | str | None, task: str) -> int | None:
    """--n: a positive count, or 'all' (the task's every item); None: the study's n."""
    from pareto_atlas.quality.tasks import task as task_of  # lazy: the CLI starts without the quality package

    size = task_of(task).size  # None: items per cell, at most 1000
    if value is None or isinstance(value, int):
        n = value
    elif value.strip().lower() == "all":
        if size is None:
            raise ValueError(
                f"--n: 'all' is not defined for {task}; give a count (items per cell: {task_of(task).per_cell})"
            )
        n = size
    else:
        try:
            n = int(value)
        except ValueError:
            raise ValueError(f"--n: {value!r} is not allowed; a positive whole number or 'all'") from None
    if n is not None and n < 1:
        raise ValueError(f"--n: {n} is not allowed; a positive whole number or 'all'")
    top = size or 1000
    if n is not None and n > top:
        raise ValueError(
            f"--n: {n} is not allowed; 1..{top} ({task} has {top} items{'' if size else ' a cell at most'}) or 'all'"
        )
    return n


def quality(
    ctx: Context,
    arms: list[str] | None = None,
    n: int | str | None = None,
    task: str | None = None,
    max_tokens: int | None = None,
) -> None:
    """Score the study's quality arms: on `task` when given, else on the study's task and then on
    each of its further [quality] tasks (each guards its own workloads), with that task's n."""
    needs_arms(ctx, "quality")
    consented(ctx)
    if task is not None:
        return _quality_task(ctx, arms, n, task, max_tokens)
    q = ctx.study.quality
    for t in q.all_tasks():
        _quality_task(ctx, arms, n if t == q.task else (n if n is not None else q.tasks[t]), t, max_tokens)


def _quality_task(ctx: Context, arms: list[str] | None, n: int | str | None, task: str, max_tokens: int | None) -> None:
    from pareto_atlas.quality.campaign import run_quality_campaign, with_task
    from pareto_atlas.quality.tasks import TASKS, task as task_of

    c = ctx.console
    try:
        study = with_task(ctx.study, task, max_tokens)
    except ValueError as e:  # pydantic's error: say which field and what is allowed, in one line
        if max_tokens is not None and max_tokens < 16:
            raise ValueError(f"--max-tokens: {max_tokens} is not allowed; at least 16") from e
        raise ValueError(f"--task: {task!r} is not allowed; one of {', '.join(TASKS)}") from e
    t = task_of(study.quality.task)
    n = parse_n(n, t.name)
    study = t.prepare(study, n)  # e.g. RULER: --n is items per cell, and every length within n_ctx
    c.print(f"[bold]quality[/] {t.describe(study.quality, n)}")

    on = quality_progress(c, study)

    try:
        run_quality_campaign(
            study, ctx.store, arms=arms, n=n, on_progress=on, executor=ctx.executor, consent=ctx.consent
        )
    except StoreError:
        c.print()  # the arm's progress dots end their line; the error gets its own
        raise
    print_agreement(c, study, ctx.store, t.name)
