"""Mixtures of experts: the weights a step reads as the experts its tokens touch, expert parallelism's
all-to-all, and attention data parallelism; cost_model.coeffs and memory.plan_memory call these
where a card has experts (a dense card never reaches this module).

The model:
- Routing: each token runs k of a layer's E experts. B tokens routed uniformly touch
  E (1 - (1 - k/E)^B) experts (each expert is missed by a token with probability 1 - k/E): one
  token reads k experts' weights, a large batch all of them. Real routers are skewed (popular
  experts take more tokens), so a batch touches fewer experts than uniform routing would; we fold
  that into an exponent on the batch, E (1 - (1 - k/E)^(B^s)), which keeps both limits (B = 1: k;
  B -> inf: E). s = 1 is uniform.
- Layout (SGLang's and TensorRT-LLM's attention-DP + EP): a worker's G = tp x attn_dp GPUs run
  attention as attn_dp groups of tp (each group its own share of the batch and its KV), and the
  routed experts as ep groups of MoE-TP = G / ep (each GPU holds E / ep experts, each split MoE-TP
  ways: 1 / G of the routed weights). The always-run weights (attention, router, shared experts,
  dense layers, lm_head) split over tp and are copied in each attention-DP group.
- EP's all-to-all: per MoE layer a dispatch (each token's activations to its k experts' GPUs) and a
  combine (the results back), (ep - 1) / ep of them crossing the link; the worker's G GPUs send
  in parallel, so each carries 1 / G of the bytes; one hop of latency per all-to-all (direct sends
  over the node's switch, posted together).
"""

from __future__ import annotations

from pareto_atlas.simulate.kernels.step import touched_share
from pareto_atlas.simulate.parallel import ACT_BYTES
from pareto_atlas.spec.cards import HardwareCard, ModelCard

# The routing skew exponent s, a prior until fitted: 0.9, interval [0.75, 1.0] (1: uniform). Why
# below 1: load-balancing losses keep training-time routing near uniform over large batches, yet
# per-step expert loads at inference are uneven (the reason DeepSeek's EPLB and SGLang/vLLM
# replicate hot experts), and consecutive tokens of one sequence reuse experts. Where a fit comes
# from: per-step counts of distinct experts per layer recorded by an engine on a real trace
# (SGLang's expert-distribution recorder, vLLM's EPLB load statistics), fitted to the formula
# above (fit_routing_skew); or the decode step time of an MoE at several batch sizes on one machine
# (the weights term is the only one that bends with touched experts). What the interval rests on:
# routers whose expert popularity falls as a Zipf law of exponent 0 to 1 over 128 experts (top-8)
# fit s = 1.0 to 0.82, and the law fitted on batches 1-8 predicts 16-64 within 4 %
# (test_moe_cost.test_the_skew_law_fits_skewed_routing...); no engine's counts are fitted yet.
ROUTING_SKEW = 0.9
ROUTING_SKEW_INTERVAL = (0.75, 1.0)


def experts_touched(tokens: float, model: ModelCard, skew: float = ROUTING_SKEW) -> float:
    """Expected experts of one MoE layer that a step of `tokens` tokens reads (0 for a dense card)."""
    if not model.is_moe:
        return 0.0
    return model.n_experts * touched_share(float(tokens), float(model.n_experts), float(model.experts_per_token), skew)


def routed_bytes(model: ModelCard, weights: str) -> float:
    """Bytes of all routed experts' weights (every MoE layer), in the format's bits."""
    return model.routed_params * model.bits_per_weight(weights) / 8


def step_weight_bytes(model: ModelCard, weights: str, tokens: float, skew: float = ROUTING_SKEW) -> float:
    """Weight bytes one step of `tokens` tokens reads on one device: the always-run weights and the
    touched share of the experts (a dense card: all its matmul weights)."""
    # the always-run weights at the format's bits, or 16 where the checkpoint keeps them so
    always = model.weight_bytes(weights) - routed_bytes(model, weights)
    if not model.is_moe:
        return always
    return always + routed_bytes(model, weights) * experts_touched(tokens, model, skew) / model.n_experts


def all_to_all_terms(
    model: ModelCard, hw: HardwareCard, ep: int, gpus: int, link_eff: float = 1.0, latency_scale: float = 1.0
) -> tuple[float, float]:
    """(seconds per step, seconds per token of the worker's step) each of the worker's `gpus` GPUs
    spends on EP's dispatch and combine over the link, serial with the kernels as the TP all-reduces are."""
    if ep <= 1 or not model.is_moe:
        return 0.0, 0.0
    calls = 2.0 * model.moe_layers  # a dispatch and a combine per MoE layer
    per_tok = model.experts_per_token * model.hidden * ACT_BYTES * (ep - 1) / ep / gpus
    step = calls * hw.link_latency_us * 1e-6 * latency_scale
    return step, calls * per_tok / (hw.link_gbs * 1e9 * link_eff)


def weights_per_gpu(model: ModelCard, weights: str, tp: int, pp: int, attn_dp: int) -> float:
    """Stored weight bytes on one GPU: the always-run weights over tp (copied in each attention-DP
    group) and all routed experts over the worker's tp x attn_dp GPUs, each over pp stages."""
    total = model.weight_bytes(weights, matmul_only=False)
    routed = routed_bytes(model, weights)
    return (total - routed) / (tp * pp) + routed / (tp * attn_dp * pp)


def fit_routing_skew(batches: list[float], touched: list[float], experts: int, per_token: int) -> float:
    """The skew s whose law E (1 - (1 - k/E)^(B^s)) best fits measured distinct experts per layer
    (`touched`, mean over steps) at each batch size (least squares over s in [0.3, 1.5], step 0.001):
    the fit the prior stands in for, from an engine's per-step expert counts on a real trace."""
    import numpy as np

    b = np.asarray(batches, dtype=float)
    t = np.asarray(touched, dtype=float)
    if b.shape != t.shape or b.size == 0 or (b < 1).any() or (t < 0).any() or (t > experts).any():
        raise ValueError("fit_routing_skew: batches >= 1 and touched in [0, experts], one per batch")
    s = np.arange(0.3, 1.5005, 0.001)[:, None]
    pred = experts * (1.0 - (1.0 - per_token / experts) ** (b[None, :] ** s))
    return float(s[np.argmin(((pred - t[None, :]) ** 2).sum(axis=1)), 0])
