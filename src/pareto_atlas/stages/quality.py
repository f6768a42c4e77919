"""The quality stage: score the study's quality arms on its tasks, print each arm's score and its agreement
with the baseline."""

from __future__ import annotations

from pareto_atlas.spec.study import QualitySpec, QualityTask
from pareto_atlas.stages.context import Context, consented, needs_arms
from pareto_atlas.stages.progress import print_agreement, quality_progress
from pareto_atlas.store import StoreError

QUALITY_TASKS = QualityTask.__args__


def parse_n(value: int | str | None, task: str) -> int | None:
    """--n: a positive count, or 'all' (the task's every item); None: the study's n."""
    from pareto_atlas.quality.campaign import TASK_SIZES

    if value is None or isinstance(value, int):
        n = value
    elif value.strip().lower() == "all":
        if task not in TASK_SIZES:
            raise ValueError(
                f"--n: 'all' is not defined for {task}; give a count (items per cell: "
                f"{'subtask and length' if task == 'ruler' else 'length and depth'})"
            )
        n = TASK_SIZES[task]
    else:
        try:
            n = int(value)
        except ValueError:
            raise ValueError(f"--n: {value!r} is not allowed; a positive whole number or 'all'") from None
    if n is not None and n < 1:
        raise ValueError(f"--n: {n} is not allowed; a positive whole number or 'all'")
    top = TASK_SIZES.get(task, 1000)  # retrieval, ruler: items per cell
    if n is not None and n > top:
        raise ValueError(
            f"--n: {n} is not allowed; 1..{top} ({task} has {top} items{'' if task in TASK_SIZES else ' a cell at most'}) or 'all'"
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
    from pareto_atlas.quality.campaign import max_tokens_for, run_quality_campaign, with_task

    c = ctx.console
    try:
        study = with_task(ctx.study, task, max_tokens)
    except ValueError as e:  # pydantic's error: say which field and what is allowed, in one line
        if max_tokens is not None and max_tokens < 16:
            raise ValueError(f"--max-tokens: {max_tokens} is not allowed; at least 16") from e
        raise ValueError(f"--task: {task!r} is not allowed; one of {', '.join(QUALITY_TASKS)}") from e
    q = study.quality
    n = parse_n(n, q.task)
    if q.task == "ruler":
        if n:  # --n is items per cell: part of what the run scores (its id)
            q = QualitySpec.model_validate(q.model_dump(exclude_unset=True) | {"ruler_per_cell": n})
            study = study.model_copy(update={"quality": q})
        if max(q.ruler_lengths) > study.engine.n_ctx:
            raise ValueError(
                f"quality.ruler_lengths: {max(q.ruler_lengths)} tokens is not allowed: within "
                f"engine.n_ctx = {study.engine.n_ctx}"
            )
    what = {
        "gsm8k": f"{q.task} ({q.mode}), n = {n or q.n} per arm",
        "humaneval": f"HumanEval pass@1 (EvalPlus-style chat prompt, greedy, max_tokens {max_tokens_for(q)}, "
        f"answers run in the sandbox), n = {n or q.n} per arm",
        "ifeval": f"IFEval (strict and loose), max_tokens {max_tokens_for(q)}, n = {n or q.n} per arm",
        "ruler": f"RULER {', '.join(q.ruler_subtasks)} at {q.ruler_lengths} tokens (whole requests), "
        f"{q.ruler_per_cell} per subtask and length",
    }.get(q.task, f"needle retrieval at {q.retrieval_lengths} tokens, {n or q.retrieval_per_cell} per length and depth")
    c.print(f"[bold]quality[/] {what}")

    on = quality_progress(c, study)

    try:
        run_quality_campaign(
            study, ctx.store, arms=arms, n=n, on_progress=on, executor=ctx.executor, consent=ctx.consent
        )
    except StoreError:
        c.print()  # the arm's progress dots end their line; the error gets its own
        raise
    print_agreement(c, study, ctx.store, q.task)
