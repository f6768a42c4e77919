"""The built-in MoE study (spec/moe_study.toml): it loads as a study without arms answering for two
mixtures of experts beside a dense model, its quality for all three is one document's absolute score
(the Qwen3 technical report's IFEval), its grid searches expert and attention-data parallelism, and its
winners name the parallelism."""

from __future__ import annotations

import pandas as pd
import pytest

from pareto_atlas.spec.cards import shipped_models
from pareto_atlas.spec.study import BUILTIN, load_study, study_ref

DENSE = "qwen3-32b"
MOE = ("qwen3-30b-a3b", "qwen3-235b-a22b")
# IFEval strict prompt, non-thinking, as the Qwen3 technical report prints it (Tables 16, 14, 12)
IFEVAL = {"qwen3-30b-a3b": 83.7, "qwen3-32b": 83.2, "qwen3-235b-a22b": 83.2}
REPORT = "QwenLM/Qwen3:Qwen3_Technical_Report.pdf@728493158d0eca1acab0948ac3b9e2b533b14d08"


def test_moe_is_a_builtin_without_arms_answering_for_two_moe_models_beside_a_dense_one():
    study = load_study("moe")
    assert BUILTIN["moe"] == "moe_study.toml" and study_ref(study) == "moe"
    assert not study.arms and not study.measures  # build measures nothing: published evidence only
    assert study.model.card == DENSE and study.engine.name == "vllm"
    cards = {t.name: t.card or study.model.card for t in study.targets}
    models = shipped_models()
    assert sum(models[c].is_moe for c in cards.values()) >= 2 and not models[cards[DENSE]].is_moe
    # every model answers the same workload, so the atlas sets them side by side
    assert len({tuple(w.name for w in t.workloads or ()) for t in study.targets}) == 1
    assert {"H100-SXM", "H200"} <= set(study.simulate.hardware)
    assert study.quality.task == "ifeval" and all(study.prices[h] > 0 for h in study.simulate.hardware)
    grid = study.simulate.grid
    assert {1, 2, 4, 8} <= set(grid.tp) and {2, 4, 8} <= set(grid.ep) and {2, 4, 8} <= set(grid.attn_dp)


@pytest.mark.parametrize("model", sorted(IFEVAL))
def test_each_model_at_16_bits_is_its_own_reference_with_the_reports_absolute_score(model):
    from pareto_atlas.quality.published import guard_choice, published_for

    g = guard_choice(published_for(model, "BF16"), "ifeval")
    assert g is not None and not g.informational and g.source == REPORT
    assert (g.benchmark, g.score, g.n_items) == ("ifeval", IFEVAL[model], 541)
    assert g.rel == g.rel_lo == g.rel_hi == 1.0 and g.q == pytest.approx(IFEVAL[model] / 100)


def test_the_grid_searches_expert_and_attention_data_parallelism_for_the_moe_cards_only():
    from pareto_atlas.simulate.stage import study_space
    from pareto_atlas.spec.cards import shipped_hardware

    study = load_study("moe")
    hw = [shipped_hardware()[h] for h in study.simulate.hardware]
    moe = study_space(study, hw, shipped_models()[MOE[0]], budget=10**9).knobs
    dense = study_space(study, hw, shipped_models()[DENSE], budget=10**9).knobs
    assert {k.ep for k in moe} >= {1, 2, 4, 8} and {k.attn_dp for k in moe} >= {1, 2, 4, 8}
    assert {k.gpus() for k in moe} == {1, 2, 4, 8}  # 1-8 GPUs a replica, one node
    assert {k.ep for k in dense} == {1} and {k.attn_dp for k in dense} == {1}  # a dense card has no experts


def test_a_winners_deployment_names_ep_attention_dp_and_the_gpus():
    from pareto_atlas.atlas.winners import deployment_words

    point = pd.Series({"weights": "F16", "tp": 1, "attn_dp": 8, "ep": 8, "hardware": "H200"})
    words = deployment_words(point)
    assert "attention-DP8" in words and "EP8" in words and "8 \u00d7 H200" in words
