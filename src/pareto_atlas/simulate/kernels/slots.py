"""llama.cpp's slot choice, compiled: the inner loop of simulate.prefix_cache.slot_cached_tokens, which
the atlas runs for every llama.cpp point with its prompt cache on (pass after pass with the DES), on
token-exact sequences hundreds long."""

from __future__ import annotations

import numpy as np
from numba import njit

from pareto_atlas.simulate.kernels._cache import CACHE


@njit(cache=CACHE)
def slot_reuse(
    tok: np.ndarray,
    length: np.ndarray,
    order: np.ndarray,
    arrive: np.ndarray,
    end: np.ndarray,
    prompt: np.ndarray,
    slots: int,
    similarity: float,
    block: int,
    out: np.ndarray,
) -> None:
    """Fills out[i]: prompt tokens request i reuses. tok: one row of block ids per request, padded with an
    id none has, and a last row for an empty slot; length: each row's ids; order: requests by arrival.
    Each request takes, among the slots idle when it arrives (or the first freed), the one whose last
    sequence shares the longest leading run with it (the lowest slot on a tie), unless that run is at
    most `similarity` of its prompt or the slot never served: then the least recently released."""
    empty = tok.shape[0] - 1
    held = np.full(slots, empty, np.int64)
    free_at = np.full(slots, -np.inf)
    used_at = np.full(slots, -np.inf)
    common = np.zeros(slots, np.int64)
    for i in order:
        at = max(arrive[i], free_at.min())  # with no slot idle, the request waits for the first one freed
        m = length[i]
        best = -1
        for s in range(slots):
            if free_at[s] > at:
                continue
            j = held[s]
            k = 0
            while k < m and tok[j, k] == tok[i, k]:
                k += 1
            common[s] = k * block
            if best < 0 or common[s] > common[best]:
                best = s
        if length[held[best]] == 0 or common[best] <= similarity * prompt[i]:
            best = -1
            for s in range(slots):
                if free_at[s] <= at and (best < 0 or used_at[s] < used_at[best]):
                    best = s
        out[i] = min(common[best], prompt[i] - 1)
        held[best] = i
        free_at[best] = max(end[i], at)
        used_at[best] = free_at[best]
