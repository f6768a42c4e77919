"""The MoE fit on published rows (calibrate.published_moe): it recovers a routing skew from rows the
product's own cost model generated at that skew, its held-out report names each scheme and model,
and the fitted skew and bar reach a simulated MoE point."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from pareto_atlas.calibrate.fit import TARGETS, _anchors, predict
from pareto_atlas.calibrate import published_moe
from pareto_atlas.calibrate.published_moe import SKEWS, calibrate_moe, moe_frame, report_lines, with_moe
from pareto_atlas.calibrate.published_readers import table_row
from pareto_atlas.calibrate.published_table import PublishedTable
from pareto_atlas.simulate.api import simulate_point
from pareto_atlas.simulate.cost_model import coeffs
from pareto_atlas.simulate.params import default_params
from pareto_atlas.spec.cards import shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs

CARD = "H200"


@pytest.fixture(autouse=True, scope="module")
def _no_operator_law():
    """The grid's own terms (the rows below are generated with them): aiconfigurator's operator law
    (simulate.moe_law) would price H200's MXFP4 and FP8 layers in their place (test_moe_operators)."""
    from pareto_atlas.simulate import moe_law

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(moe_law, "MODE", "off")
        yield


TRUE_SKEW = 0.8
TRUE = (TRUE_SKEW, 50e-6, 0.5)  # skew, s per MoE layer a step, expert GEMM efficiency
# the fit's grid cut to every skew around the truth's other two terms (the full grid is 60 points)
SUB_GRID = tuple((s, ls, fe) for s in SKEWS for ls in (0.0, 50e-6, 100e-6) for fe in (1.0, 0.5))
# (model, tp, attn_dp, ep): two MoE cards, so leaving one model out has a model to fit on
LAYOUTS = (("qwen3-235b-a22b", 4, 1, 4), ("gpt-oss-120b", 2, 1, 2))


def _rows() -> pd.DataFrame:
    out = []
    for model, tp, adp, ep in LAYOUTS:
        for conc in (2, 8, 32):
            out.append(
                table_row(
                    source_id="synthetic",
                    source="https://github.com/x/y/blob/" + "0" * 40 + "/z.csv",
                    date="undated",
                    engine="vllm",
                    gpu=CARD,
                    model=model,
                    weights="FP8",
                    kv="unstated",
                    prompt_tokens=2048,
                    output_tokens=64,
                    load="concurrency",
                    load_value=conc,
                    stat="unstated",
                    ttft_ms=1,
                    tpot_ms=1,
                    tp=tp,
                    n_gpus=tp * adp,
                )
                | {"ep": str(ep), "attn_dp": str(adp), "origin": "synthetic"}
            )
    return pd.DataFrame(out)


@pytest.fixture(scope="module")
def fitted():
    hw = shipped_hardware()[CARD]
    base = default_params(hw, "vllm")
    rows = _rows()
    frame, models = moe_frame(rows, hw)
    truth = predict(
        _anchors(frame), models, hw, replace(base, routing_skew=TRUE[0], moe_layer_s=TRUE[1], moe_flops_eff=TRUE[2])
    )
    rows["ttft_ms"] = [f"{v:.6f}" for v in truth[:, TARGETS.index("ttft_p50_ms")]]
    rows["tpot_ms"] = [f"{v:.6f}" for v in truth[:, TARGETS.index("tpot_p50_ms")]]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(published_moe, "GRID", SUB_GRID)
        table = PublishedTable(rows, ("synthetic",), "x")
        cal = calibrate_moe(table, {CARD: {"vllm": base}}, {CARD: "defaults"}, k=10)[CARD]
    return cal, base


def test_recovers_the_skew_it_was_generated_with(fitted):
    cal, _ = fitted
    assert TRUE_SKEW in SKEWS and cal.terms == pytest.approx(TRUE)
    a = cal.anchors
    # within the simulation's step jitter (the fit samples rows in its own order: other seeds)
    assert np.nanmax(np.abs(a[["ttft_p50_ms_fitted", "tpot_p50_ms_fitted"]].to_numpy(float))) < 0.05
    # the other model's rows choose the same skew: held out by model, the error stays ~0
    assert np.nanmax(np.abs(a["tpot_p50_ms_LOMO"].to_numpy(float))) < 0.05
    assert cal.bar_from == "LOMO" and np.isnan(a["tpot_p50_ms_LOSO"].to_numpy(float)).all()


def test_the_bar_is_a_pooled_quantile_from_p90_up_and_is_checked_on_a_split(fitted):
    # the bar covers at least 90 % of the held-out figures it was set on: one of those figures, at the
    # p90 or a higher level (heldout_bar.carried_bar chooses it by leaving one row group out), and is
    # checked on a split of the (source, model) groups: here two, one a side
    cal, _ = fitted
    a = cal.anchors
    lat = np.abs(a[[f"{t}_LOMO" for t in TARGETS if t != "throughput_tok_s"]].to_numpy(float))
    lat = lat[np.isfinite(lat)]
    assert len(lat) and (lat <= cal.lat_bar).mean() >= 0.9
    assert cal.lat_bar >= np.quantile(lat, 0.9, method="inverted_cdf") - 1e-12
    assert np.isclose(lat, cal.lat_bar).any()
    assert np.isfinite(cal.split_coverage).all()
    assert "set on half of the row groups" in "\n".join(report_lines([cal]))


def test_the_skew_matters_to_the_rows(fitted):
    # a fit that could not see the skew would pass the test above by luck: at uniform routing the
    # same rows' TPOT is off by more than a few percent
    cal, base = fitted
    hw = shipped_hardware()[CARD]
    rows = _rows()
    frame, models = moe_frame(rows, hw)
    tpot = TARGETS.index("tpot_p50_ms")

    def at(skew: float) -> np.ndarray:
        p = replace(base, routing_skew=skew, moe_layer_s=TRUE[1], moe_flops_eff=TRUE[2])
        return predict(_anchors(frame), models, hw, p)[:, tpot]

    assert np.max(np.abs(at(1.0) / at(TRUE_SKEW) - 1)) > 0.05


def test_report_lines_name_schemes_models_and_layouts(fitted):
    cal, _ = fitted
    text = "\n".join(report_lines([cal]))
    assert f"{CARD}: MoE terms (skew 0.8, 50 us/MoE layer, expert GEMMs x0.5; fitted on every card's rows)" in text
    assert f"held out on 6 published MoE rows of {CARD}" in text
    assert "LOMO qwen3-235b-a22b" in text and "LOMO gpt-oss-120b" in text
    # one source, one engine: nothing to leave out there; by model, the errors are the jitter's
    assert "LOSO: all 6 rows  n/a / n/a / n/a" in text and "LOEO: all 6 rows  n/a / n/a / n/a" in text
    assert re.search(r"LOMO: all 6 rows  [0-4] % / [0-4] % / n/a", text)
    assert "TP4 EP4" in text and "TP2 EP2" in text and "inside the bar" in text


def test_a_simulated_moe_point_carries_the_fit(fitted):
    cal, base = fitted
    p = with_moe(replace(base, lat_rel_err=0.1, thr_rel_err=0.1), cal)
    hw, m = shipped_hardware()[CARD], shipped_models()["qwen3-235b-a22b"]
    k = Knobs(weights="FP8", tp=4, ep=4, slots=8)
    row = simulate_point(m, hw, k, 256, 64, concurrency=8, n_requests=32, params=p)
    assert row["lat_rel_err"] == pytest.approx(max(cal.lat_bar, 0.1))
    assert "MoE terms (skew 0.8" in row["calib_provenance"]
    uni = simulate_point(m, hw, k, 256, 64, concurrency=8, n_requests=32, params=replace(p, routing_skew=1.0))
    assert uni["tpot_p50_ms"] > row["tpot_p50_ms"] * 1.02
    # a dense model on the same params keeps the dense bar
    dense = simulate_point(
        shipped_models()["llama-3.1-8b"], hw, Knobs(weights="FP8"), 256, 64, concurrency=1, n_requests=8, params=p
    )
    assert dense["lat_rel_err"] == pytest.approx(0.1)
    # and its step costs ignore the MoE terms
    d = shipped_models()["llama-3.1-8b"]
    assert (coeffs(d, hw, Knobs(weights="FP8"), p) == coeffs(d, hw, Knobs(weights="FP8"), base)).all()


def test_an_aiconfigurator_row_is_fitted_as_its_benchmark_ran_it():
    # rows from aiconfigurator's file, generated as its benchmark ran them (its deployment's token
    # budget and sequence limit, the mean over a fresh closed loop: calibrate.published_runs): the fit
    # must simulate them the same way to meet them exactly at the true terms; under the engine's default
    # scheduler and the median reading it misses them
    from pareto_atlas.calibrate.published_runs import AICONFIGURATOR, apply_runs, predict_rows

    hw = shipped_hardware()[CARD]
    base = default_params(hw, "vllm")
    rows = _rows().assign(source_id=AICONFIGURATOR)
    frame, models = moe_frame(rows, hw)
    run_frame, runs = apply_runs(frame, rows)
    assert all(r is not None for r in runs)
    truth = predict_rows(
        run_frame, models, hw, replace(base, routing_skew=TRUE[0], moe_layer_s=TRUE[1], moe_flops_eff=TRUE[2]), runs
    )
    rows["ttft_ms"] = [f"{v:.6f}" for v in truth[:, TARGETS.index("ttft_p50_ms")]]
    rows["tpot_ms"] = [f"{v:.6f}" for v in truth[:, TARGETS.index("tpot_p50_ms")]]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(published_moe, "GRID", SUB_GRID)
        table = PublishedTable(rows, (AICONFIGURATOR,), "x")
        cal = calibrate_moe(table, {CARD: {"vllm": base}}, {CARD: "defaults"}, k=10)[CARD]
    assert cal.terms == TRUE
    fitted = cal.anchors[["ttft_p50_ms_fitted", "tpot_p50_ms_fitted"]].to_numpy(float)
    assert np.nanmax(np.abs(fitted)) < 0.01  # the rows' order sets each one's step-jitter seed


def test_a_card_without_one_gpu_rows_gets_its_own_from_the_multi_gpu_table():
    # B200 has no row in the one-GPU table, but aiconfigurator's aggregated TP1 rows of it are in the
    # multi-GPU table: those (and only those) are its one-GPU table, so its MoE rows run on a dense fit
    # of its own; a card the one-GPU table has (H200) keeps that table's fit
    from pareto_atlas.calibrate.published_moe import own_one_gpu_table
    from pareto_atlas.calibrate.published_table import load_multigpu, load_published

    shipped, multi = load_published(), load_multigpu()
    assert "B200" not in set(shipped.rows.gpu) and "H200" in set(shipped.rows.gpu)
    t = own_one_gpu_table("B200", shipped, multi)
    r = multi.rows
    want = r[(r.gpu == "B200") & (r.n_gpus == "1")]
    assert t is not None and len(t.rows) == len(want) > 0
    assert set(t.rows.gpu) == {"B200"} and set(t.rows.n_gpus) == {"1"} and set(t.rows.prefill_workers) == {"0"}
    assert (
        set(t.rows.engine) == {"trtllm", "vllm"} and t.rows.origin.str.startswith("spec/published_multigpu.csv:").all()
    )
    assert (r[(r.gpu == "B200")].n_gpus != "1").any()  # the table's TP2-8 rows of it stay out
    assert own_one_gpu_table("H200", shipped, multi) is None
    # a one-GPU table that has B200 rows of its own: those are its fit's, not the multi-GPU table's
    with_b200 = PublishedTable(pd.concat([shipped.rows, want], ignore_index=True), shipped.paths, "x")
    assert own_one_gpu_table("B200", with_b200, multi) is None
    # and a card with no one-GPU row anywhere has none
    only_multi = PublishedTable(r[(r.gpu == "B200") & (r.n_gpus != "1")].reset_index(drop=True), multi.paths, "y")
    assert own_one_gpu_table("B200", shipped, only_multi) is None


def test_a_vllm_row_older_than_its_templates_budget_flag_runs_vllms_default_budget():
    # aiconfigurator's deployment templates for vLLM 0.10/0.11 pass no --max-num-batched-tokens: such a
    # row ran vLLM's default budget (8,192 on an 80 GB card), not the rules' clients + prompt + 1,500;
    # its sequence limit and reading stay its run's. A later (or unstated) release, and TensorRT-LLM, keep theirs
    from pareto_atlas.calibrate.published_moe import vllm_default_budget
    from pareto_atlas.calibrate.published_runs import AICONFIGURATOR, apply_runs
    from pareto_atlas.simulate.schedulers import default_policy

    hw = shipped_hardware()["H100-SXM"]
    rows = _rows().assign(source_id=AICONFIGURATOR, prompt_tokens="1024", gpu="H100-SXM")
    rows["engine_version"] = ["0.11.2", "0.18.0", "unstated", "0.10.2", "0.12.0", "0.11.2"]
    rows.loc[5, "engine"] = "trtllm"
    frame, _ = moe_frame(rows, hw)
    ran, runs = apply_runs(frame, rows)
    out, runs2 = vllm_default_budget(ran, rows, runs, hw)
    budget = default_policy("vllm", hw)[1]
    assert budget == 8192
    old = [0, 3]
    for i in range(len(rows)):
        want = budget if i in old else int(ran.loc[i, "chunk_tokens"])
        assert int(out.loc[i, "chunk_tokens"]) == want and runs2[i].chunk_tokens == want
        assert int(out.loc[i, "slots"]) == int(ran.loc[i, "slots"]) and runs2[i].max_seqs == runs[i].max_seqs
    assert all(int(ran.loc[i, "chunk_tokens"]) != budget for i in old)  # the rules' budget was another


def test_dense_fits_give_b200_its_own_fit_and_its_link_over_it(monkeypatch):
    # the wiring only (the fits themselves are calibrate.published's and published_link's): a card the
    # one-GPU table has is fitted there, B200 on its own one-GPU rows, and its link over that fit
    from pareto_atlas.calibrate import published_link, published_moe
    from pareto_atlas.calibrate.published import CardCalibration
    from pareto_atlas.calibrate.published_table import load_multigpu, load_published

    n = len(published_moe.own_one_gpu_table("B200", load_published(), load_multigpu()).rows)
    calls = {}

    def own(table, card):
        calls["own"] = (card, len(table.rows))
        p = replace(default_params(shipped_hardware()[card], "vllm"), overhead_step_s=1e-4)
        return [CardCalibration(card, "vllm", p, table.rows, "", {})]

    def link(table, card, one_gpu, atlas, **kw):
        calls["link"] = (card, one_gpu)
        return "link-of-" + card

    monkeypatch.setattr(published_moe, "own_one_gpu_fits", own)
    monkeypatch.setattr(published_link, "calibrate_link", link)
    monkeypatch.setattr(published_link, "link_calibrations", lambda cards, one_gpu=None: {c: "shipped" for c in cards})
    fitted = []
    ones, links, said = published_moe.dense_fits(["H200", "B200"], fit=lambda t, cards: fitted.append(cards) or [])
    assert fitted == [["H200"]] and calls["own"] == ("B200", n)
    assert ones["B200"][0].params.overhead_step_s == 1e-4 and ones["H200"] == []
    assert calls["link"][0] == "B200" and calls["link"][1][("B200", "vllm")].overhead_step_s == 1e-4
    assert links == {"H200": "shipped", "B200": "link-of-B200"}
    assert said == {"B200": f"its {n} one-GPU rows of spec/published_multigpu.csv"}


def test_each_engines_rows_run_on_that_engines_all_reduce_latency():
    # a one-GPU fit's params name the served engine (vllm) whatever engine's rows fitted it; the link's
    # latency factor is per engine, so each engine's MoE rows must take their own (H200: trtllm x16, vllm x0).
    from pareto_atlas.calibrate import published_moe
    from pareto_atlas.calibrate.published import CardCalibration
    from pareto_atlas.calibrate.published_link import LinkCalibration
    from pareto_atlas.calibrate.published_moe_table import load_moe

    table = load_moe()
    hw = shipped_hardware()["H200"]
    ones = {
        "H200": [
            CardCalibration("H200", e, default_params(hw, "vllm"), pd.DataFrame(), "", {}) for e in ("trtllm", "vllm")
        ]
    }
    assert {c.params.engine for c in ones["H200"]} == {"vllm"}
    rows = pd.DataFrame({"source_id": ["aiconfigurator-silicon-sample"], "model": ["llama-3.1-70b"]})
    link = LinkCalibration(
        "H200", 0.55, 16.0, rows, 0.5, 0.5, "LOSO", "", latency_by_engine={"trtllm": 16.0, "vllm": 0.0}
    )
    bases, _ = published_moe.dense_bases(table, ["H200"], ones, {"H200": link})
    assert set(bases["H200"]) == set(table.rows[table.rows.gpu == "H200"].engine)
    assert (bases["H200"]["trtllm"].engine, bases["H200"]["trtllm"].link_latency_scale) == ("trtllm", 16.0)
    assert (bases["H200"]["vllm"].engine, bases["H200"]["vllm"].link_latency_scale) == ("vllm", 0.0)
    # SGLang has no fit of its own on H200: the card's atlas fit, at SGLang's factor (the pooled one here)
    assert (bases["H200"]["sglang"].engine, bases["H200"]["sglang"].link_latency_scale) == ("sglang", 16.0)
