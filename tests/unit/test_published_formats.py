"""Quantized formats fitted per card on published rows, carried within a GPU generation, and their bars."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from pareto_atlas.calibrate import published_formats as pf
from pareto_atlas.calibrate.published import card_frame
from pareto_atlas.calibrate.published_table import load_multigpu, load_published
from pareto_atlas.simulate.params import CalibParams, default_params
from pareto_atlas.spec.cards import shipped_hardware


@pytest.fixture(scope="module")
def tables():
    return load_published(), load_multigpu()


def test_format_rows_read_both_tables_one_gpu_rows_of_quantized_formats_only(tables):
    one, multi = tables
    h200 = pf.format_rows(one, multi, "H200", "vllm")
    # the multi-GPU table's one-GPU vLLM FP8 rows on the H200 (aiconfigurator), never its TP>1 rows
    assert set(h200.weights) == {"FP8"} and len(h200) > 0
    assert set(h200.source_id) == {"aiconfigurator-silicon-sample"}
    assert (h200.n_gpus.astype(str) == "1").all()
    assert len(h200) < len(multi.rows[(multi.rows.gpu == "H200") & (multi.rows.engine == "vllm")])
    # the one-GPU table's quantized rows: the A100's AWQ4 from two sources, none of its BF16
    a100 = pf.format_rows(one, multi, "A100-80G-PCIe", "vllm")
    assert set(a100.weights) == {"AWQ4"} and a100.source_id.nunique() == 2
    assert pf.format_rows(one, multi, "L4", "vllm").empty


def test_shipped_cards_name_their_generation():
    cards = shipped_hardware()
    assert {c.arch for c in cards.values() if c.kind == "gpu"} == {"ada", "ampere", "hopper", "blackwell"}
    assert cards["H100-PCIe"].arch == cards["H200"].arch == cards["H100-SXM"].arch != cards["A100-80G-PCIe"].arch


def test_a_carried_format_keeps_the_share_of_peak_its_kernels_reach_on_the_generation():
    cards = shipped_hardware()
    sxm, pcie = cards["H100-SXM"], cards["H100-PCIe"]
    cost = 2.0 / (sxm.peak_flops("fp8") * 0.6)  # 60 % of the SXM's FP8 peak
    donor = pf.FormatFit("H100-SXM", "vllm", "FP8", "fitted", "x", cost, cost)
    gemv, gemm = pf.carried_cost([donor], cards, pcie)
    assert pf.peak_share(gemv, pcie, "FP8") == pytest.approx(0.6)
    assert gemm == pytest.approx(2.0 / (pcie.peak_flops("fp8") * 0.6))
    # two donors: the geometric mean of their shares
    other = pf.FormatFit("H200", "vllm", "FP8", "fitted", "y", 2.0 / (cards["H200"].peak_flops("fp8") * 0.15), cost)
    gemv2, _ = pf.carried_cost([donor, other], cards, pcie)
    assert pf.peak_share(gemv2, pcie, "FP8") == pytest.approx(0.3)


def test_a_carried_format_is_labelled_generation_and_widens_the_points_bar():
    hw = shipped_hardware()["H100-PCIe"]
    p = replace(default_params(hw, "vllm"), lat_rel_err=0.2, thr_rel_err=0.1)
    p = pf._with(p, "FP8", 1e-12, 2e-13, carried="H100-SXM (hopper)", bars=(0.35, 0.05))
    assert p.weight_cost("FP8", "gemv") == (1e-12, "generation")
    assert p.weight_cost("W8A8", "gemv")[1] == "derived"
    assert p.bars_for("FP8") == (0.35, 0.1)  # the wider of the card's and the format's, per axis
    assert p.bars_for("BF16") == (0.2, 0.1)
    # stored and read back; a fit without formats keeps the keys it had before these fields
    back = CalibParams.from_dict(json.loads(json.dumps(p.to_dict())))
    assert back.bars_for("FP8") == (0.35, 0.1) and back.weight_cost("FP8", "gemm")[1] == "generation"
    assert "carried_formats" not in default_params(hw, "vllm").to_dict()
    assert "format_rel_err" not in default_params(hw, "vllm").to_dict()
    fitted = pf._with(p, "FP8", 1e-12, 2e-13)  # fitted on the card's own rows: no longer carried
    assert fitted.weight_cost("FP8", "gemv")[1] == "fitted"


def test_held_out_folds_are_by_source_then_model_then_anchor():
    two_src = pd.DataFrame({"source_id": ["a", "a", "b"], "model": ["m", "n", "m"]})
    folds, how = pf._folds(two_src)
    assert how == pf.LOSO and [f.tolist() for f in folds] == [[True, True, False], [False, False, True]]
    assert pf._folds(pd.DataFrame({"source_id": ["a", "a"], "model": ["m", "n"]}))[1] == pf.LOMO
    assert pf._folds(pd.DataFrame({"source_id": ["a", "a"], "model": ["m", "m"]}))[1] == pf.LOAO
    assert pf._folds(pd.DataFrame({"source_id": ["a"], "model": ["m"]})) == ([], "")


def test_p90_bars_count_a_batch1_rows_speed_as_latency_not_throughput():
    rows = pd.DataFrame(
        {
            "load": ["batch", "concurrency"],
            "load_value": ["1", "8"],
            "output_tokens": ["128", "128"],
            "ttft_ms": ["", "10"],
            "tpot_ms": ["", "5"],
            "itl_ms": ["", ""],
            "e2e_ms": ["900", ""],
            "out_tok_s": ["", ""],
        }
    )
    err = np.full((2, 5), np.nan)
    err[0, 4] = 0.25  # batch-1 row: predicted speed +25 %, so latency per token -20 %
    err[1, :4] = [0.1, 0.1, 0.1, 0.1]
    lat, thr = pf.p90_bars(err, rows)
    assert lat == pytest.approx(np.percentile([0.1] * 4 + [0.2], 90))
    assert thr != thr  # no throughput row left


def test_fitting_the_h100s_fp8_on_its_rows_beats_the_roofline_and_reports_held_out_error(tables):
    one, multi = tables
    from pareto_atlas.calibrate.published import calibrate_card

    hw = shipped_hardware()["H100-SXM"]
    rows = one.rows[(one.rows.gpu == "H100-SXM") & (one.rows.engine == "vllm")]
    base = calibrate_card(rows[rows.weights != "FP8"], hw).params  # a card fit that never saw FP8
    g = pf.format_rows(one, multi, "H100-SXM", "vllm")
    g = g[g.weights == "FP8"].reset_index(drop=True)
    frame, models = card_frame(g, hw)
    fit = pf.calibrate_format(base, g, frame, models, hw, "FP8")
    assert fit.basis == "fitted" and fit.n_rows == len(g) and fit.held_out == pf.LOMO
    assert fit.errors["TPOT"] < 0.15
    assert fit.errors["TPOT"] <= fit.roofline["TPOT"] + 1e-9  # fitting the format is no worse than deriving it
    assert fit.lat_bar == fit.lat_bar and fit.lat_bar >= fit.errors["TPOT"]


def test_the_report_names_each_fitted_format_and_what_stays_derived_per_generation():
    hw = shipped_hardware()
    fit = pf.FormatFit(
        "H200", "vllm", "FP8", "fitted", "src 3", 1e-12, 2.0 / (hw["H200"].peak_flops("fp8") * 0.5), 3, pf.LOMO,
        {"TTFT": 0.3, "TPOT": 0.1, "throughput": float("nan")}, {"TPOT": 0.2}, 0.4, float("nan"),
    )  # fmt: skip
    cal_h200 = type("C", (), {"hardware": "H200", "engine": "vllm", "formats": (fit,)})()
    cal_l4 = type("C", (), {"hardware": "L4", "engine": "vllm", "formats": ()})()
    text = "\n".join(pf.report_lines([cal_h200, cal_l4]))
    assert "H200            FP8    fitted" in text and "10.0%" in text and pf.LOMO in text and "50.0%" in text
    assert "H200: W8A8, AWQ4, W4A16 derived from the roofline (sim*)" in text
    assert (
        "L4: FP8, W8A8, AWQ4, W4A16 derived from the roofline (sim*): no published measurement of them on any ada card"
        in text
    )


def test_a_format_no_card_of_its_generation_measured_carries_the_roofline_error_measured_on_other_formats(
    monkeypatch,
):
    cards = shipped_hardware()
    c = lambda name: type("C", (), {"hardware": name, "engine": "vllm"})()  # noqa: E731
    fp8 = pf.FormatFit("H200", "vllm", "FP8", "fitted", "s", 1e-12, 1e-13, 5)
    awq = pf.FormatFit("A100-80G-PCIe", "vllm", "AWQ4", "fitted", "s", 1e-12, 1e-13, 5)
    own = {("H200", "FP8"): fp8, ("A100-80G-PCIe", "AWQ4"): awq}
    rows = pd.DataFrame({"load": ["concurrency"] * 2, "load_value": ["8"] * 2, "output_tokens": ["128"] * 2})
    for col in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "out_tok_s"):
        rows[col] = ["1", "1"]
    data = {k: (None, rows, k[0], None) for k in own}  # frame slot carries the card for the stand-in below
    errs = {"H200": 0.3, "A100-80G-PCIe": 0.9}
    monkeypatch.setattr(pf, "roofline_errors", lambda base, frame, models, hw, fmt: np.full((2, 5), errs[frame]))
    out = pf._derived_bars([c("H200"), c("L4")], own, {}, cards, data)
    # the H200's W8A8 and its int4 formats: the roofline's error on the Hopper FP8 rows, never the Ampere AWQ4's
    assert {k for k in out if k[0] == "H200"} == {("H200", f) for f in ("W8A8", "AWQ4", "W4A16")}
    assert out["H200", "W8A8"].basis == "derived" and out["H200", "W8A8"].lat_bar == pytest.approx(0.3)
    assert "FP8 (H200)" in out["H200", "W8A8"].rests_on and "A100" not in out["H200", "W8A8"].rests_on
    # no Ada card has rows: the p90 over every card's rows pooled
    assert out["L4", "FP8"].lat_bar == pytest.approx(0.9) and "AWQ4 (A100-80G-PCIe)" in out["L4", "FP8"].rests_on
    assert "derived from the roofline (sim*" in pf.provenance((out["L4", "FP8"],))
