"""calibrate.moe_steps fits the simulator's own MoE step cost to step times by slot count: on steps the
simulator itself made from a known skew and machine, the fit on some slot counts finds them and
predicts the slot counts it never saw."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pareto_atlas.calibrate.moe_steps import fit_steps, predict_steps, step_s, with_values
from pareto_atlas.simulate.params import default_params
from pareto_atlas.spec.cards import HardwareCard, ModelCard

MOE = ModelCard(
    name="random-moe",
    n_layers=4,
    hidden=256,
    n_heads=4,
    n_kv_heads=2,
    head_dim=64,
    intermediate=6144,
    vocab=151936,
    tied_embeddings=True,
    n_experts=16,
    experts_per_token=2,
    expert_intermediate=6144,
)
DENSE = replace(MOE, name="dense-twin", intermediate=12288, n_experts=0, experts_per_token=0, expert_intermediate=0)
CPU = HardwareCard(name="this-cpu", kind="cpu", mem_bw_gbs=12.0, tflops={"fp32": 0.06}, mem_gib=23.0)
BASE = replace(default_params(CPU, "llamacpp"), gemm_tile=0)
TRUE = {"skew": 0.85, "overhead_step_s": 2e-3, "eff_bw": 1.4, "gemv": 1e-11, "overhead_seq_s": 3e-4}
CTX = 64.0


def steps(card: ModelCard, values: dict, slots=(1, 2, 4, 8)) -> dict[int, float]:
    p, skew = with_values(BASE, "F32", values)
    return {b: step_s(card, CPU, "F32", p, b, CTX, skew) for b in slots}


def test_the_moe_step_grows_with_the_experts_touched_and_the_dense_one_far_less():
    moe, dense = steps(MOE, TRUE), steps(DENSE, TRUE)
    assert moe[1] == pytest.approx(dense[1], rel=0.02)  # one token reads the same active weights
    assert moe[8] / moe[1] > 2.5 and dense[8] / dense[1] < 1.3


def test_a_fit_on_some_slot_counts_finds_the_skew_and_predicts_the_others():
    measured = steps(MOE, TRUE)
    fixed = {k: TRUE[k] for k in ("gemv", "overhead_seq_s")}
    fit = fit_steps(
        MOE, CPU, "F32", BASE, {b: measured[b] for b in (1, 2, 8)}, ("skew", "overhead_step_s", "eff_bw"), CTX, fixed
    )
    assert fit.skew == pytest.approx(0.85, abs=0.01)
    assert fit.values["eff_bw"] == pytest.approx(1.4, rel=0.01)
    assert predict_steps(MOE, CPU, "F32", fit, [4], CTX)[4] == pytest.approx(measured[4], rel=0.002)
    # a wrong skew fixed in its place misses the held-out slot count: the law is what predicts it
    wrong = fit_steps(
        MOE,
        CPU,
        "F32",
        BASE,
        {b: measured[b] for b in (1, 8)},
        ("overhead_step_s", "eff_bw"),
        CTX,
        {**fixed, "skew": 1.3},
    )
    assert abs(predict_steps(MOE, CPU, "F32", wrong, [4], CTX)[4] / measured[4] - 1) > 0.02


def test_bad_fits_are_refused_naming_the_field():
    with pytest.raises(ValueError, match="free fields .*'bogus'"):
        fit_steps(MOE, CPU, "F32", BASE, {1: 0.01, 8: 0.02}, ("bogus",), CTX)
    with pytest.raises(ValueError, match="2 slot counts cannot fit 3 free fields"):
        fit_steps(MOE, CPU, "F32", BASE, {1: 0.01, 8: 0.02}, ("skew", "eff_bw", "gemv"), CTX)
