"""Eviction policies and top-k sparse attention as pure functions (numpy only; no torch needed)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

from pareto_atlas.quality.eviction.decode import _chunks
from pareto_atlas.quality.eviction.policies import (
    EvictionConfig,
    attended_count,
    canonical_policy,
    maxpool1d,
    select,
    select_topk,
)


def pos_of(length: int, heads: int = 2) -> np.ndarray:
    return np.tile(np.arange(length), (heads, 1))


def test_streaming_keeps_sinks_and_recent_window():
    cfg = EvictionConfig("streaming", 0.5, sinks=4)
    idx = select(cfg, 12, pos_of(40))
    assert idx.tolist()[0] == [0, 1, 2, 3] + list(range(32, 40))


def test_h2o_keeps_heavy_hitters_far_back():
    cfg = EvictionConfig("h2o", 0.5, heavy_frac=0.5)
    acc = np.ones((2, 40))
    acc[0, 7] = 50.0  # head 0 attends heavily to entry 7
    acc[1, 11] = 50.0  # head 1 to entry 11: heads choose independently
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


@given(
    st.sampled_from(["streaming", "h2o", "snapkv"]), st.integers(1, 80), st.integers(1, 80), st.integers(0, 2**31 - 1)
)
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
    assert EvictionConfig("h2o", 0.01).budget(100) == 16  # min_budget
    assert EvictionConfig("h2o", 1.0).budget(100) is None and EvictionConfig("h2o", 1.0).label() == "full"
    assert EvictionConfig("snapkv", 0.5, chunk=0).label() == "snapkv@0.5/oneshot"
    with pytest.raises(ValueError, match="streaming, h2o, snapkv, pyramidkv, topk"):
        EvictionConfig("lru", 0.5)
    with pytest.raises(ValueError, match="keep"):
        EvictionConfig("h2o", 0.0)


def test_chunks_put_the_remainder_first():
    assert _chunks(300, 128) == [(0, 44), (44, 172), (172, 300)]
    assert _chunks(256, 128) == [(0, 128), (128, 256)]
    assert _chunks(50, 128) == [(0, 50)] and _chunks(300, 0) == [(0, 300)]


def test_maxpool_same_length():
    x = np.array([[0.0, 5.0, 0.0, 0.0, 1.0]])
    assert maxpool1d(x, 3).tolist() == [[5.0, 5.0, 5.0, 1.0, 1.0]]


def causal(q: int, length: int) -> np.ndarray:
    """Which of `length` cached keys each of the last q tokens may see."""
    return np.tril(np.ones((q, length), bool), length - q)


def test_topk_reads_each_rows_highest_scores_among_what_it_may_see():
    scores = np.array(
        [
            [5.0, 1.0, 4.0, 3.0, 2.0, 9.0],  # row 0 sees keys 0..4: its 9 is in the future
            [0.0, 6.0, 1.0, 2.0, 3.0, 8.0],
        ]
    )
    chosen = select_topk(scores, causal(2, 6), keep=0.5, min_budget=1)
    assert np.flatnonzero(chosen[0]).tolist() == [0, 2, 3]
    assert np.flatnonzero(chosen[1]).tolist() == [1, 4, 5]


def test_topk_count_is_a_share_of_the_visible_keys_with_a_floor():
    assert attended_count(0.25, np.array([1000, 101, 40, 10]), 16).tolist() == [250, 26, 16, 10]
    assert attended_count(1.0, np.array([7, 300]), 16).tolist() == [7, 300]


def test_topk_ties_go_to_the_earlier_key_and_keep_one_reads_everything_visible():
    assert np.flatnonzero(select_topk(np.zeros(8), np.ones(8, bool), 0.25, 1)).tolist() == [0, 1]
    vis = causal(3, 10)
    assert (select_topk(np.random.default_rng(0).random((4, 3, 10)), vis, 1.0, 16) == vis).all()


@given(st.integers(1, 6), st.integers(1, 90), st.floats(0.01, 1.0), st.integers(1, 20), st.integers(0, 2**31 - 1))
def test_topk_reads_exactly_its_count_and_nothing_scored_lower(q, extra, keep, floor, seed):
    length = q + extra - 1
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(3, q, length))
    vis = causal(q, length)
    chosen = select_topk(scores, vis, keep, floor)
    assert not (chosen & ~vis).any()
    assert (chosen.sum(-1) == attended_count(keep, vis.sum(-1), floor)).all()
    for h in range(3):
        for r in range(q):
            read, skipped = scores[h, r][chosen[h, r]], scores[h, r][vis[r] & ~chosen[h, r]]
            assert not len(skipped) or read.min() >= skipped.max()


def test_topk_evicts_nothing_and_is_named_like_the_atlas_reads_it():
    cfg = EvictionConfig(canonical_policy("sparse"), 0.25)
    assert cfg.policy == "topk" and cfg.sparse and not cfg.evicts and not cfg.reference
    assert cfg.budget(1000) is None and not cfg.needs_attention and cfg.label() == "topk@0.25"
    assert EvictionConfig("topk", 0.25, chunk=0).label() == "topk@0.25"  # no eviction: nothing one-shot
    assert EvictionConfig("topk", 1.0).reference and EvictionConfig("topk", 1.0).label() == "full"
    assert select(cfg, 16, pos_of(40)).shape == (2, 40)
    with pytest.raises(ValueError, match="topk"):
        canonical_policy("quest")
