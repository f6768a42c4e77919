"""The built-in 70B study (spec/llama70b_study.toml): it loads as a study without arms, its quality
for the 70B comes from Red Hat's published cards, each score beside its own card's baseline, and its
grid searches parallelism."""

from __future__ import annotations

import pytest

from pareto_atlas.spec.cards import shipped_models
from pareto_atlas.spec.study import BUILTIN, GridSpec, load_study, study_ref

CARD = "llama-3.1-70b"
# (weights, card, GSM8K score, that card's own baseline), as the cards print them
GSM8K = [
    ("FP8", "Meta-Llama-3.1-70B-Instruct-FP8-dynamic", 94.5, 94.9),
    ("W4A16", "Meta-Llama-3.1-70B-Instruct-quantized.w4a16", 94.4, 95.4),
    ("W8A8", "Meta-Llama-3.1-70B-Instruct-quantized.w8a8", 94.2, 95.4),
]
needs_card = pytest.mark.skipif(
    CARD not in shipped_models(), reason=f"the {CARD!r} model card (spec/models.toml) has not landed yet"
)


def test_llama70b_is_a_builtin_without_arms_on_h100_sxm_and_h200():
    study = load_study("llama70b")
    assert BUILTIN["llama70b"] == "llama70b_study.toml" and study_ref(study) == "llama70b"
    assert not study.arms and not study.measures  # build measures nothing: published evidence only
    assert study.model.card == CARD and study.engine.name == "vllm"
    assert {"H100-SXM", "H200"} <= set(study.simulate.hardware)
    assert study.quality.task == "gsm8k" and study.quality.floor == 0.95
    assert all(study.prices[h] > 0 for h in study.simulate.hardware) and study.price_date == "2026-03"
    shapes = {w.name: (w.prompt_tokens, w.output_tokens) for t in study.targets for w in t.workloads or ()}
    assert shapes["chat-1024-1024"] == (1024, 1024) and shapes["long-8192-1024"] == (8192, 1024)
    grid = study.simulate.grid
    assert {"F16", "FP8", "W4A16"} <= set(grid.weights) and {"continuous", "chunked", "disagg"} <= set(grid.batching)
    assert {r.name for r in study.regimes} == {"tight-latency", "high-throughput", "low-cost", "quality-floor"}
    assert max(study.simulate.concurrency) >= 256 and min(study.simulate.concurrency) == 1


@needs_card
@pytest.mark.parametrize(("weights", "card", "score", "baseline"), GSM8K)
def test_the_70b_gsm8k_guard_reads_each_card_beside_its_own_baseline(weights, card, score, baseline):
    from pareto_atlas.quality.published import guard_choice, load_published_quality, published_for

    table = load_published_quality()
    hits = published_for(CARD, weights, table=table)
    assert len(hits) == 7 and all(h.source.endswith(card) for h in hits)  # the card's OpenLLM v1 table, nothing else
    g = guard_choice(hits, "gsm8k")
    assert g is not None and not g.informational
    assert (g.benchmark, g.score, g.baseline_score, g.n_items) == ("gsm8k", score, baseline, 1319)
    assert g.rel == pytest.approx(score / baseline) and g.rel_lo < g.rel < g.rel_hi
    row = table[(table.model == CARD) & (table.weights == weights) & (table.benchmark == "gsm8k")].iloc[0]
    assert (
        row.publisher == "Red Hat (Neural Magic)"
        and row.baseline_checkpoint == "meta-llama/Meta-Llama-3.1-70B-Instruct"
    )
    assert "page copy" in row.notes and row.source_date.startswith("2024-07")


@needs_card
def test_the_70b_at_16_bits_is_each_cards_baseline_and_the_cards_disagree_on_it():
    """The model's own precision: one reference per card, rel exactly 1, q its card's baseline (94.9 on
    the FP8-dynamic card, 95.4 on the W4A16 and W8A8 cards): never one card's baseline under another's score."""
    from pareto_atlas.quality.published import published_for

    refs = [r for r in published_for(CARD, "BF16", benchmark="gsm8k")]
    assert sorted(r.q for r in refs) == pytest.approx([0.949, 0.954, 0.954])
    assert all(r.rel == r.rel_lo == r.rel_hi == 1.0 for r in refs)


def test_the_grid_searches_tensor_parallelism_beyond_one_gpu():
    if "tp" not in GridSpec.model_fields:
        pytest.skip("GridSpec has no parallelism fields yet (they come with the parallel simulator)")
    study = load_study("llama70b")
    grid = study.simulate.grid
    assert grid.tp is not None and {1, 2, 4, 8} <= set(grid.tp)
    from pareto_atlas.simulate.stage import study_space
    from pareto_atlas.spec.cards import shipped_hardware

    hw = [shipped_hardware()[h] for h in study.simulate.hardware]
    knobs = study_space(study, hw, shipped_models()[CARD], budget=10**9).knobs
    assert {k.tp for k in knobs if k.batching != "disagg"} == {1, 2, 4, 8}
    gpus = {(k.batching == "disagg", k.gpus()) for k in knobs}
    # 1, 2, 4 and 8 GPUs a replica aggregated, and disaggregated pools of more than one GPU
    assert {(False, 1), (False, 2), (False, 4), (False, 8)} <= gpus and any(d and g > 2 for d, g in gpus)
    assert all(k.gpus() <= 8 for k in knobs)  # one 8-GPU node


def test_a_grid_tp_that_is_not_a_power_of_two_is_one_line_naming_the_field():
    if "tp" not in GridSpec.model_fields:
        pytest.skip("GridSpec has no parallelism fields yet (they come with the parallel simulator)")
    from importlib import resources

    from pareto_atlas.spec.study import StudyError, parse_study

    text = resources.files("pareto_atlas.spec").joinpath("llama70b_study.toml").read_text()
    with pytest.raises(StudyError) as e:
        parse_study(text.replace("tp = [1, 2, 4, 8]", "tp = [1, 3]"))
    assert "\n" not in str(e.value) and "tp: 3 must be a power of two" in str(e.value)


@pytest.mark.parametrize(
    "old, new, says",
    [
        (
            "tp = [1, 2, 4, 8]",
            "tp = [1, 16]",
            "grid.tp: 16 is in no searched layout; tp takes 1, 2, 4, 8 (a worker stays within one node: 8 GPUs",
        ),
        ("pp = [1, 2]", "pp = [3]", "grid.pp: 3 is in no searched layout; pp takes 1, 2"),
        ("decode_workers = [1, 2, 3]", "decode_workers = [9]", "grid.decode_workers: 9 is in no searched layout"),
    ],
)
def test_a_grid_value_no_searched_layout_takes_is_one_line_at_load_not_an_empty_space(old, new, says):
    """A power of two beyond the node (tp 16), or a stage or worker count no layout has, would keep no
    configuration of its own (before: the simulate stage stored 0 points and crashed on them)."""
    from importlib import resources

    from pareto_atlas.spec.study import StudyError, parse_study

    text = resources.files("pareto_atlas.spec").joinpath("llama70b_study.toml").read_text()
    assert old in text
    with pytest.raises(StudyError) as e:
        parse_study(text.replace(old, new))
    assert "\n" not in str(e.value) and says in str(e.value)


@needs_card
def test_a_same_architecture_models_published_score_is_carried_to_llama_3_3_70b_and_says_so():
    """Llama-3.3-70B has no published quantized score; Llama-3.1-70B's cards (same architecture) stand for
    it, as carried evidence naming the model they were published for, never as published for 3.3."""
    from importlib import resources

    from pareto_atlas.calibrate.stage import model_card
    from pareto_atlas.simulate.space import Workload
    from pareto_atlas.simulate.targets import study_targets
    from pareto_atlas.spec.cards import shipped_hardware
    from pareto_atlas.spec.knobs import Knobs
    from pareto_atlas.spec.study import parse_study
    from pareto_atlas.store.ladder import target_quality

    text = resources.files("pareto_atlas.spec").joinpath("llama70b_study.toml").read_text()
    hw, wl = [shipped_hardware()["H200"]], [Workload("chat-1024-1024", 1024, 1024)]
    for card, evidence in ((CARD, "published"), ("llama-3.3-70b", "carried")):
        s = parse_study(text.replace(f'card = "{CARD}"', f'card = "{card}"'))
        [t] = study_targets(s, model_card(s), hw, wl)
        q = target_quality(Knobs(weights="FP8"), t, "gpu", s, {}, "gsm8k")
        assert q.evidence == evidence and "Meta-Llama-3.1-70B-Instruct-FP8-dynamic" in q.provenance
        assert ("carried from llama-3.1-70b (same architecture as llama-3.3-70b)" in q.provenance) == (card != CARD)
        assert 0.95 < q.rel < 1.0
