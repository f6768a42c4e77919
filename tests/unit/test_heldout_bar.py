"""The carried bar is set on held-out figures: it covers at least BAR_QUANTILE of them (no interpolation
leaves it short), pools every scheme (a scheme far off widens it), and its split check counts a bar set on
one half of the row groups against the other half's figures."""

from __future__ import annotations

import numpy as np
import pytest

from pareto_atlas.calibrate.fit import TARGETS
from pareto_atlas.calibrate.heldout_bar import (
    BAR_QUANTILE,
    LEVELS,
    LOGO_TARGET,
    UNSEEN_BAR,
    carried_bar,
    coverage,
    group_bar,
    group_level,
    quantile_bar,
)

TTFT, THR = TARGETS.index("ttft_p50_ms"), TARGETS.index("throughput_tok_s")


@pytest.mark.parametrize("n", [1, 2, 7, 9, 10, 11, 19, 101])
def test_the_bar_covers_its_share_and_is_the_smallest_that_does(n):
    rng = np.random.default_rng(n)
    v = rng.normal(0, 0.3, n)
    bar = quantile_bar(v)
    assert coverage(v, bar) >= BAR_QUANTILE
    below = np.abs(v)[np.abs(v) < bar]
    if len(below):  # the next smaller figure would not cover its share
        assert coverage(v, below.max()) < BAR_QUANTILE


def test_ten_figures_bar_is_the_ninth_not_an_interpolation():
    v = np.arange(1, 11) / 10.0  # 0.1 .. 1.0
    assert quantile_bar(v) == 0.9  # numpy's default would interpolate to 0.91, the ninth figure covers 90 %
    assert quantile_bar(np.r_[v, np.nan]) == 0.9  # NaN: not a figure
    assert np.isnan(quantile_bar(np.array([np.nan])))
    with pytest.raises(ValueError, match="quantile"):
        quantile_bar(v, 0.0)


def _held(n: int, ttft: float, thr: float) -> np.ndarray:
    h = np.full((n, len(TARGETS)), np.nan)
    h[:, TTFT], h[:, THR] = ttft, thr
    return h


def test_every_scheme_sets_the_bar_and_a_far_scheme_widens_it():
    groups = np.array(["a", "a", "b", "b"])
    near = carried_bar({"LOSO": _held(4, 0.1, 0.05)}, TARGETS, groups)
    assert (near.lat, near.thr, near.n_lat, near.n_thr) == (0.1, 0.05, 4, 4)
    far = carried_bar({"LOSO": _held(4, 0.1, 0.05), "LOEO": _held(4, -0.8, 0.05)}, TARGETS, groups)
    assert far.lat == 0.8  # half the figures are 80 % off: the p90 is theirs
    assert coverage(np.r_[_held(4, 0.1, 0.05)[:, TTFT], _held(4, -0.8, 0)[:, TTFT]], far.lat) == 1.0
    none = carried_bar({"LOSO": np.full((4, len(TARGETS)), np.nan)}, TARGETS, groups)
    assert (none.lat, none.thr) == (UNSEEN_BAR, UNSEEN_BAR)


def test_the_split_check_counts_the_other_halfs_figures():
    # groups a, c set one half's bar (10 %), b, d hold 50 % errors: a bar from a/c covers none of b/d
    groups = np.array(["a", "b", "c", "d"])
    h = _held(4, 0.1, 0.0)
    h[[1, 3], TTFT] = 0.5
    bar = carried_bar({"LOSO": h}, TARGETS, groups)
    a_to_b, b_to_a = bar.split_coverage
    assert a_to_b == pytest.approx(0.5)  # b/d's throughput figures (0) are inside, their TTFT (50 %) not
    assert b_to_a == 1.0  # a 50 % bar covers a/c's 10 %
    one = carried_bar({"LOSO": h}, TARGETS, np.array(["a"] * 4))
    assert all(np.isnan(one.split_coverage)) and "no split" in one.describe()


def _grouped(n_groups: int, per: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    # each group's errors share an offset (one sweep, one miss): figures within a group move together
    rng = np.random.default_rng(seed)
    off = rng.lognormal(-2.0, 1.0, n_groups)
    v = np.concatenate([o + rng.normal(0, 0.02, per) for o in off])
    return v, np.repeat([f"g{i}" for i in range(n_groups)], per)


def _logo(v: np.ndarray, g: np.ndarray, level: float) -> float:
    labs = list(dict.fromkeys(g))
    return float(np.mean(np.concatenate([np.abs(v[g == lab]) <= quantile_bar(v[g != lab], level) for lab in labs])))


def test_the_level_is_the_smallest_whose_bar_covers_each_left_out_group():
    v, g = _grouped(12, 8, 3)
    level = group_level(v, g)
    assert level in LEVELS and level > BAR_QUANTILE
    assert _logo(v, g, BAR_QUANTILE) < BAR_QUANTILE  # the plain p90 does not carry to a left-out group here
    assert _logo(v, g, level) >= BAR_QUANTILE
    assert all(_logo(v, g, x) < LOGO_TARGET for x in LEVELS if x < level)  # no smaller level reaches the target
    bar, lv = group_bar(v, g)
    assert lv == level and bar == quantile_bar(v, level) and bar > quantile_bar(v)


def test_one_group_takes_the_top_level_and_labels_must_match_figures():
    rng = np.random.default_rng(0)
    v = rng.normal(0, 0.2, 400)
    # every group draws from the same spread: no correction past the target
    g = np.array([f"g{i % 20}" for i in range(400)])
    assert group_level(v, g) <= LOGO_TARGET + 1e-9
    assert group_level(v, np.array(["a"] * 400)) == LEVELS[-1] == 1.0  # one group: its largest figure
    with pytest.raises(ValueError, match="groups"):
        group_level(v, g[:10])


def test_the_corrected_bar_carries_to_groups_it_never_saw_where_the_plain_p90_does_not():
    # 24 groups of 4 rows, 8 draws: the bar set without each group covers 90 % of it, the plain p90 not
    nested, split = [], []
    for seed in range(8):
        v, g = _grouped(24, 4, seed)
        h = np.full((len(v), len(TARGETS)), np.nan)
        h[:, TTFT] = v
        bar = carried_bar({"LOSO": h}, TARGETS, g)
        assert bar.level[0] > BAR_QUANTILE and bar.p90[0] == quantile_bar(v) < bar.lat
        assert _logo(v, g, BAR_QUANTILE) < BAR_QUANTILE
        nested.append(bar.nested_coverage)
        split.extend(bar.split_coverage)
    assert min(nested) >= BAR_QUANTILE
    assert np.mean(split) >= BAR_QUANTILE  # one split of 12 groups each way is noisy; on average it carries
