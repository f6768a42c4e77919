"""Per-iteration cost from first principles: bytes moved and FLOPs of one engine step.

`coeffs` folds a (model, hardware, knobs, calibration) into a small vector of per-unit times;
`kernels.step_time` turns a step's composition (decoding sequences, their context, prefill tokens) into
seconds. Both the request-level simulation and the calibration go through these two functions.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from pareto_atlas.simulate.kernels import (
    ACC,
    ADP_DENSE,
    AT,
    COMM_STEP,
    COMM_TOK,
    CTX_SCALE,
    CV,
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
    ATTN_DP,
    MOE_E,
    MOE_K,
    MOE_SKEW,
    MOE_W,
    N_COEFFS,
    O_DEV,
    O_REQ,
    O_SEQ,
    O_STEP,
    P,
    Q,
    SEQ_DEV,
    TILE,
    PP_STAGES,
    W_T,
    XFER,
    step_time,
)
from pareto_atlas.simulate import gemm_floor, moe, moe_law
from pareto_atlas.simulate.parallel import comm_terms, kv_share
from pareto_atlas.simulate.params import CalibParams, base_format
from pareto_atlas.spec.cards import HardwareCard, ModelCard, shipped_models
from pareto_atlas.spec.fp4 import FP4, fp4_compute_dtype
from pareto_atlas.spec.knobs import BITS_PER_KV, Knobs


# Attention-DP's busiest rank (kernels.layout ADP_DENSE), a choice tried, off in the product: with it, a step
# that prefills under attention-DP lasts as long as the rank that holds its prompts, each prompt whole on one
# rank (TensorRT-LLM's request queue gives each request to one rank, ExecutorRequestQueue.
# _balance_requests_across_ranks, and "the iteration time is dominated by the slowest rank": NVIDIA/TensorRT-LLM
# docs/source/blogs/tech_blog/blog10_ADP_Balance_Strategy.md); without it, a step's tokens spread evenly over
# the groups. Off: the B200 MoE fit's held-out TTFT and bar got no better with it (docs/results/
# 2026-12-03-adp-ttft.md).
ADP_BUSIEST_RANK = False


def weight_bytes(model: ModelCard, weights: str, matmul_only: bool = True) -> float:
    """Bytes of weights one step streams (matmul_only) or the model stores (scales included in the bits;
    the parts a checkpoint keeps at 16 bits in its own format at 16: ModelCard.weight_bytes)."""
    return model.weight_bytes(weights, matmul_only)


def compute_dtype(weights: str, hw: HardwareCard) -> str:
    """The dtype the matmuls run in: FP8 weights run FP8 and W8A8 int8 where the card has the units,
    W4A4 NVFP4 FP4 (spec.fp4); AWQ/W4A16, weight-only FP4 and GGUF dequantize to fp16."""
    if weights in FP4:
        return fp4_compute_dtype(weights, hw.tflops)
    if weights == "FP8" and "fp8" in hw.tflops:
        return "fp8"
    return "int8" if weights == "W8A8" and "int8" in hw.tflops else "fp16"


def tokens_per_verify(accept: float, k: int, p_draft: float = 1.0) -> float:
    """Expected tokens emitted per step: (1 - a^(k+1)) / (1 - a) (Leviathan et al.) on the fraction
    p_draft of steps that draft, 1 on the others."""
    if k <= 0 or p_draft <= 0:
        return 1.0
    return 1.0 + p_draft * ((1.0 - accept ** (k + 1)) / (1.0 - accept) - 1.0)


def draft_fraction(drafted_per_token: float | None, accept: float, k: int) -> float:
    """Fraction of decode steps that draft k tokens, from the measured drafts per generated token.

    A drafting step emits 1 + E[accepted] tokens on average, a plain one 1; solving
    drafted/token = p k / (1 + p (E_k - 1)) for p. None (not measured): every step drafts.
    """
    if k <= 0:
        return 0.0
    if drafted_per_token is None or drafted_per_token != drafted_per_token:
        return 1.0
    gain = tokens_per_verify(accept, k) - 1.0
    d = max(float(drafted_per_token), 0.0)
    return float(min(1.0, d / max(k - d * gain, 1e-12)))


def head_params(model: ModelCard) -> int:
    """Weights of the lm_head (vocab x hidden): read for every logit row, not for every prompt token."""
    return model.vocab * model.hidden


def draft_card(model: ModelCard, spec: str, draft: ModelCard | None = None) -> ModelCard | None:
    """The model the drafts run through: none for n-gram, one target layer for EAGLE, else a small model."""
    if spec in ("none", "ngram"):
        return None
    if spec == "eagle":
        # An EAGLE head is one decoder layer of the target's width plus its lm_head.
        from dataclasses import replace

        return replace(
            model,
            name=f"{model.name}-eagle-head",
            n_layers=1,
            source="derived: one target layer",
            **({"dense_layers": 0} if model.dense_layers else {}),
            **({"sliding_window": 0, "sliding_layers": 0} if model.sliding_layers else {}),
        )
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


def per_weight_costs(
    hw: HardwareCard, weights: str, params: CalibParams, model: ModelCard | None = None
) -> tuple[float, float]:
    """Seconds per weight per token of the (GEMV, GEMM) kernels for a weight format on `model`'s
    rows (a kernel format, params.kernel_format): fitted from anchors where calibrated (see
    CalibParams.weight_cost), else 2 FLOPs at the card's peak x eff."""
    base = base_format(weights)
    derived = 2.0 / (hw.peak_flops(compute_dtype(base, hw)) * params.flops_eff(base))
    gemv, _ = params.weight_cost(weights, "gemv", model)
    gemm, _ = params.weight_cost(weights, "gemm", model)
    return (derived if gemv is None else gemv), (derived if gemm is None else gemm)


def coeffs(
    model: ModelCard,
    hw: HardwareCard,
    knobs: Knobs,
    params: CalibParams,
    accept: float | None = None,
    draft: ModelCard | None = None,
    drafted_per_token: float | None = None,
    *,
    tp: int | None = None,
    pp: int | None = None,
    ep: int | None = None,
    attn_dp: int | None = None,
    skew: float | None = None,
    host_overlap: bool = False,
) -> np.ndarray:
    """The per-unit times of one step of ONE worker of this configuration (see the layout in
    kernels/layout.py): a tp x pp worker (knobs.tp, knobs.pp unless given; the decode pool's for "disagg",
    `prefill_coeffs` gives the prefill pool's). Replicas are not in it (simulate.parallel.replica_load).

    The worker's device streams 1 / tp of the weights per step, does 1 / (tp pp) of the FLOPs and reads
    its share of the KV (simulate.parallel.kv_share) over 1 / pp of the layers, and pays the
    collectives over the link (COMM_STEP, COMM_TOK); see simulate.parallel for the model.

    drafted_per_token: drafts the engine actually proposed per generated token (measured); with 0,
    speculation never drafts and the step is a plain decode step.

    A mixture of experts (simulate.moe): W_T streams the always-run weights, MOE_W the routed experts
    of which a step reads the share its tokens touch (`skew`: the routing exponent, default
    moe.ROUTING_SKEW); FLOPs follow the active parameters; attention-DP (attn_dp) splits the step's
    sequences over its groups (ATTN_DP), EP (ep) adds the all-to-all.

    host_overlap: the engine prepares a step on the host while the device runs the one before (vLLM's
    async scheduling: simulate.schedulers.host_overlap says which releases run it by default), so the
    host's fixed costs (overhead_step_s, overhead_seq_s) hide under the device's time (HOST_OVERLAP).
    The atlas's points keep it off; the published fits set it per row from the row's engine release.
    """
    tp = knobs.tp if tp is None else tp
    pp = knobs.pp if pp is None else pp
    ep = knobs.ep if ep is None else ep
    dp = knobs.attn_dp if attn_dp is None else attn_dp
    c = np.zeros(N_COEFFS)
    bw = hw.mem_bw_gbs * 1e9
    attn_peak = hw.peak_flops("fp16")
    eff_a = params.attn_eff(knobs.kv)
    # KV one device's stage reads per token of context (its heads; a pipeline round reads every
    # stage's, divided over its micro-batches in kernels._step_time); exactly kvb on one device
    kvb = model.kv_bytes_per_token(BITS_PER_KV[knobs.kv])
    kvb_dev = kvb * kv_share(model, tp) if tp > 1 else kvb
    split = tp  # a token's FLOPs divide over the tp devices; over the stages in _step_time
    c[PP_STAGES] = pp if pp > 1 else 0.0
    c[W_T] = weight_bytes(model, knobs.weights) / tp / (bw * params.bw_eff(knobs.weights, model))
    # sliding-window layers read at most their window: KVR and AT per context token count the
    # full-attention layers, and the windows' reads ride on each sequence (sliding_terms)
    c[KVR] = kvb_dev * model.full_attention_share / (bw * eff_a)
    c[KVW] = kvb_dev * knobs.kv_keep / (bw * eff_a)
    gemv, gemm = per_weight_costs(hw, knobs.weights, params, model)
    body = model.active_params - head_params(model)
    c[FL] = body * gemm / split
    c[FL_V] = body * gemv / split
    c[FL_H] = head_params(model) * gemv * params.head_ratio / split
    c[TILE] = params.gemm_tile
    # QK^T and PV: 2 matmuls x 2 FLOPs per multiply-add, per (query, key) pair, per head and layer.
    c[AT] = (
        4.0
        * (model.n_layers - model.sliding_layers)
        * model.n_heads
        * model.head_dim
        / (attn_peak * params.attn_flops_eff(knobs.kv))
        / split
    )
    c[COMM_STEP], c[COMM_TOK] = comm_terms(model, hw, tp, pp, params.link_eff, params.link_latency_scale)
    # each linear call's fixed cost (launch, tail, FP8's activation quantization), which no share of the
    # weights carries: the same on every device of a tp-wide worker (simulate.gemm_floor; 0 where no law)
    c[O_DEV] += gemm_floor.step_fixed_s(model, hw.name, params.engine, knobs.weights)
    if model.is_moe or model.is_mla:
        _moe_terms(c, model, hw, knobs, params, tp, ep, dp, skew)
    # Eviction stores keep x ctx; sparse attention then reads only a budget of what is stored.
    c[CTX_SCALE] = knobs.kv_keep * knobs.sparse_budget
    c[KV_PAD] = params.kv_pad / 2.0
    # the host's work a step (scheduling, input preparation, launches) and per sequence (bookkeeping);
    # the device's fixed costs beside them: _moe_terms' per-layer cost, sliding windows' attention
    c[O_STEP] = params.overhead_step_s
    c[O_SEQ] = params.overhead_seq_s
    c[SEQ_DEV] = sliding_seq_s(model, hw, knobs, params, kvb_dev)
    c[HOST_OVERLAP] = 1.0 if host_overlap else 0.0
    c[O_REQ] = params.overhead_req_s
    c[P] = params.roofline_p
    c[CV] = params.step_cv
    c[Q] = 1.0
    acc = knobs.spec_accept if accept is None else accept
    p_draft = draft_fraction(drafted_per_token, acc, knobs.spec_k) if knobs.spec != "none" else 0.0
    if knobs.spec != "none" and knobs.spec_k > 0 and p_draft > 0:
        c[K] = knobs.spec_k
        c[DRAFT_P] = p_draft
        # Verify rows per decoding sequence, in expectation over drafting and plain steps.
        c[Q] = 1.0 + p_draft * knobs.spec_k
        c[ACC] = acc
        dc = draft_card(model, knobs.spec, draft)
        if dc is None:
            c[D_O] = params.ngram_lookup_s
        else:
            # the draft runs tensor-parallel over the worker's tp devices as the target does (its own
            # all-reduces are left out: a draft's few layers)
            c[D_W] = weight_bytes(dc, knobs.weights) / tp / (bw * params.bw_eff(knobs.weights, dc))
            c[D_FL] = dc.matmul_params * gemm / tp
            c[D_KVR] = dc.kv_bytes_per_token(BITS_PER_KV[knobs.kv]) * kv_share(dc, tp) / (bw * eff_a)
            c[D_O] = params.draft_forward_s
    if knobs.batching == "disagg":
        # each device of the narrower worker sends (or receives) its heads' share over its own link
        shard = kv_share(model, min(tp, knobs.prefill_tp_resolved)) if tp > 1 or knobs.prefill_tp_resolved > 1 else 1.0
        c[XFER] = kvb * knobs.kv_keep * shard / (hw.link_gbs * 1e9) if hw.link_gbs > 0 else np.inf
    return c


def sliding_seq_s(model: ModelCard, hw: HardwareCard, knobs: Knobs, params: CalibParams, kvb_dev: float) -> float:
    """Seconds per sequence in a step that its sliding-window layers' attention takes on one device:
    reading a full window of KV and attending one query over it (a step's sequences are mostly past
    the window; gpt-oss's 128 tokens). A prompt's own window pairs in prefill are left out: W per
    token against the full layers' P / 2 (about 6 % of a 4,000-token prompt's attention)."""
    if not model.sliding_layers:
        return 0.0
    window, share = float(model.sliding_window), model.sliding_layers / model.n_layers
    read = kvb_dev * share * window / (hw.mem_bw_gbs * 1e9 * params.attn_eff(knobs.kv))
    heads = model.n_heads / (knobs.tp if knobs.tp > 1 else 1)
    pairs = 4.0 * model.sliding_layers * heads * model.head_dim * window
    return read + pairs / (hw.peak_flops("fp16") * params.attn_flops_eff(knobs.kv))


def _moe_terms(
    c: np.ndarray,
    model: ModelCard,
    hw: HardwareCard,
    knobs: Knobs,
    params: CalibParams,
    tp: int,
    ep: int,
    dp: int,
    skew: float | None,
) -> None:
    """The mixture-of-experts and latent-attention parts of `coeffs` (simulate.moe for the model)."""
    if model.is_mla:
        # absorbed MLA: per head, QK^T over the latent and rotary key, PV over the latent
        width = 2 * model.kv_lora_rank + model.qk_rope_head_dim
        c[AT] = (
            2.0
            * model.n_layers
            * model.n_heads
            * width
            / (hw.peak_flops("fp16") * params.attn_flops_eff(knobs.kv))
            / tp
        )
    if not model.is_moe:
        return
    bw = hw.mem_bw_gbs * 1e9 * params.bw_eff(knobs.weights, model)
    # the body's compute a token runs outside the routed experts, at the dense rate (ADP_DENSE's numerator)
    body = max(model.active_params - head_params(model), 1)
    fl_dense = c[FL] * (1.0 - model.moe_layers * model.experts_per_token * model.expert_params / body)
    routed = moe.routed_bytes(model, knobs.weights)
    c[W_T] = (weight_bytes(model, knobs.weights) - routed) / tp / bw
    c[MOE_W] = routed / (tp * dp) / bw
    c[MOE_E], c[MOE_K] = model.n_experts, model.experts_per_token
    law = moe_law.law_for(hw, params.engine, model, knobs.weights, max(tp * dp // max(ep, 1), 1), max(ep, 1))
    if law is not None:
        # the layer as aiconfigurator measured it on this card, engine, format and split (simulate.moe_law): its
        # fixed cost a step, the touched experts at its streaming rate, their FLOPs at its rate (in place
        # of the dense GEMMs' share of the body's compute)
        c[MOE_W] = model.routed_params / (tp * dp) * law.s_per_weight
        c[O_DEV] += model.moe_layers * law.fixed_s
        active = model.moe_layers * model.experts_per_token * model.expert_params
        dense = 1.0 - active / max(model.active_params - head_params(model), 1)
        c[FL] = c[FL] * dense + 2.0 * active * law.s_per_flop / tp
        c[FL_V] = c[FL_V] * dense + 2.0 * active * law.s_per_flop / tp
    # else fitted on published MoE rows (calibrate.published_moe): a step's fixed cost per MoE layer, and
    # the routed experts' FLOPs at the expert GEMMs' efficiency (the rest of the body's at the dense rate)
    # (a format aiconfigurator never timed on the card and engine pays the least fixed cost a layer of the
    # formats it timed: moe_law.carried_law)
    else:
        lent = moe_law.carried_law(hw, params.engine, model, knobs.weights, max(tp * dp // max(ep, 1), 1), max(ep, 1))
        c[O_DEV] += model.moe_layers * (lent.fixed_s if lent is not None else params.moe_layer_s)
    if law is None and params.moe_flops_eff < 1.0:
        extra = model.moe_layers * model.experts_per_token * model.expert_params * (1.0 / params.moe_flops_eff - 1.0)
        c[FL] += extra * c[FL] / max(model.active_params - head_params(model), 1)
        c[FL_V] += extra * c[FL_V] / max(model.active_params - head_params(model), 1)
    fitted = params.routing_skew if params.routing_skew == params.routing_skew else moe.ROUTING_SKEW
    c[MOE_SKEW] = fitted if skew is None else skew
    if dp > 1:
        # each attention-DP group runs its own sequences: the body's compute and attention divide
        # over the groups a step's sequences fill (kernels._step_time), and each all-reduces its own
        # tokens, the groups side by side
        c[ATTN_DP] = dp
        c[COMM_TOK] /= dp
        if ADP_BUSIEST_RANK and c[FL] > 0:
            c[ADP_DENSE] = min(max(fl_dense / c[FL], 1e-9), 1.0)
    a2a_step, a2a_tok = moe.all_to_all_terms(model, hw, ep, tp * dp, params.link_eff, params.link_latency_scale)
    c[COMM_STEP] += a2a_step
    c[COMM_TOK] += a2a_tok


def prefill_coeffs(
    model: ModelCard,
    hw: HardwareCard,
    knobs: Knobs,
    params: CalibParams,
    accept: float | None = None,
    draft: ModelCard | None = None,
    drafted_per_token: float | None = None,
) -> np.ndarray:
    """The coefficient vector of one prefill worker of a disaggregated configuration: prefill_tp
    devices (tp where 0), one stage. For any other batching, the worker's own vector."""
    if knobs.batching != "disagg":
        return coeffs(model, hw, knobs, params, accept, draft, drafted_per_token)
    return coeffs(
        model, hw, knobs, params, accept, draft, drafted_per_token, tp=knobs.prefill_tp_resolved, pp=1, ep=1, attn_dp=1
    )


def decode_tokens_per_s(c: np.ndarray, batch: int, ctx: float) -> float:
    """Steady decode throughput at a batch size and per-sequence context (spec: expected tokens)."""
    t = step_time(c, float(batch), float(batch) * ctx, 0.0, 0.0, 0.0, float(batch))
    return batch * tokens_per_verify(c[ACC], int(c[K]), c[DRAFT_P]) / t
