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


def twin_steps(c0=-5e-4, t_e=9e-4, t_r=2e-4, skew=1.0, slots=(1, 2, 3, 4, 6, 8)):
    """Dense-twin steps of a linear per-sequence law and the MoE's from TwinLaw's formula."""
    from pareto_atlas.calibrate.moe_steps import TwinLaw

    law = TwinLaw(c0, t_e, t_r, skew, (), {})
    twin = {b: 0.021 + 0.004 * (b - 1) for b in slots}
    return twin, {b: law.predict(MOE, b, twin[b]) for b in slots}


def test_the_twin_law_finds_its_costs_and_predicts_held_out_slot_counts():
    from pareto_atlas.calibrate.moe_steps import fit_twin_law

    twin, moe = twin_steps()
    fit = fit_twin_law(MOE, {b: moe[b] for b in (1, 2, 8)}, {b: twin[b] for b in (1, 2, 8)}, 1.0)
    assert fit.c0 == pytest.approx(-5e-4, rel=1e-6) and fit.t_expert == pytest.approx(9e-4, rel=1e-6)
    assert fit.t_row == pytest.approx(2e-4, rel=1e-6)
    for b in (3, 4, 6):
        assert fit.predict(MOE, b, twin[b]) == pytest.approx(moe[b], rel=1e-9)
    # each part of the law carries weight: with the touched experts dropped (a per-row cost only, as a
    # dense model's), the held-out steps are missed
    rows_only = replace(fit, t_expert=0.0)
    assert abs(rows_only.predict(MOE, 4, twin[4]) / moe[4] - 1) > 0.05


def test_the_twin_law_rests_on_the_routing_skew():
    from pareto_atlas.calibrate.moe_steps import fit_twin_law

    twin, moe = twin_steps(t_r=0.0, skew=0.5)  # skewed routing: fewer experts touched than uniform
    on = (1, 2, 3)
    right = fit_twin_law(MOE, {b: moe[b] for b in on}, {b: twin[b] for b in on}, 0.5)
    wrong = fit_twin_law(MOE, {b: moe[b] for b in on}, {b: twin[b] for b in on}, 1.0)
    assert right.predict(MOE, 8, twin[8]) == pytest.approx(moe[8], rel=1e-6)
    # at 1-8 tokens over 16 experts the law's curvature changes little with the skew (a touched
    # expert's cost absorbs most of it), yet extrapolating from 1-3 to 8 tells the two apart
    assert abs(wrong.predict(MOE, 8, twin[8]) / moe[8] - 1) > 0.02


def test_the_twin_law_refuses_too_few_slot_counts_in_one_line():
    from pareto_atlas.calibrate.moe_steps import fit_twin_law

    with pytest.raises(ValueError, match=r"slot counts \[1, 8\] must include 1 and two more"):
        fit_twin_law(MOE, {1: 0.02, 8: 0.08}, {1: 0.02, 8: 0.05}, 1.0)
    with pytest.raises(ValueError, match="on an MoE card"):
        fit_twin_law(DENSE, {1: 0.02, 2: 0.03, 8: 0.08}, {1: 0.02, 2: 0.03, 8: 0.05}, 1.0)


def test_the_saved_cpu_measurement_is_predicted_within_the_goal_on_held_out_slot_counts():
    """docs/results/2026-12-02-moe-cpu.json (five runs a point): the twin law fitted on 1, 2 and 8 slots at
    the routing replica's skew predicts every other slot count within 10 %, and a touched expert costs
    about its weights' streaming time at the card's measured bandwidth."""
    import json
    from pathlib import Path

    import numpy as np

    from pareto_atlas.calibrate.moe_steps import fit_twin_law
    from pareto_atlas.simulate.moe import fit_routing_skew

    data = json.loads((Path(__file__).parents[2] / "docs/results/2026-12-02-moe-cpu.json").read_text())
    runs: dict = {}
    for p in data["points"]:
        runs.setdefault((p["kind"], p["slots"]), []).append(p["step_ms"] / 1e3)
    mean = {k: float(np.mean(v)) for k, v in runs.items()}
    touched = data["routing"]["touched"]
    skew = fit_routing_skew([int(b) for b in touched], [v["mean"] for v in touched.values()], 16, 2)
    assert 0.95 < skew < 1.05  # the random router spreads tokens as uniform routing would
    on = (1, 2, 8)
    fit = fit_twin_law(MOE, {b: mean["moe", b] for b in on}, {b: mean["dense", b] for b in on}, skew)
    for b in sorted({b for _, b in runs} - set(on)):
        assert fit.predict(MOE, b, mean["dense", b]) == pytest.approx(mean["moe", b], rel=0.10), b
    bw = [r["machine"]["card"]["mem_bw_gbs"] * 1e9 for r in data["runs"]]
    expert_bytes = 3 * 6144 * 256 * 4  # gate, up, down of one expert in one layer, F32
    assert min(bw) * 0.6 < expert_bytes / fit.t_expert < max(bw) * 1.4
