"""The quality tasks as a study and the CLI name them: --task and --n all, each task's own
max_tokens, per-task flips against the baseline with the exact McNemar p, and a guard that rests
on the study's own task even when other tasks' runs share the store."""

from __future__ import annotations

import pytest

from pareto_atlas.quality.campaign import agreement_table, max_tokens_for, qrun_id, study_items, with_task
from pareto_atlas.quality.records import QualityRecord
from pareto_atlas.quality.stats import mcnemar_exact
from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.spec.study import QualitySpec, load_study
from pareto_atlas.stages import parse_n
from pareto_atlas.store import Store
from pareto_atlas.store.db import dumps, now
from pareto_atlas.store.quality import quality_table

STUDY = load_study("tiny")
ARM_KNOBS = Knobs(weights="Q4_1", kv="q8_0")


def test_with_task_keeps_the_study_and_checks_the_field():
    he = with_task(STUDY, "humaneval")
    assert he.quality.task == "humaneval" and he.quality.n == STUDY.quality.n and he.name == STUDY.name
    assert with_task(STUDY, None) is STUDY
    with pytest.raises(ValueError):
        with_task(STUDY, "mmlu")
    assert with_task(STUDY, "ifeval", 300).quality.max_tokens == 300


def test_each_task_has_its_own_max_tokens_unless_the_study_sets_one():
    assert max_tokens_for(QualitySpec(task="humaneval")) == 512 and max_tokens_for(QualitySpec(task="ifeval")) == 768
    assert max_tokens_for(QualitySpec(task="humaneval", max_tokens=256)) == 256
    assert max_tokens_for(with_task(STUDY, "humaneval", 200).quality) == 200
    gsm = with_task(STUDY, "gsm8k")
    assert max_tokens_for(gsm.quality) == gsm.quality.max_tokens


def test_items_and_run_ids_per_task():
    he = with_task(STUDY, "humaneval")
    items = study_items(he.quality, n=3)
    assert len(items) == 3 and all(it.task == "humaneval" for it in items)
    assert len(study_items(with_task(STUDY, "ifeval").quality, n=541)) == 541
    arm = STUDY.baseline
    assert qrun_id(he, arm, 3) != qrun_id(STUDY, arm, 3) != qrun_id(with_task(STUDY, "ifeval"), arm, 3)


def test_n_all_and_bad_n():
    assert parse_n("all", "humaneval") == 164 and parse_n("all", "ifeval") == 541 and parse_n("12", "gsm8k") == 12
    assert parse_n(None, "gsm8k") is None
    for bad in ("0", "-3", "some"):
        with pytest.raises(ValueError, match="--n"):
            parse_n(bad, "humaneval")
    with pytest.raises(ValueError, match="not defined for retrieval"):
        parse_n("all", "retrieval")


def _put(s: Store, qid: str, arm: str, knobs: Knobs, task: str, correct: list[bool]) -> None:
    recs = [
        QualityRecord(
            item_id=f"{task}/{i}",
            task=task,
            variant="v",
            prompt_sha256="x",
            target="t",
            output=str(ok),
            extracted_strict=str(ok),
            extracted_flexible="",
            correct_strict=ok,
            correct_flexible=ok,
            latency_s=0.1,
        ).to_dict()
        for i, ok in enumerate(correct)
    ]
    k = sum(correct)
    s.put_quality_run(
        {
            "qrun_id": qid,
            "study": STUDY.name,
            "arm": arm,
            "quality_key": knobs.quality_key(),
            "task": task,
            "mode": "v",
            "n": len(correct),
            "seed": 0,
            "engine": "llamacpp",
            "status": "ok",
            "started_at": now(),
            "summary_json": dumps({"strict": {"k": k, "n": len(correct), "p": k / len(correct), "lo": 0.0, "hi": 1.0}}),
        },
        recs,
    )


def test_flips_per_task_with_exact_mcnemar_and_the_guard_on_the_studys_task(tmp_path):
    base = [True] * 8 + [False] * 4
    arm = [True] * 3 + [False] * 5 + [True] + [False] * 3  # 5 right->wrong, 1 wrong->right
    with Store(tmp_path / "s.duckdb") as s:
        _put(s, "g-base", STUDY.baseline.name, STUDY.baseline.knobs(), STUDY.quality.task, [True, False])
        _put(s, "g-arm", "kvq8", ARM_KNOBS, STUDY.quality.task, [True, False])
        _put(s, "h-base", STUDY.baseline.name, STUDY.baseline.knobs(), "humaneval", base)
        _put(s, "h-arm", "kvq8", ARM_KNOBS, "humaneval", arm)
        table = agreement_table(STUDY, s)
        qt = quality_table(STUDY, s)
    he = table[table.task == "humaneval"].iloc[0]
    assert (he.right_to_wrong, he.wrong_to_right, he.n) == (5, 1, 12)
    assert he.mcnemar_p == pytest.approx(mcnemar_exact(1, 5)) and he.mcnemar_p == pytest.approx(0.21875)
    own = table[table.task == STUDY.quality.task].iloc[0]
    assert (own.right_to_wrong, own.wrong_to_right, own.mcnemar_p) == (0, 0, 1.0)
    # the guard's table is the study's own task: HumanEval's lower score does not leak into it
    assert (
        qt[ARM_KNOBS.quality_key()]["metric"].startswith(STUDY.quality.task)
        and qt[ARM_KNOBS.quality_key()]["rel"] == 1.0
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["--task", "mmlu"], "--task: 'mmlu' is not allowed; one of gsm8k, retrieval, humaneval, ifeval, ruler"),
        (["--task", "humaneval", "--n", "lots"], "--n: 'lots' is not allowed"),
        (["--task", "ifeval", "--max-tokens", "3"], "--max-tokens: 3 is not allowed"),
    ],
)
def test_cli_quality_rejects_bad_task_n_and_max_tokens_in_one_line(tmp_path, args, message):
    from typer.testing import CliRunner

    from pareto_atlas.cli import app

    res = CliRunner().invoke(app, ["quality", "--study", "tiny", "--out", str(tmp_path), *args])
    assert res.exit_code != 0 and message in " ".join(res.output.split())
