"""Which KV entries to keep (StreamingLLM, H2O, SnapKV, PyramidKV) and which to read (top-k sparse
attention), as pure functions of cache state.

No torch here (numpy only), so the policies are testable anywhere. State per layer: for each KV
head h and cached entry j, its original position `pos[h, j]`, its accumulated attention
`acc[h, j]` (H2O) and the attention it got from the latest observation window `obs[h, j]`
(SnapKV). Scores are summed over the query heads that share a KV head (GQA), so each KV head
keeps its own entries but every head keeps the same number (the cache stays rectangular per layer).

PyramidKV (Cai et al., 2024, "PyramidKV: Dynamic KV Cache Compression based on Pyramidal
Information Funneling", arXiv 2406.02069) selects within a layer exactly as SnapKV does, but gives
each layer its own budget (`pyramid_budgets`): most in the lowest layer, where attention is spread
wide, fewest in the top one, where it has funnelled onto a few entries, linearly in between, with
the same total over the layers as SnapKV's uniform budget (so the same KV memory). Its one own
constant is the reference implementation's default steepness beta = 20; the window (32) and the
max-pool kernel (7) are SnapKV's here, so the two differ only in how the budget is spread.

Top-k sparse attention (`topk`) evicts nothing: every decode step, each query head reads only the
keys with the highest scores q·k (`select_topk`). It is the exact top-k, an oracle: approximate
methods (SparQ, Quest) only estimate which keys those are, so at the same budget it is an upper
bound on their quality, an optimistic stand-in for them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# the names (canonical and aliases) are the study's too: they live in spec, which imports nothing above it
from pareto_atlas.spec.eviction_policies import ALIASES, EVICTING, POLICIES, canonical_policy  # noqa: E402,F401


@dataclass(frozen=True)
class EvictionConfig:
    policy: str = "none"
    keep: float = 1.0  # KV budget / prompt length (kv_keep); topk: keys read / keys cached (sparse_budget)
    sinks: int = 4  # StreamingLLM: first tokens always kept (attention sinks)
    window: int = 32  # SnapKV/PyramidKV observation window (also always kept)
    pool: int = 7  # SnapKV/PyramidKV max-pool kernel over positions (keeps neighbours of a hit)
    beta: float = 20.0  # PyramidKV: the top layer keeps 1/beta of the mean budget beyond the window
    heavy_frac: float = 0.5  # H2O: share of the budget for heavy hitters; the rest is the recent window
    chunk: int = 128  # prefill chunk, compressed after each (bounded memory); 0 = whole prompt, then compress once
    min_budget: int = 16  # entries kept per head (evicting) or keys read per query (topk), at least

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"eviction policy: {self.policy!r} is not one of {', '.join(POLICIES)}")
        if not 0.0 < self.keep <= 1.0:
            raise ValueError(f"eviction keep: {self.keep} must be in (0, 1]")
        if not 0.0 <= self.heavy_frac <= 1.0:
            raise ValueError(f"eviction heavy_frac: {self.heavy_frac} must be in [0, 1]")
        if self.chunk < 0 or self.window < 1 or self.pool < 1 or self.sinks < 0:
            raise ValueError("eviction chunk must be >= 0, window and pool >= 1, sinks >= 0")
        if self.beta < 1.0:
            raise ValueError(f"eviction beta: {self.beta} must be >= 1 (1: every layer the same budget)")

    @property
    def evicts(self) -> bool:
        return self.policy in EVICTING and self.keep < 1.0

    @property
    def sparse(self) -> bool:
        """Decode steps read the top-k keys only (the cache stays full). At keep 1 every key is
        read, through the same code: that is how the sparse path is checked against the full cache."""
        return self.policy == "topk"

    @property
    def reference(self) -> bool:
        """Every key kept and read: the full cache the other configurations are compared with."""
        return self.policy == "none" or self.keep >= 1.0

    @property
    def needs_attention(self) -> bool:
        return self.evicts and self.policy in ("h2o", "snapkv", "pyramidkv")

    @property
    def evicts_during_decode(self) -> bool:
        """SnapKV and PyramidKV compress the prompt only (as published); the others hold the budget
        while decoding."""
        return self.evicts and self.policy in ("streaming", "h2o")

    def budget(self, n_prompt: int) -> int | None:
        """Cache entries allowed per head, or None for the full cache."""
        if not self.evicts:
            return None
        return max(self.min_budget, math.ceil(self.keep * n_prompt))

    def budgets(self, n_prompt: int, n_layers: int) -> tuple[int, ...] | None:
        """Cache entries allowed per head in each layer, or None for the full cache: `budget` in
        every layer, except under PyramidKV, whose layers share the same total unevenly."""
        b = self.budget(n_prompt)
        if b is None:
            return None
        if self.policy == "pyramidkv":
            return pyramid_budgets(b * n_layers, n_layers, self.beta, self.window, length=n_prompt)
        return (b,) * n_layers

    def label(self) -> str:
        if self.reference:
            return "full"
        return f"{self.policy}@{self.keep:g}" + ("/oneshot" if self.evicts and self.chunk == 0 else "")


def pyramid_budgets(
    total: int, n_layers: int, beta: float = 20.0, window: int = 32, length: int | None = None
) -> tuple[int, ...]:
    """PyramidKV's per-layer budgets: `total` entries per head over `n_layers` layers, non-increasing
    with the layer, summing to `total` exactly.

    As in the paper's allocation (its reference implementation's default beta = 20, used here), each
    layer keeps its observation window and shares what is left linearly: with F the mean share per
    layer beyond the window, the top layer gets F/beta, the lowest 2F - F/beta (so the mean stays F).
    Each layer thus keeps at least `window`, or total // n_layers where that is less. A layer cannot
    keep more than the prompt's `length` entries: where the lowest layer would, it gets all of them
    and the top layer what keeps the mean (as the reference code does). Rounding: every share is
    floored, then the entries left (fewer than n_layers) go one each to the largest fractional parts,
    lower layer first on a tie, which keeps the order non-increasing.
    """
    if n_layers < 1 or total < 0:
        raise ValueError(f"pyramid budgets: n_layers {n_layers} must be >= 1 and total {total} >= 0")
    if length is not None and total >= n_layers * length:
        return (length,) * n_layers  # every layer keeps the whole prompt
    floor = min(window, total // n_layers)
    free = total - floor * n_layers  # entries beyond the windows, over all layers
    if n_layers == 1:
        return (total,)
    mean = free / n_layers
    lo = mean / beta
    hi = 2 * mean - lo
    if length is not None and hi > length - floor:
        hi = length - floor
        lo = 2 * mean - hi
    share = np.round(hi - (hi - lo) * np.arange(n_layers) / (n_layers - 1), 9)  # sums to `free`
    base = np.floor(share).astype(np.int64)
    order = np.lexsort((np.arange(n_layers), -(share - base)))
    base[order[: free - int(base.sum())]] += 1
    return tuple(int(b) + floor for b in base)


def _top(values: np.ndarray, k: int, mask: np.ndarray | None = None) -> np.ndarray:
    """Indices of the k largest values (ties broken by lower index: deterministic)."""
    v = values.astype(float).copy()
    if mask is not None:
        v[~mask] = -np.inf
    order = np.lexsort((np.arange(len(v)), -v))
    return order[:k]


def maxpool1d(x: np.ndarray, kernel: int) -> np.ndarray:
    """Same-length max pooling along the last axis (odd kernel, -inf padding)."""
    if kernel <= 1:
        return x
    half = kernel // 2
    padded = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(half, half)], constant_values=-np.inf)
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1, axis=-1)
    return windows.max(axis=-1)


def select(
    cfg: EvictionConfig, budget: int, pos: np.ndarray, acc: np.ndarray | None = None, obs: np.ndarray | None = None
) -> np.ndarray:
    """Indices to keep, shape [heads, min(budget, L)], ascending (cache order = position order).
    `budget` is this layer's (`EvictionConfig.budgets`); PyramidKV then selects as SnapKV does."""
    heads, length = pos.shape
    if length <= budget or not cfg.evicts:
        return np.tile(np.arange(length), (heads, 1))
    keep = np.empty((heads, budget), dtype=np.int64)
    for h in range(heads):
        p = pos[h]
        if cfg.policy == "streaming":
            oldest = _top(-p, min(cfg.sinks, budget))
            chosen = np.zeros(length, bool)
            chosen[oldest] = True
            chosen[_top(p, budget - chosen.sum(), ~chosen)] = True
        elif cfg.policy == "h2o":
            if acc is None:
                raise ValueError("eviction h2o: needs accumulated attention scores")
            n_recent = budget - int(budget * cfg.heavy_frac)
            chosen = np.zeros(length, bool)
            chosen[_top(p, n_recent)] = True
            chosen[_top(acc[h], budget - n_recent, ~chosen)] = True
        else:  # snapkv, pyramidkv
            if obs is None:
                raise ValueError(f"eviction {cfg.policy}: needs observation-window attention scores")
            chosen = np.zeros(length, bool)
            chosen[_top(p, min(cfg.window, budget))] = True
            pooled = maxpool1d(obs[h][None, :], cfg.pool)[0]
            chosen[_top(pooled, budget - chosen.sum(), ~chosen)] = True
        keep[h] = np.flatnonzero(chosen)
    return keep


def attended_count(keep: float, visible: np.ndarray, min_budget: int) -> np.ndarray:
    """Keys a query reads under top-k attention when it may see `visible` keys: ceil(keep x visible),
    at least `min_budget`, at most all of them."""
    visible = np.asarray(visible)
    return np.minimum(visible, np.maximum(min_budget, np.ceil(keep * visible))).astype(np.int64)


def select_topk(scores: np.ndarray, visible: np.ndarray, keep: float, min_budget: int) -> np.ndarray:
    """Top-k sparse attention: which keys each query row reads, bool like `scores` [..., q, L].

    Each row keeps its own `attended_count` keys of highest score among those `visible` to it (the
    causal mask, broadcast to `scores`); ties go to the lower index, so the choice is deterministic.
    """
    visible = np.broadcast_to(visible, scores.shape)
    s = np.where(visible, scores.astype(float), -np.inf)
    order = np.argsort(-s, axis=-1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.broadcast_to(np.arange(s.shape[-1]), s.shape), axis=-1)
    k = attended_count(keep, visible.sum(-1), min_budget)
    return (rank < k[..., None]) & visible
