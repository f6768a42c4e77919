"""Summaries of a simulated run: percentiles from order statistics, and the SUMMARY metrics."""

from __future__ import annotations

import numpy as np
from numba import njit

from pareto_atlas.simulate.kernels._cache import CACHE


@njit(cache=CACHE)
def _ranks(n: int, q: float) -> tuple[float, int, int]:
    # Numpy's default ("linear") percentile: interpolate at h between the closest ranks lo, hi.
    h = (n - 1) * q
    lo = int(np.floor(h))
    return h, lo, min(lo + 1, n - 1)


@njit(cache=CACHE)
def _percentiles(x: np.ndarray, q1: float, q2: float) -> tuple[float, float]:
    # Two percentiles of x from the four order statistics they need, where a full sort was most
    # of the summary's time on long runs.
    n = x.shape[0]
    if n == 0:
        return np.nan, np.nan
    h1, lo1, hi1 = _ranks(n, q1)
    h2, lo2, hi2 = _ranks(n, q2)
    v = _order_stats(x, np.array([lo1, hi1, lo2, hi2]))
    return v[0] + (h1 - lo1) * (v[1] - v[0]), v[2] + (h2 - lo2) * (v[3] - v[2])


@njit(cache=CACHE)
def _order_stats(x: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    # The values a sort of x would put at these ranks. One pass counts x into buckets
    # of equal width, which are in value order, to find the bucket holding each rank; only that
    # bucket's values are then sorted. Sorting all of x was most of the summary's time.
    lo, hi = np.min(x), np.max(x)
    n_b = x.shape[0] // 8 + 1
    span = hi - lo
    # No finite, nonzero bucket width with NaN, infinities, all values equal, or a subnormal span.
    if not (span > 0.0 and np.isfinite(span) and np.isfinite(n_b / span)):
        return np.sort(x)[ranks]
    scale = n_b / span
    count = np.zeros(n_b + 1, np.int64)
    for v in x:
        count[int((v - lo) * scale)] += 1
    out = np.empty(ranks.shape[0])
    b = 0
    below = 0  # values in the buckets before b
    held_b = -1
    held = np.empty(0)
    for j in range(ranks.shape[0]):
        if ranks[j] < below:  # ranks out of order: walk the buckets from the start
            b = 0
            below = 0
        while below + count[b] <= ranks[j]:
            below += count[b]
            b += 1
        if b != held_b:
            held = np.empty(count[b])
            m = 0
            for v in x:
                if int((v - lo) * scale) == b:
                    held[m] = v
                    m += 1
            held.sort()
            held_b = b
        out[j] = held[ranks[j] - below]
    return out


SUMMARY = (
    "ttft_p50_ms",
    "ttft_p99_ms",
    "tpot_p50_ms",
    "tpot_p99_ms",
    "e2e_p50_ms",
    "e2e_p99_ms",
    "throughput_tok_s",
    "goodput_rps",
)


@njit(cache=CACHE)
def summarize(arrival, first_t, finish_t, output, ttft_slo, tpot_slo, out):
    """Fill out[8] with the SUMMARY metrics (ms, tok/s, req/s); goodput NaN when no SLO is set."""
    n = arrival.shape[0]
    ttft = np.empty(n)
    e2e = np.empty(n)
    tpot = np.empty(n)
    nt = 0
    good = 0
    t_start = np.inf
    t_end = 0.0
    toks = 0.0
    for i in range(n):
        ttft[i] = first_t[i] - arrival[i]
        e2e[i] = finish_t[i] - arrival[i]
        tp = np.nan
        if output[i] > 1:
            tp = (finish_t[i] - first_t[i]) / (output[i] - 1)
            tpot[nt] = tp
            nt += 1
        if ttft[i] <= ttft_slo and (np.isnan(tp) or tp <= tpot_slo):
            good += 1
        t_start = min(t_start, arrival[i])
        t_end = max(t_end, finish_t[i])
        toks += output[i]
    for j, x in enumerate((ttft, tpot[:nt], e2e)):
        p50, p99 = _percentiles(x, 0.5, 0.99)
        out[2 * j] = 1e3 * p50
        out[2 * j + 1] = 1e3 * p99
    dur = t_end - t_start
    out[6] = toks / dur if dur > 0 else np.nan
    has_slo = np.isfinite(ttft_slo) or np.isfinite(tpot_slo)
    out[7] = good / dur if (has_slo and dur > 0) else np.nan
