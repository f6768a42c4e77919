"""The built-in MoE study (spec/moe_study.toml): it loads as a study without arms answering for two
mixtures of experts beside a dense model, its quality for all three is one document's absolute score
(the Qwen3 technical report's IFEval), its grid searches expert and attention-data parallelism, and its
winners name the parallelism."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest

from pareto_atlas.spec.cards import shipped_models
from pareto_atlas.spec.study import BUILTIN, load_study, study_ref

DENSE = "qwen3-32b"
MOE = ("qwen3-30b-a3b", "qwen3-235b-a22b")
# IFEval strict prompt, non-thinking, as the Qwen3 technical report prints it (Tables 16, 14, 12)
IFEVAL = {"qwen3-30b-a3b": 83.7, "qwen3-32b": 83.2, "qwen3-235b-a22b": 83.2}
BUILTIN_DIR = Path(__file__).resolve().parents[2] / "src" / "pareto_atlas" / "spec"
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


@pytest.mark.parametrize(
    ("field", "values", "bad"), [("ep", "[1, 16]", 16), ("attn_dp", "[1, 16]", 16), ("tp", "[1, 2, 16]", 16)]
)
def test_a_grid_value_no_searched_layout_takes_is_one_line_not_an_empty_search(tmp_path, field, values, bad):
    """ep = [1, 16] is a power of two, but no layout of one node takes it: the study said nothing and
    simulated no expert-parallel point at all. Now reading the study names the field and the values its
    layouts take (spec.layout), before `build` runs anything."""
    from pareto_atlas.spec.cards import shipped_hardware
    from pareto_atlas.spec.layout import check_grid_layouts
    from pareto_atlas.spec.study import StudyError

    text = Path(BUILTIN_DIR, BUILTIN["moe"]).read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith(f"{field} = ["))
    path = tmp_path / "moe16.toml"
    path.write_text(text.replace(line, f"{field} = {values}"))
    with pytest.raises(StudyError, match=rf"grid\.{field}: {bad} is in no searched layout; {field} takes 1, 2, 4, 8 "):
        load_study(path)
    for name in BUILTIN:  # every shipped study's grid is one its layouts take
        grid = load_study(name).simulate.grid
        check_grid_layouts({f: getattr(grid, f) for f in ("tp", "pp", "ep", "attn_dp")}, 8)
    assert shipped_hardware()["H200"].gpus_per_node == 8


def test_expert_or_attention_dp_on_dense_models_alone_is_one_line_before_any_fit(tmp_path):
    """The moe study cut to its dense model keeps ep and attn_dp = [1, 2, 4, 8]: those layouts exist
    for cards with experts only, so the build simulated 840 one-GPU and TP points and said nothing of
    the values it ignored. Now the simulate stage refuses it before reading any fit."""
    from rich.console import Console

    from pareto_atlas.simulate.stage import simulate_study
    from pareto_atlas.store import Store

    text = Path(BUILTIN_DIR, BUILTIN["moe"]).read_text()
    for name in MOE:
        block = text[text.index(f'[[targets]]\nname = "{name}"') :]
        text = text.replace(block[: block.index("\n\n") + 2], "")
    path = tmp_path / "dense.toml"
    path.write_text(text)
    study = load_study(path)
    assert [t.name for t in study.targets] == [DENSE] and 8 in study.simulate.grid.attn_dp
    with Store(tmp_path / "store.duckdb") as store:
        with pytest.raises(ValueError, match=r"^simulate\.grid\.ep: 2 splits a mixture of experts .*\(qwen3-32b\)"):
            simulate_study(study, store, Console(file=io.StringIO()))


def test_the_layouts_a_card_cannot_split_are_named_not_dropped_in_silence(tmp_path):
    """A config.json MoE of 60 experts under the moe study's grid: its EP8 layouts cannot exist (8 does not
    divide 60) and the simulator keeps them out of its space; the stage now names them and why."""
    import json

    from pareto_atlas.simulate.space import unfit_layouts
    from pareto_atlas.simulate.stage import study_space
    from pareto_atlas.spec.cards import resolve_model_card, shipped_hardware

    cfg = json.loads((Path(__file__).parents[1] / "data" / "hf_configs" / "qwen3-30b-a3b.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(cfg | {"num_experts": 60}))
    card = resolve_model_card(str(tmp_path / "config.json"), name="moe60")
    study = load_study("moe")
    assert unfit_layouts(study.simulate.grid, card) == {"ep: 8 does not divide moe60's 60 experts": 4}
    hw = [shipped_hardware()[h] for h in study.simulate.hardware]
    kept = study_space(study, hw, card, budget=10**9)
    eps = {k.ep for k, _ in kept.pairs()}
    assert {1, 2, 4} <= eps and 8 not in eps
    assert all(not unfit_layouts(study.simulate.grid, shipped_models()[m]) for m in (DENSE, *MOE))


def test_a_winners_deployment_names_ep_attention_dp_and_the_gpus():
    from pareto_atlas.atlas.winners import deployment_words

    point = pd.Series({"weights": "F16", "tp": 1, "attn_dp": 8, "ep": 8, "hardware": "H200"})
    words = deployment_words(point)
    assert "attention-DP8" in words and "EP8" in words and "8 \u00d7 H200" in words


def small_moe(hardware: tuple[str, ...] = ("H200",)):
    """The MoE study on a grid small enough for the default suite: 16-bit weights, one and 64 clients,
    20 requests a point; its models, workload, regimes and parallel layouts as shipped."""
    s = load_study("moe")
    grid = s.simulate.grid.model_copy(update={"weights": ["F16"], "batching": ["continuous"], "slots": [8, 64]})
    sim = s.simulate.model_copy(
        update={"hardware": list(hardware), "concurrency": [1, 64], "utilization": [], "n_requests": 20, "grid": grid}
    )
    return s.model_copy(update={"simulate": sim})


def stand_in(card: str):
    """A card's uncalibrated defaults with a leave-one-model-out bar stated (±50 %), so its points are
    carried to the study's models rather than projected: what is checked with it is how winners are
    named and compared, not how fast they are."""
    from dataclasses import replace

    from pareto_atlas.simulate.params import default_params
    from pareto_atlas.spec.cards import shipped_hardware

    p = default_params(shipped_hardware()[card], "vllm")
    return replace(p, xfer_lat_rel_err=0.5, xfer_thr_rel_err=0.5, provenance="uncalibrated defaults (test)")


def _answer(study, path, calibrated: bool):
    from rich.console import Console

    import pareto_atlas.calibrate.published_stage as ps
    from pareto_atlas.atlas.stage import study_answer
    from pareto_atlas.simulate.stage import simulate_study
    from pareto_atlas.store import Store

    store = Store(path / "store.duckdb")
    with pytest.MonkeyPatch.context() as mp:
        if not calibrated:  # each card's uncalibrated defaults, carried to these models with a stated bar
            mp.setattr(ps, "published_params", lambda study, store, con, cards, **k: {h: stand_in(h) for h in cards})
        simulate_study(study, store, Console(quiet=True))
        answer = study_answer(study, store)
    store.close()
    return answer


def _won(answer) -> pd.DataFrame:
    cells = answer.cells
    return cells[cells.point_id.fillna("").astype(bool)]


@pytest.fixture(scope="module")
def answer(tmp_path_factory):
    """The small MoE study simulated once and answered on each card's uncalibrated defaults (stand_in): the published fit with its links
    takes minutes on 2 cores, and what is checked here is how winners are named and compared, which
    does not depend on it (the slow test below runs the fits)."""
    return _answer(small_moe(), tmp_path_factory.mktemp("moe"), calibrated=False)


def test_the_winners_name_their_gpus_and_an_moe_wins_on_the_dense_models_score(answer):
    from pareto_atlas.atlas.tables import models_side_by_side

    won = _won(answer)
    won = won[won.hardware == "all"]
    assert set(won.model) == {DENSE, *MOE}
    several = won[won.deployment.fillna("") != ""]  # a winner on several GPUs names them and its layout
    assert len(several) and several.deployment.str.contains("\u00d7 H200").all()
    # side by side on the task's absolute score: an MoE winner at least as good as the dense model's,
    # for less per token in some regime
    side = models_side_by_side(answer.cells)
    dense = side[side.model == DENSE].set_index("regime")
    wins = [
        (r.regime, r.model)
        for r in side[side.model.isin(MOE)].itertuples()
        if r.regime in dense.index
        and r.quality >= dense.loc[r.regime, "quality"]
        and r.cost_per_mtok < dense.loc[r.regime, "cost_per_mtok"]
    ]
    assert wins, side[["regime", "model", "quality", "cost_per_mtok"]].to_string()


@pytest.mark.slow
def test_on_the_published_fits_an_moe_winner_serves_with_expert_and_attention_data_parallelism(tmp_path):
    """With each card's fit on the published anchors and its link on the published multi-GPU rows (as
    `build moe` runs), expert parallelism with attention-DP wins somewhere for an MoE model, and its
    deployment says so (the full build: Qwen3-235B-A22B's throughput and cost on 8 H100-SXM, and
    Qwen3-30B-A3B's tight latency on 8 H200, both attention-DP8 EP8)."""
    won = _won(_answer(small_moe(("H100-SXM", "H200")), tmp_path, calibrated=True))
    layouts = won[won.model.isin(MOE)].deployment.fillna("")
    assert layouts.str.contains("attention-DP\\d EP\\d").any(), list(layouts)
    assert not won[won.model == DENSE].deployment.fillna("").str.contains("EP").any()  # a dense card has no experts


def test_a_score_on_a_published_fallback_names_its_benchmark_and_is_not_ranked_beside_another_task(tmp_path):
    """gpt-oss-120b has no published IFEval: its guard falls back to MMLU (quality.published.guard_choice),
    so its points carry `quality_benchmark` mmlu beside Qwen's ifeval, and the models side by side say
    the two scores rest on different benchmarks instead of ranking 0.900 beside 0.837 as one task's."""
    from dataclasses import replace

    from pareto_atlas.atlas.tables import mixed_task_lines, models_side_by_side
    from pareto_atlas.simulate.targets import study_targets
    from pareto_atlas.spec.cards import shipped_hardware
    from pareto_atlas.store import Store
    from pareto_atlas.store.ladder import attach_target_quality

    study = load_study("moe")
    hw = [shipped_hardware()["H200"]]
    qwen = next(t for t in study_targets(study, shipped_models()[DENSE], hw, []) if t.name == MOE[0])
    oss = replace(qwen, name="gpt-oss-120b", card=shipped_models()["gpt-oss-120b"])
    knobs = {"weights": "F16", "kv": "f16", "eviction": "none", "kv_keep": 1.0, "sparse_budget": 1.0}
    points = pd.DataFrame([{**knobs, "hardware": "H200", "workload": "chat-1024-1024"}])
    store = Store(tmp_path / "store.duckdb")
    scored = {t.name: attach_target_quality(points, t, study, store).iloc[0] for t in (qwen, oss)}
    store.close()
    assert scored[MOE[0]].quality_benchmark == "ifeval" and scored["gpt-oss-120b"].quality_benchmark == "mmlu"
    assert {r.quality_task for r in scored.values()} == {"ifeval"}  # both still guarded by the study's task
    cells = pd.DataFrame(
        [
            {**r.to_dict(), "model": m, "regime": "low-cost", "hardware": "all", "point_id": m, "label": "x"}
            for m, r in scored.items()
        ]
    )
    side = models_side_by_side(cells).set_index("model")
    assert side.loc["gpt-oss-120b", "score_task"] == "mmlu" and side.loc[MOE[0], "score_task"] == "ifeval"
    (line,) = mixed_task_lines(models_side_by_side(cells))
    assert "gpt-oss-120b on mmlu" in line and f"{MOE[0]} on ifeval" in line and "not comparable" in line
