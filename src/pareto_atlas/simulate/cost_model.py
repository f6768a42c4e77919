"""Per-iteration cost from first principles: bytes moved and FLOPs of one engine step.

`coeffs` folds a (model, hardware, knobs, calibration) into a small vector of per-unit times;
`kernels.step_time` turns a step's composition (decoding sequences, their context, prefill tokens) into
seconds. Both the request-level simulation and the calibration go through these two functions.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from pareto_atlas.simulate.kernels import (ACC, AT, CTX_SCALE, CV, D_FL, D_KVR, D_O, D_W, FL, K, KVR, KVW, N_COEFFS,
                                          O_SEQ, O_STEP, P, Q, W_T, XFER, step_time)
from pareto_atlas.simulate.params import CalibParams
from pareto_atlas.spec.cards import HardwareCard, ModelCard, shipped_models
from pareto_atlas.spec.knobs import BITS_PER_KV, BITS_PER_WEIGHT, Knobs




def weight_bytes(model: ModelCard, weights: str, matmul_only: bool = True) -> float:
    """Bytes of weights one step streams (matmul_only) or the model stores (scales included in the bits)."""
    n = model.matmul_params if matmul_only else model.n_params
    return n * BITS_PER_WEIGHT[weights] / 8


def compute_dtype(weights: str, hw: HardwareCard) -> str:
    """The dtype the matmuls run in: FP8 weights run FP8 where the card has it; W4A16 and GGUF run fp16."""
    return "fp8" if weights == "FP8" and "fp8" in hw.tflops else "fp16"


def tokens_per_verify(accept: float, k: int) -> float:
    """Expected tokens emitted per verify step: (1 - a^(k+1)) / (1 - a) (Leviathan et al.)."""
    if k <= 0:
        return 1.0
    return (1.0 - accept ** (k + 1)) / (1.0 - accept)


def draft_card(model: ModelCard, spec: str, draft: ModelCard | None = None) -> ModelCard | None:
    """The model the drafts run through: none for n-gram, one target layer for EAGLE, else a small model."""
    if spec in ("none", "ngram"):
        return None
    if spec == "eagle":
        # An EAGLE head is one decoder layer of the target's width plus its lm_head.
        from dataclasses import replace
        return replace(model, name=f"{model.name}-eagle-head", n_layers=1, source="derived: one target layer")
    if draft is not None:
        return draft
    return _default_draft(model)


@lru_cache(maxsize=64)
def _default_draft(model: ModelCard) -> ModelCard:
    # The smallest shipped model sharing the target's vocabulary (a draft must share the tokenizer).
    cards = shipped_models().values()
    same_vocab = [m for m in cards if m.vocab == model.vocab and m.n_params < model.n_params]
    pool = same_vocab or [m for m in cards if m.n_params < model.n_params] or [model]
    return min(pool, key=lambda m: m.n_params)


def coeffs(model: ModelCard, hw: HardwareCard, knobs: Knobs, params: CalibParams,
           accept: float | None = None, draft: ModelCard | None = None) -> np.ndarray:
    """The per-unit times of one step for this configuration (see the layout above)."""
    c = np.zeros(N_COEFFS)
    bw = hw.mem_bw_gbs * 1e9
    peak = hw.peak_flops(compute_dtype(knobs.weights, hw))
    attn_peak = hw.peak_flops("fp16")
    eff_f = params.flops_eff(knobs.weights)
    kvb = model.kv_bytes_per_token(BITS_PER_KV[knobs.kv])
    c[W_T] = weight_bytes(model, knobs.weights) / (bw * params.bw_eff(knobs.weights))
    c[KVR] = kvb / (bw * params.eff_attn)
    c[KVW] = kvb * knobs.kv_keep / (bw * params.eff_attn)
    c[FL] = 2.0 * model.matmul_params / (peak * eff_f)
    # QK^T and PV: 2 matmuls x 2 FLOPs per multiply-add, per (query, key) pair, per head and layer.
    c[AT] = 4.0 * model.n_layers * model.n_heads * model.head_dim / (attn_peak * eff_f)
    # Eviction stores keep x ctx; sparse attention then reads only a budget of what is stored.
    c[CTX_SCALE] = knobs.kv_keep * knobs.sparse_budget
    c[O_STEP] = params.overhead_step_s
    c[O_SEQ] = params.overhead_seq_s
    c[P] = params.roofline_p
    c[CV] = params.step_cv
    c[Q] = 1.0
    if knobs.spec != "none" and knobs.spec_k > 0:
        c[K] = knobs.spec_k
        c[Q] = knobs.spec_k + 1.0
        c[ACC] = knobs.spec_accept if accept is None else accept
        dc = draft_card(model, knobs.spec, draft)
        if dc is None:
            c[D_O] = params.ngram_lookup_s
        else:
            c[D_W] = weight_bytes(dc, knobs.weights) / (bw * params.bw_eff(knobs.weights))
            c[D_FL] = 2.0 * dc.matmul_params / (peak * eff_f)
            c[D_KVR] = dc.kv_bytes_per_token(BITS_PER_KV[knobs.kv]) / (bw * params.eff_attn)
            c[D_O] = params.draft_forward_s
    if knobs.batching == "disagg":
        c[XFER] = kvb * knobs.kv_keep / (hw.link_gbs * 1e9) if hw.link_gbs > 0 else np.inf
    return c


def decode_tokens_per_s(c: np.ndarray, batch: int, ctx: float) -> float:
    """Steady decode throughput at a batch size and per-sequence context (spec: expected tokens)."""
    t = step_time(c, float(batch), float(batch) * ctx, 0.0, 0.0, 0.0, float(batch))
    return batch * tokens_per_verify(c[ACC], int(c[K])) / t
