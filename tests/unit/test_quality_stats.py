"""Wilson interval and lm-eval stderr properties."""

from __future__ import annotations

import math

import pytest

from hypothesis import given, strategies as st

from pareto_atlas.quality.stats import lm_eval_stderr, score, score_bools, wilson_interval


@given(st.integers(min_value=1, max_value=5000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_contains_p_and_stays_in_unit_interval(kn):
    k, n = kn
    lo, hi = wilson_interval(k, n)
    assert 0.0 <= lo <= k / n <= hi <= 1.0
    assert hi - lo > 0


@given(st.integers(min_value=2, max_value=2000))
def test_wilson_extremes_are_not_degenerate(n):
    lo, hi = wilson_interval(0, n)
    assert lo == 0.0 and 0 < hi < 1  # 0/n still has an honest upper bound
    lo, hi = wilson_interval(n, n)
    assert hi == 1.0 and 0 < lo < 1


@given(st.integers(min_value=10, max_value=500))
def test_wilson_narrows_with_n(n):
    lo1, hi1 = wilson_interval(n // 2, n)
    lo4, hi4 = wilson_interval(2 * n, 4 * n)
    assert hi4 - lo4 < hi1 - lo1


def test_wilson_known_value():
    # Textbook: 81/263 -> (0.2553, 0.3662) (Wilson 1927 example as used by Newcombe 1998).
    lo, hi = wilson_interval(81, 263)
    assert math.isclose(lo, 0.2553, abs_tol=5e-4) and math.isclose(hi, 0.3662, abs_tol=5e-4)


def test_lm_eval_stderr_matches_sample_std():
    import numpy as np

    x = np.array([1] * 7 + [0] * 13, dtype=float)
    assert math.isclose(lm_eval_stderr(7, 20), x.std(ddof=1) / math.sqrt(len(x)))


def test_score_from_bools_and_empty():
    s = score_bools([True, False, True, True])
    assert (s.k, s.n, s.p) == (3, 4, 0.75)
    e = score(0, 0)
    assert math.isnan(e.p) and (e.lo, e.hi) == (0.0, 1.0)


def test_paired_flips_need_fewer_items_than_unpaired_accuracy():
    from pareto_atlas.quality.stats import items_for_halfwidth

    need = items_for_halfwidth(flips=4, n=40, halfwidth=0.05, p=0.5)
    # discordance 0.1: 1.96^2 * 0.1 / 0.05^2 = 154 paired; 1.96^2 * 2 * 0.25 / 0.05^2 = 769 unpaired
    assert need["paired"] == 154 and need["unpaired"] == 769 and not need["floored"]
    assert items_for_halfwidth(flips=0, n=40, halfwidth=0.05)["floored"]
    assert items_for_halfwidth(flips=8, n=40, halfwidth=0.05)["paired"] > need["paired"]
    with pytest.raises(ValueError):
        items_for_halfwidth(flips=1, n=0, halfwidth=0.05)
