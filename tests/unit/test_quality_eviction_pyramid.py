"""PyramidKV (Cai et al., 2024): SnapKV's selection under per-layer budgets that fall linearly with
the layer and keep SnapKV's total (numpy only; no torch needed)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

from pareto_atlas.quality.eviction.policies import EVICTING, EvictionConfig, canonical_policy, pyramid_budgets, select
from pareto_atlas.spec.knobs import EVICTION, Knobs
from pareto_atlas.spec.study import EvictionSpec


@given(
    st.integers(1, 40),
    st.integers(1, 3000),
    st.floats(0.0, 1.0),
    st.floats(1.0, 40.0),
    st.integers(1, 64),
    st.booleans(),
)
def test_budgets_sum_to_the_uniform_total_and_fall_with_the_layer(n_layers, length, share, beta, window, capped):
    total = round(share * n_layers * length)
    b = pyramid_budgets(total, n_layers, beta, window, length=length if capped else None)
    assert len(b) == n_layers and sum(b) == total
    assert all(x >= y for x, y in zip(b, b[1:]))
    assert min(b) >= min(window, total // n_layers)
    if capped:
        assert max(b) <= length


def test_budgets_follow_the_papers_line_from_2F_minus_F_over_beta_down_to_F_over_beta():
    # 30 layers, mean 64 per layer, window 32: F = 32 beyond the window, top 32/20, bottom 64 - 32/20
    b = pyramid_budgets(30 * 64, 30, beta=20, window=32)
    assert b[0] == pytest.approx(32 + 64 - 1.6, abs=1) and b[-1] == pytest.approx(32 + 1.6, abs=1)
    steps = np.diff(b)
    assert steps.max() - steps.min() <= 1  # linear, up to the rounding of each layer


def test_degenerate_budgets():
    assert pyramid_budgets(100, 1) == (100,)  # one layer: all of it
    assert pyramid_budgets(30 * 256, 30, length=256) == (256,) * 30  # everything: every layer whole
    assert pyramid_budgets(30 * 20, 30, window=32) == (20,) * 30  # below the window: nothing to spread
    assert pyramid_budgets(4 * 50, 4, beta=1.0, window=8) == (50,) * 4  # beta 1: uniform
    assert EvictionConfig("pyramidkv", 1.0).budgets(256, 30) is None  # keep 1 evicts nothing
    with pytest.raises(ValueError, match="n_layers"):
        pyramid_budgets(10, 0)
    with pytest.raises(ValueError, match="beta"):
        EvictionConfig("pyramidkv", 0.5, beta=0.5)


def test_config_budgets_keep_snapkvs_total_and_cap_the_low_layers_at_the_prompt():
    snap, pyr = EvictionConfig("snapkv", 0.25), EvictionConfig("pyramidkv", 0.25)
    assert snap.budgets(1000, 24) == (250,) * 24
    b = pyr.budgets(1000, 24)
    assert sum(b) == 250 * 24 and b[0] > 250 > b[-1] >= pyr.window
    # at keep 0.9 the line would give layer 0 more than the prompt holds: it keeps all, the rest keep the total
    b = EvictionConfig("pyramidkv", 0.9).budgets(256, 30)
    assert b[0] == 256 and sum(b) == 231 * 30 and b[-1] < 231


def needle_scores(length: int, window: int) -> np.ndarray:
    """Observation-window attention [1 head, length]: 20 distractors at 5, a needle at 3 (rank 21
    outside the window), background 0."""
    obs = np.zeros((1, length))
    obs[0, 10:30] = 5.0
    obs[0, 100] = 3.0
    obs[0, -window:] = 1.0
    return obs


def test_the_needle_is_kept_low_in_the_pyramid_and_dropped_at_its_top():
    length, n_layers = 200, 4
    cfg = EvictionConfig("pyramidkv", 0.25, window=8, pool=1)
    budgets = cfg.budgets(length, n_layers)
    # mean 50 each: 8 + 42 beyond the window, from 8 + 2 * 42 - 2.1 down to 8 + 2.1, rounded
    assert budgets == (90, 63, 37, 10)
    pos, obs = np.arange(length)[None], needle_scores(length, cfg.window)
    kept = [select(cfg, b, pos, obs=obs)[0] for b in budgets]
    assert sum(len(k) for k in kept) == sum(budgets) == 50 * n_layers
    for k, b in zip(kept, budgets):
        assert len(k) == b and set(range(length - 8, length)) <= set(k)  # the window, in every layer
    assert 100 in kept[0] and 100 in kept[1] and 100 in kept[2]
    assert 100 not in kept[3]  # 10 = window + 2 there: the needle ranks 21st
    assert set(kept[3]) - set(range(length - 8, length)) <= set(range(10, 30))
    # SnapKV at the same keep gives every layer 50, enough for the needle
    assert 100 in select(EvictionConfig("snapkv", 0.25, window=8, pool=1), 50, pos, obs=obs)[0]


def test_pyramidkv_needs_the_observation_window():
    with pytest.raises(ValueError, match="pyramidkv"):
        select(EvictionConfig("pyramidkv", 0.5), 4, np.tile(np.arange(10), (2, 1)))


def test_pyramidkv_is_registered_where_measured_and_simulated_points_meet():
    assert canonical_policy("pyramid") == canonical_policy("PyramidKV") == "pyramidkv" and "pyramidkv" in EVICTING
    assert set(EVICTING) <= set(EVICTION)  # every measured policy is a simulated knob value
    assert Knobs(eviction="pyramidkv", kv_keep=0.25).eviction == "pyramidkv"
    cfg = EvictionConfig("pyramidkv", 0.25)
    assert cfg.evicts and cfg.needs_attention and not cfg.evicts_during_decode and not cfg.sparse
    assert cfg.label() == "pyramidkv@0.25"
    assert EvictionSpec.model_validate({"policies": ["pyramid", "snapkv", "pyramidkv"]}).policies == [
        "pyramidkv",
        "snapkv",
    ]
