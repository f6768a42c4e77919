"""The atlas reads KV eviction's quality from the store's measured points before any prior."""

from __future__ import annotations

import pandas as pd
import pytest

from pareto_atlas.quality.records import QualityRecord
from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.spec.priors import get_prior
from pareto_atlas.spec.study import load_study
from pareto_atlas.store import Store
from pareto_atlas.store.db import dumps, now
from pareto_atlas.store.quality import attach_quality, eviction_effects, quality_for, quality_table

STUDY = load_study("tiny")  # baseline arm q4_1, quality task retrieval
MODEL = STUDY.model.name


def _records(correct: list[bool], task: str = "retrieval") -> list[dict]:
    return [
        QualityRecord(
            item_id=f"{task}/{i}",
            task=task,
            variant="niah" if task == "retrieval" else "chat-0shot",
            prompt_sha256="x",
            target="1",
            output="1" if ok else "2",
            extracted_strict="1" if ok else "2",
            extracted_flexible="1" if ok else "2",
            correct_strict=ok,
            correct_flexible=ok,
            latency_s=0.1,
        ).to_dict()
        for i, ok in enumerate(correct)
    ]


def _put_point(
    s: Store,
    eid: str,
    ref: str,
    policy: str,
    keep: float,
    correct: list[bool],
    *,
    task: str = "retrieval",
    model: str = MODEL,
) -> None:
    k = sum(correct)
    s.put_eviction_point(
        {
            "evict_id": eid,
            "ref_id": ref,
            "study": STUDY.name,
            "model": model,
            "model_sha256": "sha",
            "task": task,
            "mode": "niah",
            "n": 1,
            "seed": 0,
            "items_json": "{}",
            "policy": policy,
            "keep": keep,
            "chunk": 128,
            "label": policy,
            "kv_keep": keep * 0.96,
            "peak_kv_tokens": 200,
            "kv_bytes_per_token": 9216,
            "n_items": len(correct),
            "correct": k,
            "p": k / len(correct),
            "lo": 0.0,
            "hi": 1.0,
            "ppl": 5.0,
            "ppl_full": 4.0,
            "ppl_item": "x",
            "seconds": 1.0,
            "engine": "transformers-dense-gguf",
            "engine_version": "t",
        },
        _records(correct, task),
    )


def _put_baseline_score(s: Store, *, p: float, lo: float, hi: float, n: int) -> None:
    """The baseline arm's retrieval score, as a finished quality run."""
    s.put_quality_run(
        {
            "qrun_id": "q1",
            "study": STUDY.name,
            "arm": STUDY.baseline.name,
            "quality_key": STUDY.baseline.knobs().quality_key(),
            "task": "retrieval",
            "mode": "niah",
            "n": n,
            "seed": 0,
            "engine": "llamacpp",
            "status": "ok",
            "started_at": now(),
            "summary_json": dumps({"strict": {"p": p, "lo": lo, "hi": hi, "n": n}}),
        },
        [],
    )


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "s.duckdb") as s:
        _put_baseline_score(s, p=0.8, lo=0.49, hi=0.94, n=10)
        _put_point(s, "ref", "ref", "none", 1.0, [True] * 6)
        _put_point(s, "h2o-half", "ref", "h2o", 0.5, [True, True, True, False, False, False])
        yield s


def _q(knobs: Knobs, s: Store):
    r = quality_for(knobs, "", STUDY, quality_table(STUDY, s), eviction_effects(STUDY, s))
    return r.q, r.lo, r.hi, r.provenance


def test_exact_keep_uses_the_measured_relative_effect_with_a_wider_interval(store):
    q, lo, hi, prov = _q(Knobs(weights="Q4_1", eviction="h2o", kv_keep=0.5), store)
    assert q == pytest.approx(0.8 * 0.5)
    assert lo < 0.49 * 0.5 and hi > 0.94 * 0.5  # the effect's own uncertainty widens the score's
    assert prov == f"measured-effect:h2o@0.5 (transformers, {MODEL}, retrieval n=6)"


def test_larger_keep_borrows_the_nearest_measured_keep_below_and_says_so(store):
    q, _, _, prov = _q(Knobs(weights="Q4_1", eviction="h2o", kv_keep=0.75), store)
    assert q == pytest.approx(0.4)
    assert prov.startswith("measured-effect:h2o@0.5 for keep 0.75, the nearest measured below (transformers")


def test_no_measurement_at_or_below_the_keep_keeps_the_prior(store):
    # h2o measured only at 0.5 must not flatter 0.25; snapkv is not measured at all
    for k in (
        Knobs(weights="Q4_1", eviction="h2o", kv_keep=0.25),
        Knobs(weights="Q4_1", eviction="snapkv", kv_keep=0.25),
    ):
        q, _, _, prov = _q(k, store)
        assert prov == "prior:cai2024pyramidkv" and q == pytest.approx(0.8)


def test_sparse_attention_on_top_keeps_its_prior_beside_the_measured_effect(store):
    _, _, _, prov = _q(Knobs(weights="Q4_1", eviction="h2o", kv_keep=0.5, sparse_budget=0.25), store)
    assert prov.startswith("measured-effect:h2o@0.5 (") and prov.endswith("+prior:ribar2023sparq")


def test_full_cache_scoring_zero_leaves_the_prior_and_says_why(tmp_path):
    with Store(tmp_path / "z.duckdb") as s:
        _put_point(s, "ref", "ref", "none", 1.0, [False] * 3)
        _put_point(s, "h", "ref", "h2o", 0.5, [False] * 3)
        _put_baseline_score(s, p=0.5, lo=0.2, hi=0.8, n=8)
        _, _, _, prov = _q(Knobs(weights="Q4_1", eviction="h2o", kv_keep=0.5), s)
    assert prov.startswith("prior:cai2024pyramidkv (measured h2o@0.5 has no relative effect: full cache 0/3)")


def test_other_models_are_ignored_and_the_study_task_wins(store):
    _put_point(store, "other-ref", "other-ref", "none", 1.0, [True] * 3, model="qwen2.5-coder-0.5b-instruct")
    _put_point(store, "other", "other-ref", "snapkv", 0.25, [False] * 3, model="qwen2.5-coder-0.5b-instruct")
    # GSM8K with more items, same policy and keep: the study's own task (retrieval) still wins
    _put_point(store, "g-ref", "g-ref", "none", 1.0, [True] * 10, task="gsm8k")
    _put_point(store, "g", "g-ref", "h2o", 0.5, [True] * 10, task="gsm8k")
    eff = eviction_effects(STUDY, store)
    assert set(eff) == {"h2o"} and eff["h2o"][0]["task"] == "retrieval" and eff["h2o"][0]["rel"] == pytest.approx(0.5)


def test_attach_quality_passes_the_store_effects_to_the_simulated_points(store):
    pts = pd.DataFrame(
        [
            Knobs(weights="Q4_1", eviction=e, kv_keep=k).to_dict()
            for e, k in (("none", 1.0), ("h2o", 0.5), ("snapkv", 0.25))
        ]
    )
    out = attach_quality(pts, STUDY, store)
    assert list(out.quality_provenance.str.split(":").str[0]) == ["inherited", "measured-effect", "prior"]
    assert out.quality_rel.tolist() == pytest.approx([1.0, 0.5, 1.0])


# Sparse attention (`Knobs.sparse_budget`) reads the measured oracle top-k effect (`evict --policies topk`).

SPARSE_PROV = f"(transformers, {MODEL}, retrieval n=6; oracle top-k)"


@pytest.fixture
def sparse_store(store):
    _put_point(store, "topk-quarter", "ref", "topk", 0.25, [True, True, True, True, False, False])
    return store


def test_sparse_budget_uses_the_measured_top_k_effect_instead_of_the_prior(sparse_store):
    q, lo, hi, prov = _q(Knobs(weights="Q4_1", sparse_budget=0.25), sparse_store)
    assert q == pytest.approx(0.8 * 4 / 6)
    assert lo < 0.49 * 4 / 6 and hi > 0.94 * 4 / 6
    assert prov == f"measured-effect:topk@0.25 {SPARSE_PROV}"


def test_a_larger_budget_borrows_the_nearest_measured_below_and_a_smaller_one_keeps_the_prior(sparse_store):
    q, _, _, prov = _q(Knobs(weights="Q4_1", sparse_budget=0.5), sparse_store)
    assert q == pytest.approx(0.8 * 4 / 6)
    assert prov == f"measured-effect:topk@0.25 for budget 0.5, the nearest measured below {SPARSE_PROV}"
    q, _, _, prov = _q(Knobs(weights="Q4_1", sparse_budget=0.125), sparse_store)
    assert prov == "prior:ribar2023sparq" and q == pytest.approx(0.8 + get_prior("sparq_quality").central)


def test_eviction_and_sparse_attention_multiply_their_measured_effects_and_intervals(sparse_store):
    eff = eviction_effects(STUDY, sparse_store)
    ev, sp = eff["h2o"][0], eff["topk"][0]
    q, lo, hi, prov = _q(Knobs(weights="Q4_1", eviction="h2o", kv_keep=0.5, sparse_budget=0.25), sparse_store)
    assert q == pytest.approx(0.8 * 0.5 * 4 / 6)
    assert lo == pytest.approx(0.49 * ev["rel_lo"] * sp["rel_lo"])
    assert hi == pytest.approx(min(1.0, 0.94 * ev["rel_hi"] * sp["rel_hi"]))
    assert prov == (
        f"measured-effect:h2o@0.5 (transformers, {MODEL}, retrieval n=6)+measured-effect:topk@0.25 {SPARSE_PROV}"
    )


def test_the_prior_stands_in_only_for_the_family_nothing_measured(sparse_store):
    # snapkv is not measured: its prior moves the score scaled by the measured top-k effect
    q, _, _, prov = _q(Knobs(weights="Q4_1", eviction="snapkv", kv_keep=0.5, sparse_budget=0.25), sparse_store)
    assert prov == f"measured-effect:topk@0.25 {SPARSE_PROV}+prior:cai2024pyramidkv"
    assert q == pytest.approx(0.8 * 4 / 6 + get_prior("pyramidkv_quality").central)
    # eviction still reads its measured effect when sparse attention has none (here: budget below 0.25)
    _, _, _, prov = _q(Knobs(weights="Q4_1", eviction="h2o", kv_keep=0.5, sparse_budget=0.125), sparse_store)
    assert prov == f"measured-effect:h2o@0.5 (transformers, {MODEL}, retrieval n=6)+prior:ribar2023sparq"


def test_top_k_with_a_full_cache_scoring_zero_leaves_the_sparse_prior_and_says_why(tmp_path):
    with Store(tmp_path / "z.duckdb") as s:
        _put_point(s, "ref", "ref", "none", 1.0, [False] * 3)
        _put_point(s, "t", "ref", "topk", 0.25, [False] * 3)
        _put_baseline_score(s, p=0.5, lo=0.2, hi=0.8, n=8)
        _, _, _, prov = _q(Knobs(weights="Q4_1", sparse_budget=0.25), s)
    assert prov == "prior:ribar2023sparq (measured topk@0.25 has no relative effect: full cache 0/3)"
