"""Models as an axis: cards from a config.json or a GGUF header, a study's [[targets]], the error
bar a point carried to another model gets, the quality ladder, and winners per (model, workload)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pareto_atlas.atlas.regimes import Regime
from pareto_atlas.atlas.winners import winners
from pareto_atlas.simulate.params import CalibParams
from pareto_atlas.simulate.space import Workload
from pareto_atlas.simulate.targets import SPEED_PROJECTED, Target, carried_params, study_targets
from pareto_atlas.spec.cards import (
    CardError,
    HardwareCard,
    model_card_from_hf_config,
    resolve_model_card,
    shipped_hardware,
    shipped_models,
)
from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.spec.study import StudyError, load_study, parse_study
from pareto_atlas.store.ladder import CARRY_WIDENING, target_quality

LLAMA_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "tie_word_embeddings": False,
    "head_dim": 128,
}


def test_config_json_gives_the_shipped_card_of_the_same_model(tmp_path: Path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_CONFIG))
    card = model_card_from_hf_config(tmp_path, name="llama")
    shipped = shipped_models()["llama-3.1-8b"]
    for f in ("n_layers", "hidden", "n_heads", "n_kv_heads", "head_dim", "intermediate", "vocab", "tied_embeddings"):
        assert getattr(card, f) == getattr(shipped, f), f
    assert card.n_params == shipped.n_params and card.source.startswith("config:")


def test_multimodal_config_reads_its_text_model(tmp_path: Path):
    p = tmp_path / "mm.json"
    p.write_text(json.dumps({"model_type": "mm", "text_config": LLAMA_CONFIG, "vision_config": {"hidden_size": 1}}))
    assert resolve_model_card(str(p)).hidden == 4096


@pytest.mark.parametrize(
    "change, words",
    [
        ({"hidden_size": None}, "hidden"),
        ({"num_hidden_layers": "32"}, "must be an integer"),
        ({"hidden_size": 40960000000}, "outside"),
        ({"num_key_value_heads": 5}, "multiple"),
        ({"tie_word_embeddings": "yes"}, "true or false"),
        ({"num_hidden_layers": True}, "must be an integer"),
    ],
)
def test_bad_config_is_one_line_naming_the_field(tmp_path: Path, change: dict, words: str):
    cfg = {**LLAMA_CONFIG, **change}
    cfg = {k: v for k, v in cfg.items() if v is not None}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    with pytest.raises(CardError) as e:
        model_card_from_hf_config(p)
    assert words in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("text", ["", "[1, 2]", "{", "\x00\xff"])
def test_unreadable_config_is_a_card_error(tmp_path: Path, text: str):
    p = tmp_path / "config.json"
    p.write_bytes(text.encode("latin-1"))
    with pytest.raises(CardError):
        resolve_model_card(str(p))


def test_unknown_card_names_what_is_allowed(tmp_path: Path):
    with pytest.raises(CardError, match="shipped card"):
        resolve_model_card("no-such-model")
    with pytest.raises(CardError, match="no such GGUF"):
        resolve_model_card(str(tmp_path / "x.gguf"))


STUDY = """
name = "t"
[model]
name = "smollm2-135m-instruct"
card = "smollm2-135m"
[[arms]]
name = "a"
weights = "Q4_1"
[simulate]
hardware = ["this-cpu", "L4", "H100-SXM"]
"""


def test_targets_parse_and_resolve(tmp_path: Path):
    (tmp_path / "cfg.json").write_text(json.dumps(LLAMA_CONFIG))
    s = parse_study(
        STUDY
        + """
[[targets]]
name = "smollm2-135m-instruct"
hardware = ["this-cpu"]
[[targets]]
name = "my-llama"
card = "cfg.json"
hardware = ["L4"]
workloads = [{ name = "chat-512-128", prompt_tokens = 512, output_tokens = 128 }]
""",
        base=tmp_path,
    )
    hw = [HardwareCard("this-cpu", "cpu", 12.0, {"fp32": 0.06})] + [shipped_hardware()[h] for h in ("L4", "H100-SXM")]
    measured = shipped_models()["smollm2-135m"]
    ts = study_targets(s, measured, hw, [Workload("p64", 64, 8)])
    assert [t.name for t in ts] == ["smollm2-135m-instruct", "my-llama"]
    assert ts[0].measured and not ts[1].measured and [h.name for h in ts[0].hardware] == ["this-cpu"]
    assert [h.name for h in ts[1].hardware] == ["L4"] and ts[1].workloads[0].prompt_tokens == 512
    assert ts[1].card.hidden == 4096 and ts[1].card.name == "my-llama"


@pytest.mark.parametrize(
    "extra, words",
    [
        ('[[targets]]\nname = "other"\n', "targets.0.card"),
        ('[[targets]]\nname = "x"\ncard = "llama-3.1-8b"\nhardware = ["H200"]\n', "not in [simulate] hardware"),
        (
            '[[targets]]\nname = "x"\ncard = "llama-3.1-8b"\n[[targets]]\nname = "x"\ncard = "llama-3.1-8b"\n',
            "named twice",
        ),
        ('[[targets]]\nname = "x"\ncard = "llama-3.1-8b"\nhardware = []\n', "empty list"),
    ],
)
def test_bad_targets_are_one_line(extra: str, words: str):
    with pytest.raises(StudyError) as e:
        parse_study(STUDY + extra)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_without_targets_the_measured_model_answers_everywhere():
    s = parse_study(STUDY)
    hw = [shipped_hardware()["L4"]]
    ts = study_targets(s, shipped_models()["smollm2-135m"], hw, [Workload("w", 64, 8)])
    assert len(ts) == 1 and ts[0].measured and ts[0].hardware == tuple(hw)


def test_the_default_study_calibrates_this_cpu_on_two_model_sizes():
    # one size cannot tell a step's fixed cost from its cost per weight, nor measure how far its fit
    # carries: the default measures a second size, for speed only (quality scores the study's model)
    from pareto_atlas.measure.model_card import anchor_cards

    s = load_study("default")
    arms = pd.DataFrame([{"model": a.model.name if a.model else None, "weights": a.weights} for a in s.arms])
    cards = {c.name for c in anchor_cards(s, arms)}
    assert len(cards) >= 2 and "qwen2.5-0.5b" in cards
    assert all(not a.quality for a in s.arms if a.model is not None)
    assert not {a.model.name for a in s.arms if a.model} & {t.name for t in s.targets}  # evidence, not a target


def test_default_study_answers_for_a_gpu_sized_model_on_gpus():
    s = load_study("default")
    by = {t.name: t for t in s.targets}
    assert by[s.model.name].hardware == ["this-cpu"]
    gpu = [t for t in s.targets if t.name != s.model.name]
    assert gpu and all("this-cpu" not in t.hardware for t in gpu)
    assert all(shipped_models()[t.card].n_params > 5e9 for t in gpu)


def _target(card: str = "qwen2.5-7b", measured: bool = False) -> Target:
    c = shipped_models()[card]
    return Target(card, c, (shipped_hardware()["L4"],), (Workload("w", 512, 128),), measured)


def test_a_carried_point_takes_the_measured_transfer_error():
    p = CalibParams(lat_rel_err=0.1, thr_rel_err=0.2, provenance="calibrated on 9 published anchors")
    t = _target()
    assert carried_params(p, t, {"qwen2.5-7b"}) is p  # the fit saw this model
    assert carried_params(p, replace(t, measured=True), set()) is p
    m = carried_params(replace(p, xfer_lat_rel_err=0.3, xfer_thr_rel_err=0.05), t, {"llama-3.1-8b", "qwen2.5-1.5b"})
    assert m.lat_rel_err == 0.3 and m.thr_rel_err == 0.2  # the measured transfer error, never narrower than within
    assert "carried to qwen2.5-7b" in m.provenance and "leave-one-model-out" in m.provenance
    assert SPEED_PROJECTED not in m.provenance


def test_a_fit_on_one_size_projects_a_point_of_another_instead_of_inventing_its_bar():
    from pareto_atlas.atlas.evidence import StudyRef, confirm_command, evidence_ok, speed_evidence

    p = CalibParams(lat_rel_err=0.1, thr_rel_err=0.2, provenance="calibrated on 11 measured anchors")
    one = carried_params(p, _target("qwen2.5-1.5b"), {"qwen2.5-0.5b"}, "this-cpu", "default")
    # no multiple of the within-model bar stands for the unmeasured transfer error
    assert (one.lat_rel_err, one.thr_rel_err) == (0.1, 0.2)
    assert SPEED_PROJECTED in one.provenance and "1 model size(s) (qwen2.5-0.5b)" in one.provenance
    pts = pd.DataFrame(
        [
            {
                "model": "qwen2.5-1.5b",
                "hardware": "this-cpu",
                "provenance": "simulated",
                "weights": "Q4_K_M",
                "calib_provenance": one.provenance,
                "quality_evidence": "published",
            },
            {
                "model": "qwen2.5-1.5b",
                "hardware": "this-cpu",
                "provenance": "simulated",
                "weights": "Q4_K_M",
                "calib_provenance": p.provenance,
                "quality_evidence": "published",
            },
        ]
    )
    assert list(speed_evidence(pts)) == ["prior", "calibrated"]  # projected: it cannot win
    assert list(evidence_ok(pts)) == [False, True]
    cmd = confirm_command(pts.iloc[0], StudyRef("default", model="qwen2.5-coder-0.5b-instruct"))
    assert cmd.startswith("measure a second size") and "pareto-atlas measure default --arm smol-q4_0" in cmd


def test_an_instruct_card_counts_as_the_fitted_base_architecture():
    p = CalibParams(lat_rel_err=0.1, thr_rel_err=0.2)
    t = replace(_target(), name="qwen2.5-7b-instruct", card=replace(_target().card, name="qwen2.5-7b-instruct"))
    assert carried_params(p, t, {"qwen2.5-7b"}) is p


def _qt(rel: float, lo: float, hi: float) -> dict:
    base = Knobs(weights="Q4_K_M")
    return {
        base.quality_key(): {"arm": "base", "p": 0.4, "lo": 0.3, "hi": 0.5, "rel": 1.0, "rel_lo": 1.0, "rel_hi": 1.0},
        Knobs(weights="Q4_0").quality_key(): {
            "arm": "q4_0",
            "p": 0.36,
            "lo": 0.26,
            "hi": 0.46,
            "rel": rel,
            "rel_lo": lo,
            "rel_hi": hi,
        },
    }


def test_ladder_reference_prior_carried_and_unmeasured():
    study = load_study("default")
    gpu = _target("qwen2.5-7b")
    ref = target_quality(Knobs(weights="BF16"), gpu, "gpu", study, {}, "gsm8k")
    assert ref.evidence in ("reference",) and ref.rel == ref.rel_lo == ref.rel_hi == 1.0
    assert target_quality(Knobs(weights="F16"), gpu, "gpu", study, {}, "gsm8k").rel == 1.0
    fp8 = target_quality(Knobs(weights="FP8"), gpu, "gpu", study, {}, "gsm8k")
    assert fp8.evidence in ("published", "prior")
    assert fp8.rel_lo < fp8.rel_hi  # never zero-width
    # a CPU target of the measured model's family carries its measured effect, twice as wide
    cpu = _target("qwen2.5-1.5b")
    q = target_quality(Knobs(weights="Q4_0"), cpu, "cpu", study, _qt(0.9, 0.8, 1.0), "gsm8k")
    assert q.evidence == "carried" and q.rel == 0.9
    assert math.isclose(q.rel_lo, 0.9 - CARRY_WIDENING * 0.1) and math.isclose(q.rel_hi, 0.9 + CARRY_WIDENING * 0.1)
    # another family carries nothing
    other = replace(cpu, card=replace(cpu.card, family="llama-3.1"))
    assert target_quality(Knobs(weights="Q4_0"), other, "cpu", study, _qt(0.9, 0.8, 1.0), "gsm8k").evidence != "carried"
    # a KV cache nobody measured for this model is unmeasured
    assert target_quality(Knobs(weights="BF16", kv="fp8"), gpu, "gpu", study, {}, "gsm8k").evidence in (
        "unmeasured",
        "published",
        "prior",
    )


def _pts(model: str, hw: str, labels: list[str], tpot: list[float]) -> pd.DataFrame:
    n = len(labels)
    return pd.DataFrame(
        {
            "point_id": [f"{model}-{hw}-{i}" for i in range(n)],
            "label": labels,
            "model": model,
            "hardware": hw,
            "workload": "w",
            "provenance": "simulated",
            "tpot_p99_ms": tpot,
            "ttft_p99_ms": 10.0,
            "throughput_tok_s": 100.0,
            "cost_per_mtok": 1.0,
            "quality": 0.5,
            "quality_rel": 1.0,
            "quality_rel_lo": 1.0,
            "quality_rel_hi": 1.0,
            "quality_evidence": "reference",
            "quality_provenance": "reference",
            "n_opts": 0,
            "optimizations": "",
            "feasible": True,
            "lat_rel_err": 0.1,
            "thr_rel_err": 0.1,
            "batching": "continuous",
            "calib_provenance": "calibrated on 3 published anchors",
        }
    )


def test_winners_are_per_model_and_a_model_only_wins_where_it_has_points():
    pts = pd.concat(
        [
            _pts("small", "this-cpu", ["a", "b"], [50.0, 40.0]),
            _pts("big", "L4", ["c", "d"], [20.0, 30.0]),
            _pts("big", "H100-SXM", ["e"], [5.0]),
        ],
        ignore_index=True,
    )
    cells = winners(pts, [Regime("tight", "tpot_p99_ms", "min", quality_floor=0.95)])
    assert set(cells.model) == {"small", "big"}
    small = cells[cells.model == "small"]
    assert set(small.hardware) == {"this-cpu", "all"} and set(small.label) == {"b"}
    big_all = cells[(cells.model == "big") & (cells.hardware == "all")]
    assert big_all.label.tolist() == ["e"]
    assert np.isin(cells[cells.model == "small"].point_id, pts[pts.model == "small"].point_id).all()


def test_published_checkpoints_reach_the_ladder():
    study = load_study("default")
    qwen = replace(_target("qwen2.5-7b"), name="qwen2.5-7b-instruct")
    w8 = target_quality(Knobs(weights="W8A8"), qwen, "gpu", study, {}, "gsm8k")
    assert w8.evidence == "published" and w8.provenance.startswith("published:")
    assert w8.rel_lo < w8.rel < w8.rel_hi and 0 < w8.q < 1
    llama = _target("llama-3.1-8b")
    fp8 = target_quality(Knobs(weights="FP8"), llama, "gpu", study, {}, "gsm8k")
    assert fp8.evidence == "published"
    ref = target_quality(Knobs(weights="F16"), llama, "gpu", study, {}, "gsm8k")
    assert ref.evidence == "reference" and ref.rel == 1.0 and 0 < ref.q < 1  # the published baseline's score


def test_models_side_by_side_compare_absolute_scores():
    from pareto_atlas.atlas.tables import models_side_by_side

    a = _pts("small", "L4", ["a"], [10.0]).assign(quality=0.3)
    b = _pts("big", "L4", ["b"], [20.0]).assign(quality=0.8)
    cells = winners(pd.concat([a, b], ignore_index=True), [Regime("tight", "tpot_p99_ms", "min", quality_floor=0.95)])
    side = models_side_by_side(cells)
    assert side.model.tolist() == ["big", "small"]  # ranked on the absolute score, not on quality_rel
    only = winners(a, [Regime("tight", "tpot_p99_ms", "min", quality_floor=0.95)])
    assert models_side_by_side(only).empty  # one model per workload: nothing to compare


def test_a_prior_never_invents_an_absolute_score():
    from pareto_atlas.store.quality import Quality

    nan = Quality(float("nan"), float("nan"), float("nan"), 1.0, 1.0, 1.0, "", "prior").scaled(0.9, 0.8, 1.0)
    assert nan.q != nan.q and nan.hi != nan.hi  # min(1, nan) would have said 1.0
    study = load_study("default")
    qwen = replace(_target("qwen2.5-7b"), name="qwen2.5-7b-instruct")
    q = target_quality(Knobs(weights="FP8", eviction="h2o", kv_keep=0.5), qwen, "gpu", study, {}, "gsm8k")
    assert q.evidence == "prior" and (q.q != q.q or q.q < 1.0)


def test_sparse_attention_does_not_borrow_its_core_checkpoints_published_score():
    study = load_study("default")
    qwen = replace(_target("qwen2.5-7b"), name="qwen2.5-7b-instruct")
    core = target_quality(Knobs(weights="W8A8"), qwen, "gpu", study, {}, "gsm8k")
    sparse = target_quality(Knobs(weights="W8A8", sparse_budget=0.25), qwen, "gpu", study, {}, "gsm8k")
    assert core.evidence == "published" and sparse.evidence == "prior"
    assert sparse.rel_lo < core.rel_lo  # the prior's interval multiplies in


def test_a_question_is_one_frozen_value_about_one_model_and_workload():
    from pareto_atlas.atlas.constraints import ConstraintError
    from pareto_atlas.atlas.pick import pick
    from pareto_atlas.atlas.question import Question

    pts = pd.concat(
        [_pts("small", "L4", ["a", "b"], [50.0, 40.0]), _pts("big", "L4", ["c", "d"], [20.0, 30.0])], ignore_index=True
    )
    q = Question.make("ttft_p99_ms<=100, quality_rel>=0.9", "tpot_p99_ms")
    assert q.direction == "min" and q.quality_floor == 0.9  # a stated floor is the guard's
    with pytest.raises(Exception):
        q.objective = "x"  # frozen
    assert pick(pts, question=q.about(model="small")).winner["label"] == "b"
    assert pick(pts, question=q.about(model="big")).winner["label"] == "c"
    assert pick(pts, question=q).winner["label"] == "c"  # both models pooled when none is named
    with pytest.raises(ConstraintError, match="known: big, small"):
        pick(pts, question=q.about(model="huge"))
    with pytest.raises(ConstraintError, match="objective"):
        Question.make(None, "speed")


def test_a_size_measured_for_the_fit_alone_is_not_a_point_of_the_atlas(monkeypatch):
    # the default study's SmolLM2 anchors calibrate this CPU; the atlas answers for its targets only
    import pareto_atlas.store.points as P

    rows = pd.DataFrame(
        [
            {"model": "qwen2.5-coder-0.5b-instruct", "model_card": "measured here", "arm": "q4km"},
            {"model": "smollm2-135m-instruct", "model_card": "measured here", "arm": "smol-q4_0"},
            {"model": "llama-3.1-8b", "model_card": "imported", "arm": "peer"},
        ]
    )
    monkeypatch.setattr(P, "measured_points", lambda study, store: rows.copy())

    class NoSims:
        def sim_points(self, study):
            return pd.DataFrame()

    assert list(P.all_points(load_study("default"), NoSims()).arm) == ["q4km", "peer"]
    # a study without [[targets]] answers for every model it measured, as before
    assert len(P.all_points(load_study("sizes"), NoSims())) == 3
