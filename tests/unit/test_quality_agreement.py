"""Agreement with a reference arm and the quality guard."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, strategies as st

from pareto_atlas.quality.agreement import agreement, common_prefix
from pareto_atlas.quality.guards import guard, guard_paired
from pareto_atlas.quality.records import QualityRecord
from pareto_atlas.quality.stats import score


def rec(i: int, ok: bool, ids=None, out: str = "x", ans: str = "1") -> QualityRecord:
    return QualityRecord(
        item_id=f"it{i}",
        task="gsm8k",
        variant="lm-eval-5shot",
        prompt_sha256=f"h{i}",
        target="1",
        output=out,
        extracted_strict=ans,
        extracted_flexible=ans,
        correct_strict=ok,
        correct_flexible=ok,
        latency_s=0.1,
        token_ids=ids,
    )


def test_identical_arm_agrees_fully():
    ref = [rec(i, i % 3 == 0, ids=(1, 2, 3, i)) for i in range(10)]
    s = agreement(ref, ref)
    assert s.answer_agreement.p == 1.0 and s.identical_outputs.k == 10 and s.mean_prefix_frac == 1.0
    assert math.isnan(s.median_first_divergence) and s.unit == "token"
    assert s.both_correct == 4 and s.neither_correct == 6


def test_divergence_position_and_prefix_fraction():
    ref = [rec(0, True, ids=(5, 6, 7, 8))]
    arm = [rec(0, False, ids=(5, 6, 9, 9, 9), ans="2")]
    it = agreement(arm, ref).items[0]
    assert it.first_divergence == 2 and it.prefix_frac == pytest.approx(2 / 5)
    assert not it.answer_agree and it.ref_correct and not it.arm_correct


def test_falls_back_to_characters_without_token_ids():
    it = agreement([rec(0, True, out="abcd")], [rec(0, True, out="abXd")]).items[0]
    assert it.unit == "char" and it.first_divergence == 2


def test_prompt_mismatch_and_missing_items_are_counted():
    ref = [rec(0, True), rec(1, True)]
    arm = [dataclasses.replace(rec(0, True), prompt_sha256="other"), rec(2, True)]
    s = agreement(arm, ref)
    assert s.n == 1 and s.n_prompt_mismatch == 1 and s.n_missing == 2
    with pytest.raises(ValueError, match="share no item ids"):
        agreement([rec(5, True)], ref)


@given(st.lists(st.integers(0, 3), max_size=20), st.lists(st.integers(0, 3), max_size=20))
def test_common_prefix_is_a_prefix(a, b):
    k = common_prefix(a, b)
    assert a[:k] == b[:k] and (k == min(len(a), len(b)) or a[k] != b[k])


def test_guard_clear_pass_clear_fail_and_boundary():
    assert guard(score(900, 1000), score(900, 1000), floor=0.8).passes
    bad = guard(score(0, 200), score(60, 200))
    assert not bad.passes and not bad.boundary and bad.rel == 0.0  # the seed's 0/200 arm is removed
    b = guard(score(56, 200), score(60, 200))
    assert b.boundary and b.rel_lo < 0.95 <= b.rel_hi and "boundary" in b.reason


def test_guard_baseline_zero_is_flagged_not_decided():
    g = guard(score(3, 50), score(0, 50))
    assert g.boundary and not g.passes and math.isnan(g.rel)


def test_paired_guard_identical_arm_passes_independent_guard_cannot_tell():
    base = [rec(i, i % 3 == 0) for i in range(60)]
    g = guard_paired(base, base)
    assert g.passes and not g.boundary and g.rel_lo == g.rel_hi == 1.0
    assert guard(score(20, 60), score(20, 60)).boundary


def test_paired_guard_does_not_overclaim_on_tiny_degenerate_samples():
    base = [rec(0, True), rec(1, False), rec(2, False)]
    arm = [rec(i, False) for i in range(3)]  # 0/3 vs 1/3: a bootstrap would say [0, 0]
    g = guard_paired(arm, base)
    assert g.boundary and g.rel == 0.0 and g.rel_hi > 1.0 and g.method.startswith("katz")


def test_all_correct_on_both_sides_of_a_few_items_is_not_certainty():
    # 6/6 against 6/6 (top-k attention on the retrieval items): Haldane's 0.5 goes into every cell,
    # failures included, so the interval is [0.75, 1.34], not [1, 1]
    six = [rec(i, True) for i in range(6)]
    g = guard_paired(six, six)
    assert g.rel == 1.0 and g.method.startswith("katz") and g.boundary
    assert 0.70 < g.rel_lo < 0.80 and 1.25 < g.rel_hi < 1.40
    wide, narrow = guard(score(6, 6), score(6, 6)), guard(score(60, 60), score(60, 60))
    assert narrow.rel_hi - narrow.rel_lo < wide.rel_hi - wide.rel_lo


def test_paired_guard_broken_arm_fails():
    base = [rec(i, i % 2 == 0) for i in range(80)]
    broken = [rec(i, False) for i in range(80)]
    g = guard_paired(broken, base)
    assert not g.passes and not g.boundary


@given(st.integers(1, 200), st.integers(1, 200), st.floats(0.5, 1.0))
def test_guard_interval_contains_point(k_arm, k_base, floor):
    g = guard(score(k_arm, 200), score(k_base, 200), floor=floor)
    assert g.rel_lo <= g.rel <= g.rel_hi
    assert g.boundary == (g.rel_lo < floor <= g.rel_hi)


def test_an_interval_always_holds_its_own_ratio_and_never_goes_below_zero():
    # 0/5 against 2/5 (an eviction policy that lost every needle): Haldane's cells centre the Katz
    # interval on 0.2; the observed ratio 0 must still lie inside it
    g = guard(score(0, 5), score(2, 5))
    assert g.rel == 0.0 and g.rel_lo <= g.rel <= g.rel_hi and g.rel_lo >= 0.0
    # a paired difference of -0.30 [-0.60, +0.04] over a baseline of 0.3: the ratio's interval is
    # clamped to what a score in [0, 1] allows, never the -1.0 the difference alone would give
    from pareto_atlas.quality.stats import paired_difference

    d = paired_difference([False] * 10, [True] * 3 + [False] * 7)
    rel, lo, hi = d.rel_interval()
    assert rel == 0.0 and lo == 0.0 and lo <= rel <= hi <= 1.0 / 0.3
