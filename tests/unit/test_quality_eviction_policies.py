"""Eviction policies as pure functions (numpy only; no torch needed)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

from pareto_atlas.quality.eviction.decode import _chunks
from pareto_atlas.quality.eviction.policies import EvictionConfig, maxpool1d, select


def pos_of(length: int, heads: int = 2) -> np.ndarray:
    return np.tile(np.arange(length), (heads, 1))


def test_streaming_keeps_sinks_and_recent_window():
    cfg = EvictionConfig("streaming", 0.5, sinks=4)
    idx = select(cfg, 12, pos_of(40))
    assert idx.tolist()[0] == [0, 1, 2, 3] + list(range(32, 40))


def test_h2o_keeps_heavy_hitters_far_back():
    cfg = EvictionConfig("h2o", 0.5, heavy_frac=0.5)
    acc = np.ones((2, 40))
    acc[0, 7] = 50.0          # head 0 attends heavily to entry 7
    acc[1, 11] = 50.0         # head 1 to entry 11: heads choose independently
    idx = select(cfg, 10, pos_of(40), acc=acc)
    assert 7 in idx[0] and 11 not in idx[0] and 11 in idx[1]
    assert set(range(35, 40)) <= set(idx[0])  # the recent half of the budget


def test_snapkv_keeps_window_and_pooled_neighbours():
    cfg = EvictionConfig("snapkv", 0.5, window=4, pool=3)
    obs = np.zeros((1, 30))
    obs[0, 10] = 9.0
    idx = select(cfg, 7, pos_of(30, 1), obs=obs)[0].tolist()
    assert {9, 10, 11} <= set(idx) and {26, 27, 28, 29} <= set(idx)


def test_nothing_evicted_under_budget_or_when_full():
    assert select(EvictionConfig("h2o", 0.5), 50, pos_of(20), acc=np.ones((2, 20))).shape == (2, 20)
    assert select(EvictionConfig(), 5, pos_of(20)).shape == (2, 20)


def test_scores_are_required():
    with pytest.raises(ValueError, match="h2o"):
        select(EvictionConfig("h2o", 0.5), 4, pos_of(10))
    with pytest.raises(ValueError, match="snapkv"):
        select(EvictionConfig("snapkv", 0.5), 4, pos_of(10))


@given(st.sampled_from(["streaming", "h2o", "snapkv"]), st.integers(1, 80), st.integers(1, 80), st.integers(0, 2**31 - 1))
def test_selection_is_a_sorted_subset_of_the_budget_size(policy, length, budget, seed):
    rng = np.random.default_rng(seed)
    pos = np.stack([np.sort(rng.choice(1000, length, replace=False)) for _ in range(3)])
    scores = rng.random((3, length))
    idx = select(EvictionConfig(policy, 0.5), budget, pos, acc=scores, obs=scores)
    assert idx.shape == (3, min(budget, length))
    for row in idx:
        assert np.all(np.diff(row) > 0) and row.min() >= 0 and row.max() < length


def test_budget_and_labels():
    assert EvictionConfig("h2o", 0.25).budget(1000) == 250
    assert EvictionConfig("h2o", 0.01).budget(100) == 16          # min_budget
    assert EvictionConfig("h2o", 1.0).budget(100) is None and EvictionConfig("h2o", 1.0).label() == "full"
    assert EvictionConfig("snapkv", 0.5, chunk=0).label() == "snapkv@0.5/oneshot"
    with pytest.raises(ValueError, match="streaming, h2o, snapkv"):
        EvictionConfig("pyramid", 0.5)
    with pytest.raises(ValueError, match="keep"):
        EvictionConfig("h2o", 0.0)


def test_chunks_put_the_remainder_first():
    assert _chunks(300, 128) == [(0, 44), (44, 172), (172, 300)]
    assert _chunks(256, 128) == [(0, 128), (128, 256)]
    assert _chunks(50, 128) == [(0, 50)] and _chunks(300, 0) == [(0, 300)]


def test_maxpool_same_length():
    x = np.array([[0.0, 5.0, 0.0, 0.0, 1.0]])
    assert maxpool1d(x, 3).tolist() == [[5.0, 5.0, 5.0, 1.0, 1.0]]
