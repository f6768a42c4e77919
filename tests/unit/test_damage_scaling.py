"""The quality ladder's rung (c) and how a knob's damage scales with model size (quality.damage_scaling):
a knob whose damage grows with size is not carried upward on the smaller model's interval."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pareto_atlas.quality.damage_scaling import DamageScaling, read_table, scaling_for, shipped
from pareto_atlas.simulate.space import Workload
from pareto_atlas.simulate.targets import Target
from pareto_atlas.spec.cards import shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.spec.study import load_study
from pareto_atlas.store.ladder import CARRY_WIDENING, carried, target_quality
from pareto_atlas.store.quality import Quality

N05, N15, N7 = (shipped_models()[c].n_params for c in ("qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-7b"))


def _scaling(small: tuple, large: tuple) -> DamageScaling:
    return DamageScaling("qwen2.5", "Q4_K_M", "f16", "Q4_K_M", "q4_0", "kld", "s", N05, small, "l", N15, large, "test")


def _q(rel: float, lo: float, hi: float) -> Quality:
    return Quality(math.nan, math.nan, math.nan, rel, lo, hi, "", "measured")


def test_growth_is_applied_on_the_measured_step_and_extrapolated_past_it():
    grows = _scaling((1.0, 0.5, 1.5), (5.0, 4.5, 5.5))  # x5 [3, 11]
    c15, u15 = grows.factors(N05, N15)
    assert math.isclose(c15, 5.0) and math.isclose(u15, 11.0)
    c7, u7 = grows.factors(N05, N7)
    assert c7 > c15 and u7 > u15  # past the largest size measured: more
    mid = grows.factors(N05, math.sqrt(N05 * N15))  # halfway (in log size): the square root
    assert math.isclose(mid[1], math.sqrt(11.0))
    shrinks = _scaling((1.0, 0.8, 1.2), (0.4, 0.3, 0.5))  # x0.4 [0.25, 0.625]
    assert shrinks.factors(N05, N15) == (1.0, 1.0)  # upward: no growth, nothing to widen
    down_c, down_u = shrinks.factors(N15, N05)  # carried down it grows
    assert math.isclose(down_c, 2.5) and math.isclose(down_u, 4.0)
    # an interval that straddles 1 has no established centre growth, only a wider bound
    unsure = _scaling((1.0, 0.5, 1.5), (1.2, 0.9, 1.5))
    centre, up = unsure.factors(N05, N15)
    assert centre == 1.0 and up == pytest.approx(3.0)


def test_a_growing_knob_is_carried_with_its_growth_and_a_shrinking_one_with_the_x2_rule():
    measured = _q(0.8, 0.6, 1.0)
    plain = carried(measured, "0.5B", "kv-q4_0")
    assert math.isclose(plain.rel_lo, 0.8 - CARRY_WIDENING * 0.2) and "not measured" in plain.provenance
    grows = carried(measured, "0.5B", "kv-q4_0", _scaling((1.0, 0.5, 1.5), (5.0, 4.5, 5.5)), N05, N15)
    assert grows.rel == pytest.approx(1 - 0.2 * 5.0)  # the centre's damage x5: 0
    assert grows.rel_lo == 0.0 and grows.rel_lo <= plain.rel_lo
    assert "grows with size" in grows.provenance
    shrinks = carried(measured, "0.5B", "q4_0", _scaling((1.0, 0.8, 1.2), (0.4, 0.3, 0.5)), N05, N15)
    assert (shrinks.rel, shrinks.rel_lo, shrinks.rel_hi) == (plain.rel, plain.rel_lo, plain.rel_hi)
    assert "does not grow" in shrinks.provenance
    # a knob that measured no damage still gets a bound below 1 when its damage grows: the
    # measurement's width is the damage it could not see
    clean = carried(_q(1.0, 0.9, 1.1), "0.5B", "kv-q4_0", _scaling((1.0, 0.5, 1.5), (5.0, 4.5, 5.5)), N05, N15)
    assert clean.rel == 1.0 and clean.rel_lo < 1.0 - CARRY_WIDENING * 0.1


def _cpu_target(card: str) -> Target:
    return Target(card, shipped_models()[card], (shipped_hardware()["L4"],), (Workload("w", 128, 32),), False)


def test_the_ladder_reads_the_shipped_scaling_for_the_measured_family():
    study = load_study("default")
    base = Knobs(weights="Q4_K_M")
    qt = {base.quality_key(): {"arm": "q4km", "p": 0.4, "lo": 0.3, "hi": 0.5, "rel": 1.0, "rel_lo": 1.0, "rel_hi": 1.0}}
    for k, arm in ((Knobs(weights="Q4_K_M", kv="q4_0"), "kv-q4_0"), (Knobs(weights="Q4_0"), "q4_0")):
        qt[k.quality_key()] = {"arm": arm, "p": 0.36, "lo": 0.26, "hi": 0.46, "rel": 0.9, "rel_lo": 0.8, "rel_hi": 1.0}
    kv = shipped() and scaling_for("qwen2.5", ("Q4_K_M", "f16"), ("Q4_K_M", "q4_0"))
    wq = scaling_for("qwen2.5", ("Q4_K_M", "f16"), ("Q4_0", "f16"))
    if kv is None or wq is None:
        pytest.skip("the shipped damage-scaling table has no qwen2.5 rows for these knobs")
    t15, t7 = _cpu_target("qwen2.5-1.5b"), _cpu_target("qwen2.5-7b")
    q_kv15 = target_quality(Knobs(weights="Q4_K_M", kv="q4_0"), t15, "cpu", study, qt, "gsm8k")
    q_kv7 = target_quality(Knobs(weights="Q4_K_M", kv="q4_0"), t7, "cpu", study, qt, "gsm8k")
    q_w15 = target_quality(Knobs(weights="Q4_0"), t15, "cpu", study, qt, "gsm8k")
    assert q_kv15.evidence == q_w15.evidence == "carried"
    if kv.ratio[2] > 1:  # the measured KV q4_0 damage grows with size: wider than the x2 rule
        assert q_kv15.rel_lo < 0.9 - CARRY_WIDENING * 0.1 and q_kv7.rel_lo <= q_kv15.rel_lo
    if wq.ratio[2] <= 1:  # Q4_0's shrinks: the x2 rule
        assert math.isclose(q_w15.rel_lo, 0.9 - CARRY_WIDENING * 0.1)


def test_a_bad_table_is_refused_in_one_line(tmp_path: Path):
    good = tmp_path / "ok.csv"
    rows = list(read_table())
    from pareto_atlas.quality.damage_scaling import write_table

    write_table(rows, good, "test")
    assert read_table(good) == tuple(rows)
    bad = tmp_path / "bad.csv"
    bad.write_text(
        good.read_text().replace(",0.", ",zero", 1)
        if rows
        else "family,ref_weights,ref_kv,weights,kv,metric,small_model,small_params,small,small_lo,small_hi,"
        "large_model,large_params,large,large_lo,large_hi,source\nq,a,b,c,d,m,s,x,1,1,1,l,2,1,1,1,src\n"
    )
    with pytest.raises(ValueError, match=r"damage_scaling.csv: field '\w+' must be a number"):
        read_table(bad)
    (tmp_path / "short.csv").write_text("family,weights\nq,Q4_0\n")
    with pytest.raises(ValueError, match="missing column"):
        read_table(tmp_path / "short.csv")
