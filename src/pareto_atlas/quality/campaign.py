"""Quality campaigns: each quality arm of a study scored through the same engine and knobs as
its speed anchors, saved item by item so that re-scoring never re-generates.

Arms that differ only in speed knobs (slots, speculation) share one quality run; the atlas
marks their quality as inherited, never as measured.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Callable, Iterable, Iterator

from pareto_atlas.measure.campaign import launch_for, served_model
from pareto_atlas.measure.consent import Consent, authorize
from pareto_atlas.quality.tasks import task as task_of
from pareto_atlas.scale.local import Executor  # where jobs run: knows no campaign, so it sits below them
from pareto_atlas.spec.study import ArmSpec, QualitySpec, Study
from pareto_atlas.store import Store
from pareto_atlas.store.db import dumps, now


QUALITY_SLOTS = 4  # quality runs use 4 slots to finish sooner; greedy tokens do not depend on it


def qrun_id(study: Study, arm: ArmSpec, n: int) -> str:
    q = study.quality
    ident = {
        "study": study.name,
        "quality_key": arm.knobs().quality_key(),
        "model": study.model.name,
        "task": q.task,
        "mode": task_mode(q),
        "n": n,
        "seed": q.seed,
        "max_tokens": max_tokens_for(q),
        "engine": study.engine.name,
    }
    ident |= task_of(q.task).run_ident(q)  # the task's own fields its items depend on
    return hashlib.sha256(dumps(ident).encode()).hexdigest()[:20]


def task_mode(q: QualitySpec) -> str:
    """The scoring variant a run's rows are stored under."""
    return task_of(q.task).variant(q)


def max_tokens_for(q: QualitySpec, task: str | None = None) -> int:
    """Tokens generated per item of `task` (default q.task): its own unless the study sets max_tokens."""
    return task_of(task or q.task).max_tokens_of(q)


def with_task(study: Study, task: str | None, max_tokens: int | None = None) -> Study:
    """The study with its quality task (and max_tokens) replaced, as the CLI's --task and
    --max-tokens say; checked like the TOML fields."""
    change = {k: v for k, v in (("task", task), ("max_tokens", max_tokens)) if v is not None}
    if not change:
        return study
    quality = QualitySpec.model_validate(study.quality.model_dump(exclude_unset=True) | change)
    return study.model_copy(update={"quality": quality})


def study_items(
    q: QualitySpec, *, task: str | None = None, n: int | None = None, count_tokens: Callable[[str], int] | None = None
) -> list:
    """The study's quality items of `task` (default q.task), as its module builds them (quality.tasks):
    `n` seeded items (default q.n; HumanEval, IFEval: None is all), or `n` items per cell (retrieval's
    length and depth, RULER's subtask and length) sized with `count_tokens` (the serving model's own
    tokenizer). The same call builds them for the engine's quality arms and for the eviction sweep."""
    return task_of(task or q.task).items(q, n, count_tokens)


def quality_arms(study: Study, arms: list[str] | None = None) -> list[ArmSpec]:
    """The arms to score: those marked quality (or named), one per quality key, baseline first."""
    chosen = [study.arm(a) for a in arms] if arms else [a for a in study.arms if a.quality]
    # an arm with its own model (spec.study.ArmSpec.model) measures that model's speed; quality runs
    # score the study's [model], whose tokens it does not share
    chosen = [a for a in chosen if a.model is None]
    if study.baseline not in chosen and not arms:
        chosen.insert(0, study.baseline)
    seen, out = set(), []
    for a in sorted(chosen, key=lambda a: a.name != study.baseline.name):
        k = a.knobs().quality_key()
        if k not in seen:
            seen.add(k)
            out.append(a)
    return out


def qrun_row(study: Study, arm: ArmSpec, qid: str, n: int) -> dict:
    """A quality run's store row before it is scored: what it scores, and failed until it is ok."""
    q = study.quality
    return {
        "qrun_id": qid,
        "study": study.name,
        "arm": arm.name,
        "quality_key": arm.knobs().quality_key(),
        "task": q.task,
        "mode": task_mode(q),
        "n": n,
        "seed": q.seed,
        "engine": study.engine.name,
        "status": "failed",
        "reason": None,
        "started_at": now(),
    }


def score_arm(
    study: Study,
    arm: ArmSpec,
    qid: str,
    n: int,
    items: list | None,
    on_progress: Callable[[str, dict], None],
    saved: list[dict] | None = None,
) -> tuple[dict, list[dict], list | None]:
    """Score one quality arm; returns its store row, item records and the items (retrieval items are
    built on first use with the server's tokenizer, then reused). `saved`: records of this arm kept
    from an earlier, interrupted try; only the missing items are asked. Each new record is also
    reported as a "record" event so the caller can save it at once. Never raises for engine trouble."""
    from pareto_atlas.quality.records import QualityRecord
    from pareto_atlas.quality.scoring import summarize, task_extras

    from pareto_atlas.measure import engines
    from pareto_atlas.quality.runner import run_items, server_token_counter

    q = study.quality
    row = qrun_row(study, arm, qid, n)
    records: list[dict] = []
    try:
        path, sha = served_model(study, arm)[:2]  # vLLM: the Hugging Face directory; else the GGUF
        row["model_sha256"] = sha
        slots = max(arm.slots, QUALITY_SLOTS)
        with engines.get_engine(study.engine.name).start(launch_for(study, arm, str(path), slots=slots)) as eng:
            row["engine_version"] = eng.version
            t0 = time.monotonic()
            if items is None:  # retrieval and ruler prompts are sized with this model's own tokenizer
                items = study_items(q, count_tokens=server_token_counter(eng.base_url))
            have = {d["item_id"]: QualityRecord.from_dict(d) for d in saved or () if d.get("error") is None}
            todo = [it for it in items if it.item_id not in have]
            for _ in range(len(items) - len(todo)):
                on_progress("item", {"arm": arm.name})
            fresh = (
                run_items(
                    eng.base_url,
                    todo,
                    concurrency=slots,
                    model=eng.model,
                    progress=lambda done, total: on_progress("item", {"arm": arm.name, "done": done}),
                    on_record=lambda r: on_progress("record", {"qrun_id": qid, "record": r.to_dict()}),
                ).records
                if todo
                else ()
            )
        by_id = {**have, **{r.item_id: r for r in fresh}}
        ordered = [by_id[it.item_id] for it in items]
        row["n"] = len(items)  # the items scored (retrieval and ruler: every cell's, not [quality] n)
        records = [r.to_dict() for r in ordered]
        summary = (
            summarize(ordered).to_dict()
            | task_extras(ordered)
            | {"wall_s": round(time.monotonic() - t0, 1), "kept_from_earlier_try": len(items) - len(todo)}
        )
        row["summary_json"] = dumps(summary)
        if all(r.error is not None for r in ordered):
            row["reason"] = f"every item failed: {ordered[0].error}"
        else:
            row["status"] = "ok"
    except Exception as e:  # noqa: BLE001 - a failed quality arm records why; the campaign goes on
        row["reason"] = (str(e).strip().splitlines() or [type(e).__name__])[0][:500]
    row["finished_at"] = now()
    row.setdefault("summary_json", dumps({}))
    return row, records, items


def score_here(
    study: Study,
    pending: Iterable[tuple[ArmSpec, str, list[dict]]],
    n: int,
    items: list | None,
    on_progress: Callable[[str, dict], None],
) -> Iterator[tuple[ArmSpec, dict, list[dict]]]:
    """Score each pending (arm, qrun id, records saved by an earlier try) in this process, in order."""
    for arm, qid, saved in pending:
        on_progress("start", {"arm": arm.name})
        row, records, items = score_arm(study, arm, qid, n, items, on_progress, saved)
        yield arm, row, records


def _quiet(ev: str, info: dict) -> None:
    pass  # progress inside a remote task has no console; the driver reports each result as it lands


def _score_job(study: Study, n: int, items: list | None, job: tuple[ArmSpec, str, list[dict]]):
    arm, qid, saved = job
    row, records, _ = score_arm(study, arm, qid, n, items, _quiet, saved)
    return row, records


def score_on(
    executor: Executor,
    study: Study,
    pending: Iterable[tuple[ArmSpec, str, list[dict]]],
    n: int,
    items: list | None,
    on_progress: Callable[[str, dict], None],
) -> Iterator[tuple[ArmSpec, dict, list[dict]]]:
    """Score each pending arm where `executor` runs jobs, each on its arm's hardware card; an arm whose
    worker or node was lost comes back as a failed row saying why."""
    if executor.here:
        yield from score_here(study, pending, n, items, on_progress)
        return

    def lost(job: tuple[ArmSpec, str, list[dict]], why: str) -> tuple[dict, list[dict]]:
        row = qrun_row(study, job[0], job[1], n)
        return {**row, "reason": why, "finished_at": now(), "summary_json": dumps({})}, []

    for (arm, _, _), (row, records), _ in executor.run(
        _score_job,
        pending,
        shared=(study, n, items),
        hardware_of=lambda job: study.hardware_of(job[0]),
        lost=lost,
        name="score_arm",
    ):
        on_progress("start", {"arm": arm.name})
        yield arm, row, records


def run_quality_campaign(
    study: Study,
    store: Store,
    *,
    arms: list[str] | None = None,
    n: int | None = None,
    on_progress: Callable[[str, dict], None] = lambda ev, info: None,
    executor: Executor | None = None,
    consent: Consent | None = None,
) -> None:
    """Score every quality arm not yet in the store. `executor`: where arms run (default: here, one
    after another); results come back here and only this process writes the store. `consent`: what
    the user allowed the study (default: their config file alone), checked before any engine starts."""
    for line in authorize(study, consent if consent is not None else Consent.from_user()):
        on_progress("consent", {"line": line})
    q = study.quality
    n = n or q.n
    items = study_items(q, n=n) if not task_of(q.task).sized_by_tokenizer else None
    if items is not None:
        n = len(items)  # HumanEval / IFEval: n beyond the task's size means all of it

    def pending():
        # lazy: in-process, each arm is written before the next one's status is looked up
        for arm in quality_arms(study, arms):
            qid = qrun_id(study, arm, n)
            if store.quality_status(qid) == "ok":
                on_progress("skip", {"arm": arm.name})
                continue
            yield arm, qid, store.quality_items(qid)

    def on(ev: str, info: dict) -> None:
        if ev == "record":  # in-process only: a remote task's records arrive with its result
            store.put_quality_item(info["qrun_id"], info["record"])
        else:
            on_progress(ev, info)

    runs = (
        score_here(study, pending(), n, items, on)
        if executor is None
        else score_on(executor, study, pending(), n, items, on)
    )
    for arm, row, records in runs:
        if row["status"] != "ok":  # keep the items a failed try did finish: the rerun asks only the rest
            records = records or store.quality_items(row["qrun_id"])
        store.put_quality_run(row, records)
        on_progress(
            "done",
            {
                "arm": arm.name,
                "status": row["status"],
                "reason": row["reason"],
                "summary": json.loads(row["summary_json"]),
            },
        )


def agreement_table(study: Study, store: Store):
    """Each scored arm against the baseline arm on the same task, item by item, from the saved
    records (never re-generated): answer agreement, where greedy tokens first diverge, and the flips
    (items right -> wrong and wrong -> right against the baseline) with the exact McNemar p. A lossy
    arm's damage shows here even where accuracy is too low to move."""
    import pandas as pd

    from pareto_atlas.quality.agreement import agreement
    from pareto_atlas.quality.records import QualityRecord
    from pareto_atlas.quality.stats import mcnemar_exact

    runs = store.quality_runs(study.name)
    base_key = study.baseline.knobs().quality_key()
    rows = []
    for (task, mode), of_task in runs.groupby(["task", "mode"], sort=False):
        base = of_task[of_task.quality_key == base_key]
        if base.empty:
            continue
        ref = [QualityRecord.from_dict(d) for d in store.quality_items(base.qrun_id.iloc[-1])]
        for _, r in of_task[of_task.quality_key != base_key].iterrows():
            a = agreement([QualityRecord.from_dict(d) for d in store.quality_items(r.qrun_id)], ref)
            rows.append(
                {
                    "task": task,
                    "mode": mode,
                    "arm": r.arm,
                    "reference": base.arm.iloc[-1],
                    "n": a.n,
                    "answer_agreement": a.answer_agreement.p,
                    "answer_agreement_lo": a.answer_agreement.lo,
                    "answer_agreement_hi": a.answer_agreement.hi,
                    "identical_outputs": a.identical_outputs.p,
                    "mean_prefix_frac": a.mean_prefix_frac,
                    "median_first_divergence": a.median_first_divergence,
                    "unit": a.unit,
                    "right_to_wrong": a.ref_only_correct,
                    "wrong_to_right": a.arm_only_correct,
                    "mcnemar_p": mcnemar_exact(a.arm_only_correct, a.ref_only_correct),
                }
            )
    return pd.DataFrame(rows)
