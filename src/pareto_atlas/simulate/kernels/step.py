"""The step cost: seconds for one engine step of a given composition (decodes, their context, prefill)."""

from __future__ import annotations

import numpy as np
from numba import njit

from pareto_atlas.simulate.kernels._cache import CACHE
from pareto_atlas.simulate.kernels.layout import (
    ADP_DENSE,
    ATTN_DP,
    AT,
    COMM_STEP,
    COMM_TOK,
    CTX_SCALE,
    D_FL,
    D_KVR,
    D_O,
    D_W,
    DRAFT_P,
    FL,
    FL_H,
    FL_V,
    HOST_OVERLAP,
    K,
    KV_PAD,
    KVR,
    KVW,
    MOE_E,
    MOE_K,
    MOE_SKEW,
    MOE_W,
    O_REQ,
    O_DEV,
    O_SEQ,
    O_STEP,
    P,
    PP_STAGES,
    Q,
    SEQ_DEV,
    TILE,
    W_T,
)


@njit(cache=CACHE)
def _smooth_max(a: float, b: float, p: float, bound: float) -> float:
    # A hard max(memory, compute) overstates speed at the ridge, where neither the memory system
    # nor the ALUs run flat out; a p-norm rounds that corner (by 2^(1/p) at most), stays >= max
    # so the roofline is never beaten, and is smooth for least squares.
    if a <= 0.0:
        return b
    if b <= 0.0:
        return a
    m = max(a, b)
    if bound > 0.0:
        # A bound of the p-norm instead, without its pow calls: see _step_time.
        return m * bound
    # The larger side's ratio is exactly 1, and so is its power (no pow call needed).
    return m * (1.0 + (min(a, b) / m) ** p) ** (1.0 / p)


@njit(cache=CACHE)
def _smooth_max2(a: float, b: float, da: float, db: float, p: float, bound: float) -> tuple[float, float]:
    # _smooth_max of two pairs, their pow calls interleaved: each smooth max is a chain of two
    # pow calls, and their latency rather than their throughput bounds the simulation, so two
    # chains side by side cost little more than one.
    if bound > 0.0 or min(min(a, b), min(da, db)) <= 0.0:
        return _smooth_max(a, b, p, bound), _smooth_max(da, db, p, bound)
    m, dm = max(a, b), max(da, db)
    x, dx = (min(a, b) / m) ** p, (min(da, db) / dm) ** p
    return m * (1.0 + x) ** (1.0 / p), dm * (1.0 + dx) ** (1.0 / p)


@njit(cache=CACHE)
def step_time(
    c: np.ndarray, n_dec: float, ctx_dec: float, n_pf: float, pf_pairs: float, pf_ctx: float, n_seqs: float
) -> float:
    """Seconds for one step: n_dec sequences decoding over ctx_dec total context tokens, plus
    n_pf prompt tokens whose attention covers pf_pairs (query, key) pairs and reads pf_ctx
    earlier KV tokens (chunked prefill). Without jitter; the simulation adds that."""
    return _step_time(c, n_dec, ctx_dec, n_pf, pf_pairs, pf_ctx, n_seqs, 0.0)


@njit(cache=CACHE, inline="always")
def _step_time(
    c: np.ndarray,
    n_dec: float,
    ctx_dec: float,
    n_pf: float,
    pf_pairs: float,
    pf_ctx: float,
    n_seqs: float,
    bound: float,
) -> float:
    # step_time with bound 0. With bound 1, a lower bound of it; with bound >= 2^(1/p) (1 + 1e-12)
    # (_upper_bound), an upper bound: each smooth max lies within [max, 2^(1/p) max], also in
    # floating point (pow is faithfully rounded, the margin covers the rest), and the step time
    # is non-decreasing in both. Bounds cost no pow call and settle most comparisons exactly.
    rows = c[Q]  # rows per decoding sequence (1 + drafts verified)
    tokens = n_dec * rows + n_pf
    if tokens <= 0.0:
        return 0.0
    weights_s, gemm_s, gemv_s, head_s, tile = c[W_T], c[FL], c[FL_V], c[FL_H], c[TILE]
    kv_read_s, kv_write_s, pair_s, ctx_scale, kv_pad = c[KVR], c[KVW], c[AT], c[CTX_SCALE], c[KV_PAD]
    p, step_s, seq_s = c[P], c[O_STEP], c[O_SEQ]
    k, draft_p = c[K], c[DRAFT_P]
    ctx_eff = ctx_dec * ctx_scale + n_dec * kv_pad
    # Two rooflines, one per kind of kernel, run one after the other: the linear layers stream
    # the weights and multiply every token by them; attention reads (and appends to) the KV cache
    # and multiplies each query by what it reads. A step is never both kinds at once, so a long
    # context's attention adds to a weight-bound step instead of hiding under it.
    mem = weights_s
    routed = tokens  # tokens each pass through the experts routes (a micro-batch's under PP)
    # Logits: every decode (and verify) row, but only the last token of a prompt (n_seqs - n_dec
    # sequences are prefilling in this step).
    logits = n_dec * rows + max(n_seqs - n_dec, 0.0)
    gemm = _gemm_cols(tokens, tile)
    cmp = gemm_s * gemm + gemv_s * (tokens - gemm) + head_s * logits
    a_mem = kv_read_s * (ctx_eff + pf_ctx) + kv_write_s * tokens
    a_cmp = pair_s * (rows * ctx_eff + pf_pairs)
    comm_tok = c[COMM_TOK]
    seqs = n_seqs  # sequences one device's process steps (its per-sequence costs, O_SEQ)
    if c[ATTN_DP] > 1.0:
        # attention-DP: each group runs its own sequences; a step with fewer than the groups leaves some idle.
        # Each group's rank schedules, samples and attends only the sequences routed to it (TensorRT-LLM's
        # ADP router balances requests over the ranks), so the per-sequence costs run side by side too
        g = min(c[ATTN_DP], max(n_seqs, 1.0))
        if c[ADP_DENSE] > 0.0 and n_pf > 0.0:
            # each prompt runs whole on one rank and the step waits for the busiest: it holds its
            # share of the decodes and ceil(prompts / groups) of the step's prompts (ADP_DENSE)
            cmp, a_mem, a_cmp = _busiest_rank(
                c, cmp, n_dec * rows, ctx_eff, n_pf, pf_pairs, pf_ctx, n_seqs - n_dec, tokens, g
            )
            seqs = n_seqs / g
        else:
            cmp, a_mem, a_cmp, seqs = cmp / g, a_mem / g, a_cmp / g, n_seqs / g
    if c[PP_STAGES] > 1.0:
        # one pipeline round: the sequences fill min(stages, sequences) micro-batches
        m = min(c[PP_STAGES], max(n_seqs, 1.0))
        cmp, a_mem, a_cmp, comm_tok = cmp / m, a_mem / m, a_cmp / m, comm_tok / m
        routed = tokens / m
    if c[MOE_W] > 0.0:
        # a mixture of experts streams the share of its experts the step's tokens touch
        mem += c[MOE_W] * touched_share(routed, c[MOE_E], c[MOE_K], c[MOE_SKEW])
    # k sequential draft forwards on the steps that draft (prefill of the draft is folded into
    # its compute term below).
    drafting = k > 0.0 and n_dec > 0.0 and draft_p > 0.0
    if drafting:
        fwd, draft_fwd = _smooth_max2(mem, cmp, c[D_W] + c[D_KVR] * ctx_dec, c[D_FL] * n_dec, p, bound)
        fwd += _smooth_max(a_mem, a_cmp, p, bound)
    else:
        # the two rooflines' pow chains side by side (see _smooth_max2)
        fwd, attn = _smooth_max2(mem, cmp, a_mem, a_cmp, p, bound)
        fwd, draft_fwd = fwd + attn, 0.0
    # the device's time (kernels, collectives, fixed device costs) and the host's (scheduling, input
    # preparation): one after the other, or side by side under an engine that prepares the next step
    # while this one runs (HOST_OVERLAP), where the longer of the two sets the pace
    overlap = c[HOST_OVERLAP] > 0.0
    if overlap:
        t = fwd + c[O_DEV] + c[SEQ_DEV] * seqs + c[COMM_STEP] + comm_tok * tokens
    else:
        # serial: the fixed costs summed as one per step and one per sequence, in this order (the
        # figures of every serial step the same to the last bit as before the split)
        t = fwd + (c[O_DEV] + step_s) + (seq_s + c[SEQ_DEV]) * seqs + c[COMM_STEP] + comm_tok * tokens
    if drafting:
        t += draft_p * k * (draft_fwd + c[D_O])
    if k > 0.0 and n_pf > 0.0 and c[D_FL] > 0.0:
        t += c[D_FL] * n_pf
    if overlap:
        return max(t, step_s + seq_s * seqs)
    return t


@njit(cache=CACHE, inline="always")
def _busiest_rank(
    c: np.ndarray,
    cmp: float,
    dec_rows: float,
    ctx_eff: float,
    n_pf: float,
    pf_pairs: float,
    pf_ctx: float,
    prompts: float,
    tokens: float,
    g: float,
) -> tuple[float, float, float]:
    # The busiest attention-DP rank's part of a step that prefills: the decodes spread evenly over the
    # groups, the prompts whole, ceil(prompts / groups) of them on the busiest rank (the step's
    # prompts alike in length). The dense share of the body's compute (ADP_DENSE) runs that rank's
    # tokens; the routed experts' share stays spread over the groups (EP's all-to-all evens it).
    dp = c[ATTN_DP]
    k = max(prompts, 1.0)
    pf_share = np.ceil(k / dp) / k  # of the step's prompt tokens, pairs and read context
    dec_g = min(dp, max(dec_rows, 1.0))
    rank_tokens = dec_rows / dec_g + n_pf * pf_share
    dense = c[ADP_DENSE]
    cmp_r = cmp * (dense * rank_tokens / tokens + (1.0 - dense) / g)
    kv_read = c[KVR] * (ctx_eff / dec_g + pf_ctx * pf_share)
    a_mem_r = kv_read + c[KVW] * rank_tokens
    a_cmp_r = c[AT] * (c[Q] * ctx_eff / dec_g + pf_pairs * pf_share)
    return cmp_r, a_mem_r, a_cmp_r


@njit(cache=CACHE)
def touched_share(tokens: float, experts: float, per_token: float, skew: float) -> float:
    """Expected share of a layer's experts that `tokens` tokens touch, routing per_token of `experts`
    each: 1 - (1 - k/E)^(B^skew). skew 1 is uniform routing (E (1 - (1 - k/E)^B) experts); below 1,
    skewed routing lands more tokens on the same experts. One token: k/E; many: all (simulate.moe)."""
    if tokens <= 0.0:
        return 0.0
    return 1.0 - (1.0 - per_token / experts) ** (tokens**skew)


@njit(cache=CACHE)
def lone_prefill_s(c: np.ndarray, prompt: float) -> float:
    """Seconds of one prompt's TTFT on an idle engine (its prefill and the request's overhead, without
    jitter): the mean pause of "auto" think times, as the load generator takes the warm-up's TTFT."""
    return step_time(c, 0.0, 0.0, prompt, prefill_pairs(prompt, 0.0), 0.0, 1.0) + c[O_REQ]


@njit(cache=CACHE)
def _upper_bound(c: np.ndarray) -> float:
    # The bound argument of _step_time for an upper bound (inf where p < 1 leaves none useful).
    return 2.0 ** (1.0 / c[P]) * (1.0 + 1e-12) if c[P] >= 1.0 else np.inf


@njit(cache=CACHE)
def _step_within(
    c: np.ndarray,
    n_dec: float,
    ctx_dec: float,
    n_pf: float,
    pf_pairs: float,
    pf_ctx: float,
    n_seqs: float,
    target: float,
    upper: float,
) -> bool:
    # step_time(...) <= target, from its bounds where they settle it (upper = _upper_bound(c)).
    if _step_time(c, n_dec, ctx_dec, n_pf, pf_pairs, pf_ctx, n_seqs, 1.0) > target:
        return False
    if _step_time(c, n_dec, ctx_dec, n_pf, pf_pairs, pf_ctx, n_seqs, upper) <= target:
        return True
    return _step_time(c, n_dec, ctx_dec, n_pf, pf_pairs, pf_ctx, n_seqs, 0.0) <= target


@njit(cache=CACHE)
def _gemm_cols(tokens: float, tile: float) -> float:
    # Columns a tiled GEMM kernel takes; the remainder runs one GEMV per column (llama.cpp's CPU
    # repacked kernels: GEMM on ne11 - ne11 % 4 columns). tile 0: all of them.
    if tile <= 0.0:
        return tokens
    return tokens - np.fmod(tokens, tile)


@njit(cache=CACHE)
def prefill_pairs(p: float, before: float) -> float:
    """Causal (query, key) pairs of a p-token chunk after `before` cached tokens."""
    return p * before + p * (p + 1) / 2.0
