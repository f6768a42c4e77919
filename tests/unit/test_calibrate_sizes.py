"""A fit over anchors of several model sizes: each anchor simulated with its own card, a step's
fixed cost told apart from its cost per weight, and the leave-one-model-out error carried as the
transfer error bar."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from pareto_atlas.calibrate import fit
from pareto_atlas.calibrate.fit import TARGETS, _anchors, predict
from pareto_atlas.calibrate.sizes import HELD, leave_one_model_out, median_abs_by_model, with_cards
from pareto_atlas.simulate.params import CalibParams, default_params
from pareto_atlas.spec.cards import HardwareCard, shipped_models

CARDS = shipped_models()
SMALL, MID, BIG = CARDS["smollm2-135m"], CARDS["qwen2.5-0.5b"], CARDS["qwen2.5-1.5b"]
CPU = HardwareCard("this-cpu", "cpu", 20.0, {"fp32": 0.1}, 24.0, price_per_hour=0.05, price_date="2026-11")
# A machine whose fixed cost per step is large (8 ms), as llama.cpp's turned out to be here.
TRUTH = replace(
    default_params(CPU),
    eff_bw=0.9,
    gemv_s_per_weight={"Q4_0": 40e-12},
    gemm_s_per_weight={"Q4_0": 15e-12},
    overhead_step_s=8e-3,
    step_cv=0.03,
)


def anchors_of(card, noise: float = 0.01, seed: int = 0) -> pd.DataFrame:
    df = pd.DataFrame(
        [
            dict(
                weights="Q4_0",
                slots=c,
                concurrency=c,
                prompt_tokens=128,
                output_tokens=32,
                n_requests=8,
                campaign_id="c1",
                engine_version="b1",
                arm=f"{card.name}-{c}",
                model=card.name,
            )
            for c in (1, 2)
        ]
    )
    pred = predict(_anchors(df), card, CPU, TRUTH)
    rng = np.random.default_rng(seed)
    for i, t in enumerate(TARGETS):
        df[t] = pred[:, i] * np.exp(rng.normal(0, noise, len(df)))
    return df


def test_each_anchor_is_predicted_with_its_own_card():
    df = pd.concat([anchors_of(MID), anchors_of(BIG)], ignore_index=True)
    own = predict(_anchors(df), [MID, MID, BIG, BIG], CPU, TRUTH)
    one = predict(_anchors(df), MID, CPU, TRUTH)
    tpot = TARGETS.index("tpot_p50_ms")
    assert own[2, tpot] > 1.5 * one[2, tpot]  # the 1.5B streams ~3x the weights of the 0.5B
    assert own[0, tpot] == pytest.approx(one[0, tpot])
    with pytest.raises(ValueError, match="2 model cards for 4 anchors"):
        with_cards(df, [MID, BIG])


def test_two_sizes_split_the_fixed_cost_and_carry_to_a_third():
    df = pd.concat([anchors_of(SMALL), anchors_of(MID), anchors_of(BIG, seed=1)], ignore_index=True)
    cards = [CARDS[m] for m in df.model]
    cal = fit(df, cards, CPU, loo=False)
    assert cal.params.overhead_step_s == pytest.approx(TRUTH.overhead_step_s, rel=0.25)
    # every size predicted by a fit on the other two: within a few percent on decode
    assert cal.lomo is not None and set(cal.lomo[HELD]) == {SMALL.name, MID.name, BIG.name}
    med = median_abs_by_model(cal.lomo)
    assert med.loc[BIG.name, "tpot_p50_ms"] < 0.08
    p = cal.params
    assert p.xfer_lat_rel_err > 0 and p.xfer_thr_rel_err > 0 and "leave-one-model-out" in p.provenance
    assert "leave-one-model-out" in cal.report() and BIG.name in cal.report()
    assert CalibParams.from_dict(p.to_dict()).xfer_lat_rel_err == pytest.approx(p.xfer_lat_rel_err)


def test_one_size_leaves_the_transfer_error_unmeasured_and_its_fit_misses_a_larger_model():
    small = anchors_of(MID)
    cal = fit(small, MID, CPU, loo=False)
    assert cal.lomo is None and math.isnan(cal.params.xfer_lat_rel_err) and math.isnan(cal.params.xfer_thr_rel_err)
    # fitted on the 0.5B alone, the fixed cost and the per-weight cost are confounded
    big = anchors_of(BIG)
    err = predict(_anchors(big), BIG, CPU, cal.params)[:, TARGETS.index("tpot_p50_ms")] / big.tpot_p50_ms - 1
    both = pd.concat([small, anchors_of(SMALL)], ignore_index=True)
    cal2 = fit(both, [MID, MID, SMALL, SMALL], CPU, loo=False)
    err2 = predict(_anchors(big), BIG, CPU, cal2.params)[:, TARGETS.index("tpot_p50_ms")] / big.tpot_p50_ms - 1
    assert np.abs(err2).max() < np.abs(err).max()


def test_leave_one_model_out_needs_two_models_and_holds_out_only_those_named():
    df = with_cards(pd.concat([anchors_of(MID), anchors_of(BIG)], ignore_index=True), [MID, MID, BIG, BIG])
    calls = []

    def fake_fit(train, cards):
        calls.append({c.name for c in cards})
        return TRUTH

    out = leave_one_model_out(df, CPU, fake_fit, models=[BIG.name])
    assert calls == [{MID.name}] and set(out[HELD]) == {BIG.name} and len(out) == 2
    assert np.abs(out[list(TARGETS)].to_numpy()).max() < 0.05  # the truth predicts within the noise
    assert leave_one_model_out(with_cards(anchors_of(MID), MID), CPU, fake_fit) is None


def test_transfer_error_must_be_a_relative_error_or_nan():
    with pytest.raises(ValueError, match="calib.xfer_lat_rel_err"):
        CalibParams(xfer_lat_rel_err=-0.1)
    assert math.isnan(CalibParams().xfer_thr_rel_err)


def test_each_anchor_of_a_study_gets_its_own_models_card_and_measured_bits():
    from pareto_atlas.calibrate.stage import anchor_cards, model_card
    from pareto_atlas.spec.study import load_study

    study = load_study("sizes")
    a = pd.DataFrame(
        [
            dict(model="qwen2.5-coder-1.5b-instruct", weights="Q4_K_M", weights_bpw=5.0),
            dict(model="qwen2.5-coder-0.5b-instruct", weights="Q4_K_M", weights_bpw=5.5),
            dict(model="smollm2-135m-instruct", weights="Q4_0", weights_bpw=4.5),
            dict(model=None, weights="Q4_K_M", weights_bpw=5.0),
        ]
    )  # stored before the column
    cards = anchor_cards(study, a)
    assert [c.name for c in cards] == ["qwen2.5-1.5b", "qwen2.5-0.5b", "smollm2-135m", "qwen2.5-1.5b"]
    assert cards[1].bits_per_weight("Q4_K_M") == 5.5 and cards[0].bits_per_weight("Q4_K_M") == 5.0
    # the study's own card carries only its own model's files' bits
    assert model_card(study, a).bits_per_weight("Q4_K_M") == 5.0
    with pytest.raises(ValueError, match="anchors of model 'other'"):
        anchor_cards(study, a.assign(model="other"))


def test_the_same_knobs_on_two_models_are_not_repeats_of_one_arm():
    from pareto_atlas.calibrate.fidelity import repeat_spread

    df = pd.concat([anchors_of(MID), anchors_of(SMALL)], ignore_index=True)
    assert all(v != v for v in repeat_spread(df).values())  # no arm was measured twice
    twice = pd.concat([df, anchors_of(MID, seed=3)], ignore_index=True)
    assert 0 < repeat_spread(twice)["tpot_p50_ms"] < 0.1


def test_the_default_fit_on_two_sizes_carries_its_measured_transfer_error_to_the_1_5b():
    # the default study's situation: this CPU fitted on SmolLM2-135M and the 0.5B; a point of the 1.5B
    # takes the leave-one-model-out error that fit measured, and the 1.5B's figures fall inside it
    from pareto_atlas.simulate.space import Workload
    from pareto_atlas.simulate.targets import SPEED_PROJECTED, Target, carried_params

    df = pd.concat([anchors_of(SMALL), anchors_of(MID, seed=2)], ignore_index=True)
    cal = fit(df, [CARDS[m] for m in df.model], CPU, loo=False)
    p = cal.params
    assert p.xfer_lat_rel_err == p.xfer_lat_rel_err and p.xfer_thr_rel_err == p.xfer_thr_rel_err
    big = Target("qwen2.5-1.5b", BIG, (CPU,), (Workload("w", 128, 32),), False)
    c = carried_params(p, big, {SMALL.name, MID.name}, CPU.name)
    assert c.lat_rel_err == max(p.lat_rel_err, p.xfer_lat_rel_err) and SPEED_PROJECTED not in c.provenance
    held = anchors_of(BIG, seed=3)
    err = predict(_anchors(held), BIG, CPU, p) / held[list(TARGETS)].to_numpy(float) - 1
    lat = [TARGETS.index(t) for t in ("ttft_p50_ms", "tpot_p50_ms", "tpot_p99_ms")]
    assert (np.abs(err[:, lat]) <= c.lat_rel_err).mean() >= 0.9
    # on one size the same target is projected, its bar the fitted model's own
    one = fit(anchors_of(MID), MID, CPU, loo=False).params
    assert SPEED_PROJECTED in carried_params(one, big, {MID.name}, CPU.name).provenance


def test_a_kernel_anchor_trains_every_fold_and_is_never_held_out_as_a_size():
    # the random Q4_K_M model (measure.random_kquant) fits a kernel format, not a size: holding it out
    # would score a format derived from the roofline, not how the fit carries to another model
    from pareto_atlas.calibrate.sizes import KERNEL_ANCHORS
    from pareto_atlas.measure.random_kquant import NAME, card_fields
    from pareto_atlas.spec.cards import inline_model_card

    assert NAME in KERNEL_ANCHORS
    kq = inline_model_card(card_fields(), NAME)
    df = with_cards(
        pd.concat([anchors_of(MID), anchors_of(BIG), anchors_of(kq)], ignore_index=True),
        [MID] * 2 + [BIG] * 2 + [kq] * 2,
    )
    calls = []

    def fake_fit(train, cards):
        calls.append({c.name for c in cards})
        return TRUTH

    out = leave_one_model_out(df, CPU, fake_fit)
    assert set(out[HELD]) == {MID.name, BIG.name}
    assert calls == [{BIG.name, NAME}, {MID.name, NAME}]
    # one size and a kernel anchor: no size to carry to, so no transfer error (its points are projected)
    one = with_cards(pd.concat([anchors_of(MID), anchors_of(kq)], ignore_index=True), [MID] * 2 + [kq] * 2)
    assert leave_one_model_out(one, CPU, fake_fit) is None
