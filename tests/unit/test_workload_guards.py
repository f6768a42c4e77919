"""Each workload is guarded by its own task: one configuration can pass the floor on one workload's
task and fail it on another's, and the atlas says which task guarded each winner."""

from __future__ import annotations

import pandas as pd
import pytest

from pareto_atlas.atlas.summary import guard_by_workload
from pareto_atlas.quality.records import QualityRecord
from pareto_atlas.simulate.space import Workload
from pareto_atlas.simulate.targets import study_targets
from pareto_atlas.spec.cards import shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.spec.study import StudyError, parse_study
from pareto_atlas.store import Store
from pareto_atlas.store.db import dumps, now
from pareto_atlas.store.quality import arm_quality_table, attach_quality

STUDY_TOML = """
name = "wl-guards"
[model]
name = "qwen2.5-coder-0.5b-instruct"
card = "qwen2.5-0.5b"
[[arms]]
name = "q4km"
weights = "Q4_K_M"
quality = true
[[arms]]
name = "kvq4"
weights = "Q4_K_M"
kv = "q4_0"
quality = true
[quality]
task = "gsm8k"
baseline_arm = "q4km"
floor = 0.9
tasks = { humaneval = 10 }
[[targets]]
name = "qwen2.5-coder-0.5b-instruct"
workloads = [{ name = "math-128-256", prompt_tokens = 128, output_tokens = 256 },
             { name = "code-256-256", prompt_tokens = 256, output_tokens = 256, task = "humaneval" }]
"""
STUDY = parse_study(STUDY_TOML)
N = 40
BASE = [i % 2 == 0 for i in range(N)]  # 20 of 40 right on both tasks
SAME = list(BASE)  # the q4_0 cache: no change on math
BROKEN = [ok and i >= 32 for i, ok in enumerate(BASE)]  # ...and 16 right->wrong flips on code


def _run(s: Store, task: str, arm: str, knobs: Knobs, correct: list[bool]) -> None:
    items = [
        QualityRecord(
            item_id=f"{task}/{i}",
            task=task,
            variant="v",
            prompt_sha256="x",
            target="1",
            output="",
            extracted_strict="",
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
            "qrun_id": f"{task}-{arm}",
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
            "summary_json": dumps({"strict": {"k": k, "n": len(correct), "p": k / len(correct), "lo": 0.3, "hi": 0.7}}),
        },
        items,
    )


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "s.duckdb") as s:
        base, kvq4 = Knobs(weights="Q4_K_M"), Knobs(weights="Q4_K_M", kv="q4_0")
        _run(s, "gsm8k", "q4km", base, BASE)
        _run(s, "gsm8k", "kvq4", kvq4, SAME)
        _run(s, "humaneval", "q4km", base, BASE)
        _run(s, "humaneval", "kvq4", kvq4, BROKEN)
        yield s


def _points() -> pd.DataFrame:
    rows = [
        {
            "workload": w,
            "hardware": "this-cpu",
            "weights": "Q4_K_M",
            "kv": kv,
            "model": STUDY.model.name,
            "quality_evidence": "",
        }
        for w in ("math-128-256", "code-256-256")
        for kv in ("f16", "q4_0")
    ]
    return pd.DataFrame(rows)


def test_the_target_names_each_workloads_task():
    card = shipped_models()["qwen2.5-0.5b"]
    (t,) = study_targets(STUDY, card, [shipped_hardware()["L4"]], [Workload("chat-128-32", 128, 32)])
    assert t.task_of("math-128-256", STUDY.quality.task) == "gsm8k"
    assert t.task_of("code-256-256", STUDY.quality.task) == "humaneval"
    assert STUDY.quality.all_tasks() == ["gsm8k", "humaneval"]


def test_one_configuration_passes_on_math_and_fails_on_code(store):
    card = shipped_models()["qwen2.5-0.5b"]
    (t,) = study_targets(STUDY, card, [shipped_hardware()["L4"]], [])
    pts = attach_quality(_points(), STUDY, store, task_of=lambda w: t.task_of(w, STUDY.quality.task))
    kv = pts[pts.kv == "q4_0"].set_index("workload")
    assert kv.loc["math-128-256", "quality_task"] == "gsm8k" and kv.loc["code-256-256", "quality_task"] == "humaneval"
    assert kv.loc["math-128-256", "quality_rel"] == pytest.approx(1.0)
    assert kv.loc["code-256-256", "quality_rel"] == pytest.approx(4 / 20)
    g = guard_by_workload(pts, STUDY.quality.floor)
    verdicts = g[g.kv == "q4_0"].set_index("workload").verdict
    assert verdicts["code-256-256"] == "out" and verdicts["math-128-256"] != "out"
    assert g[g.kv == "q4_0"].differs.all() and not g[g.kv == "f16"].differs.any()


def test_without_a_task_map_every_workload_is_guarded_by_the_studys_task(store):
    pts = attach_quality(_points(), STUDY, store)
    assert set(pts.quality_task) == {"gsm8k"}
    assert (pts[pts.kv == "q4_0"].quality_rel == 1.0).all()


def test_the_evidence_table_has_a_row_per_task(store):
    tab = arm_quality_table(STUDY, store)
    assert sorted(set(zip(tab.task, tab.arm))) == [
        ("gsm8k", "kvq4"),
        ("gsm8k", "q4km"),
        ("humaneval", "kvq4"),
        ("humaneval", "q4km"),
    ]
    assert tab.set_index(["task", "arm"]).loc[("humaneval", "kvq4"), "diff"] == pytest.approx(-16 / 40)


def test_a_measured_workloads_task_must_be_scored_by_the_study():
    bad = STUDY_TOML.replace('tasks = { humaneval = 10 }', '')
    with pytest.raises(StudyError) as e:
        parse_study(bad)
    assert "targets.0.workloads.1.task" in str(e.value) and "humaneval" in str(e.value) and "\n" not in str(e.value)


def test_an_unknown_task_is_one_line():
    with pytest.raises(StudyError) as e:
        parse_study(STUDY_TOML.replace('tasks = { humaneval = 10 }', 'tasks = { poetry = 10 }'))
    assert "quality.tasks" in str(e.value) and "\n" not in str(e.value)


def test_the_atlas_prints_the_verdict_per_workload_and_marks_the_one_that_differs(store):
    import io

    from rich.console import Console

    from pareto_atlas.atlas.tables import print_guard_by_workload

    card = shipped_models()["qwen2.5-0.5b"]
    (t,) = study_targets(STUDY, card, [shipped_hardware()["L4"]], [])
    pts = attach_quality(_points(), STUDY, store, task_of=lambda w: t.task_of(w, STUDY.quality.task))
    buf = io.StringIO()
    g = print_guard_by_workload(STUDY, pts, Console(file=buf, width=200))
    text = buf.getvalue()
    assert "code-256-256 (humaneval)" in text and "math-128-256 (gsm8k)" in text
    assert "1 of 2 configurations have a guard verdict that differs" in text
    assert set(g[g.differs].kv) == {"q4_0"}
