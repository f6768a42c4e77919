"""Every configuration's quality carries an interval relative to the baseline and says what it rests on."""

from __future__ import annotations

import pytest

from pareto_atlas.quality.records import QualityRecord
from pareto_atlas.quality.stats import paired_difference
from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.spec.priors import DEFAULT_QUALITY_SPREAD
from pareto_atlas.spec.study import load_study
from pareto_atlas.store import Store
from pareto_atlas.store.db import dumps, now
from pareto_atlas.store.quality import REENCODING_REL, quality_for, quality_table

STUDY = load_study("tiny")  # source Q4_1, baseline arm q4_1
BASE = [True, True, False, True, False, True, True, False, False, True]
ARM = [True, False, False, True, False, True, True, True, False, False]


def _run(s: Store, qid: str, arm: str, knobs: Knobs, correct: list[bool]) -> None:
    items = [
        QualityRecord(
            item_id=f"gsm8k/{i}",
            task="gsm8k",
            variant="chat-0shot",
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
            "qrun_id": qid,
            "study": STUDY.name,
            "arm": arm,
            "quality_key": knobs.quality_key(),
            "task": "gsm8k",
            "mode": "chat-0shot",
            "n": len(correct),
            "seed": 0,
            "engine": "llamacpp",
            "status": "ok",
            "started_at": now(),
            "summary_json": dumps({"strict": {"k": k, "n": len(correct), "p": k / len(correct), "lo": 0.2, "hi": 0.8}}),
        },
        items,
    )


@pytest.fixture
def qt(tmp_path):
    with Store(tmp_path / "s.duckdb") as s:
        _run(s, "b", "q4_1", STUDY.baseline.knobs(), BASE)
        _run(s, "a", "kvq8", Knobs(weights="Q4_1", kv="q8_0"), ARM)
        yield quality_table(STUDY, s, "gsm8k")


def test_a_run_of_another_task_never_stands_in_for_the_guarded_task(tmp_path):
    # the tiny study's task is retrieval; its GSM8K runs guard only the workloads that name gsm8k
    with Store(tmp_path / "s.duckdb") as s:
        _run(s, "b", "q4_1", STUDY.baseline.knobs(), BASE)
        assert quality_table(STUDY, s) == {}
        assert quality_table(STUDY, s, "humaneval") == {}
        assert set(quality_table(STUDY, s, "gsm8k")) == {STUDY.baseline.knobs().quality_key()}


def test_the_baseline_is_exactly_itself_and_an_arm_is_paired_against_it(qt):
    base = qt[STUDY.baseline.knobs().quality_key()]
    assert (base["rel"], base["rel_lo"], base["rel_hi"]) == (1.0, 1.0, 1.0)
    arm = qt[Knobs(weights="Q4_1", kv="q8_0").quality_key()]
    assert (arm["rel"], arm["rel_lo"], arm["rel_hi"]) == pytest.approx(paired_difference(ARM, BASE).rel_interval())
    assert arm["paired"]["b"] == 1 and arm["paired"]["c"] == 2


def test_measured_inherited_and_gpu_configurations_of_the_same_tokens(qt):
    m = quality_for(Knobs(weights="Q4_1", kv="q8_0"), "kvq8", STUDY, qt)
    assert m.evidence == "measured" and m.rel_lo < m.rel < m.rel_hi
    # the same token-changing knobs at more slots (or on another card) inherit, with the same interval
    i = quality_for(Knobs(weights="Q4_1", kv="q8_0", slots=8), "", STUDY, qt)
    assert (
        i.evidence == "inherited" and i.provenance == "inherited:kvq8" and (i.rel_lo, i.rel_hi) == (m.rel_lo, m.rel_hi)
    )


def test_no_prior_has_a_zero_width_quality(qt):
    f16 = quality_for(Knobs(weights="F16"), "", STUDY, qt)
    assert f16.evidence == "prior" and (f16.rel_lo, f16.rel_hi) == pytest.approx(REENCODING_REL)
    fp8 = quality_for(Knobs(weights="FP8"), "", STUDY, qt)
    assert fp8.evidence == "prior" and fp8.provenance.startswith("prior:micikevicius2022fp8")
    assert (fp8.rel_lo, fp8.rel_hi) == pytest.approx((1 + DEFAULT_QUALITY_SPREAD[0], 1 + DEFAULT_QUALITY_SPREAD[1]))
    awq = quality_for(Knobs(weights="AWQ4"), "", STUDY, qt)
    assert awq.evidence == "prior" and awq.rel_hi - awq.rel_lo > 0.1
    # a prior on top of a prior: intervals multiply, never narrow
    stack = quality_for(Knobs(weights="FP8", sparse_budget=0.25), "", STUDY, qt)
    assert stack.evidence == "prior" and stack.rel_lo < fp8.rel_lo and stack.rel_hi > fp8.rel_hi


def test_formats_below_the_source_and_random_weights_stay_unmeasured(qt):
    for k in (Knobs(weights="Q4_0"), Knobs(weights="RANDOM"), Knobs(weights="F16", kv="q4_0")):
        q = quality_for(k, "", STUDY, qt)
        assert q.evidence == "unmeasured" and q.q != q.q


def test_an_effect_prior_on_a_prior_core_keeps_both_on_record(qt):
    q = quality_for(Knobs(weights="FP8", eviction="h2o", kv_keep=0.5), "", STUDY, qt)
    assert q.provenance.startswith("prior:micikevicius2022fp8") and q.provenance.endswith("+prior:cai2024pyramidkv")
