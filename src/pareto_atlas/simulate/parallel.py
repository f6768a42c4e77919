"""Parallel layouts: what one device of a tensor/pipeline-parallel worker holds and moves, what its
collectives cost over the node's link, and how replicas share a load.

The model (Megatron-style tensor parallelism as vLLM, SGLang and TensorRT-LLM run it):
- TP over `tp` devices splits every linear layer's weights and FLOPs (column- then row-parallel,
  the lm_head vocab-parallel) and the attention heads; each device holds the KV of its KV heads, or
  of one KV head where tp exceeds the KV heads (each is then replicated tp / kv_heads times, as vLLM
  does). Each layer adds two all-reduces (after attention and after the MLP) of the step's tokens x
  hidden activations: a ring all-reduce moves 2 (tp - 1) / tp of the bytes through each device's
  link and takes 2 (tp - 1) hops, each paying the link's latency.
- PP over `pp` stages gives each stage 1 / pp of the layers; the engine keeps up to pp micro-batches
  in flight (vLLM's virtual engines), so one simulated step is a pipeline round that advances every
  running sequence by a token. Its sequences fill m = min(pp, sequences) micro-batches: each stage
  streams its weights once per micro-batch slot, so a round streams the whole worker's share (PP does
  not speed up weight-bound decode), while compute, KV traffic and the link's bytes divide by m
  (kernels._step_time, PP_STAGES): a lone prompt crosses the stages one after the other, no faster
  than on one stage (the bubble). A token's latency crosses every stage and pp - 1 sends.
- Replicas are independent copies: each sees the load / replicas, throughput adds up.
"""

from __future__ import annotations

import math

from pareto_atlas.spec.cards import HardwareCard, ModelCard
from pareto_atlas.spec.layout import check_layout, check_moe_layout  # noqa: F401 - the simulator's callers import them here

ACT_BYTES = 2.0  # activations all-reduced and sent between stages in 16 bits (bf16/fp16), every format


def kv_heads_per_device(model: ModelCard, tp: int) -> int:
    """KV heads one device of a tp-wide worker holds: kv_heads / tp, or 1 (replicated) where tp exceeds them."""
    return max(model.n_kv_heads // tp, 1)


def kv_share(model: ModelCard, tp: int) -> float:
    """Fraction of a layer's KV cache one device holds and reads (1 / tp until the KV heads run out).
    Latent attention's cache is one latent for all heads: every device of the group holds all of it."""
    if model.is_mla:
        return 1.0
    return kv_heads_per_device(model, tp) / model.n_kv_heads


# Links whose GPUs all sit one switch crossing apart (NVLink through NVSwitch on HGX boards). There the
# engines' own all-reduce within a node (vLLM's custom_all_reduce, TensorRT-LLM's one-shot / two-shot
# AllReduce) reduce-scatters and all-gathers through the switch: two crossings of latency whatever tp
# is, where a ring over point-to-point links pays 2 (tp - 1).
SWITCHED = ("nvlink",)
SWITCH_HOPS = 2.0


def allreduce_s(n_bytes: float, tp: int, hw: HardwareCard, link_eff: float = 1.0, latency_scale: float = 1.0) -> float:
    """Seconds of one all-reduce of n_bytes over tp devices: 2 (tp - 1) / tp of the bytes through each
    device's link at link_eff of its bandwidth (ring or two-shot alike), and the link's latency per
    crossing: 2 (tp - 1) crossings of a ring, SWITCH_HOPS through a switch (SWITCHED)."""
    if tp <= 1:
        return 0.0
    ring = 2.0 * (tp - 1)
    hops = SWITCH_HOPS if hw.link in SWITCHED else ring
    return hops * hw.link_latency_us * 1e-6 * latency_scale + ring / tp * n_bytes / (hw.link_gbs * 1e9 * link_eff)


def comm_terms(
    model: ModelCard, hw: HardwareCard, tp: int, pp: int, link_eff: float = 1.0, latency_scale: float = 1.0
) -> tuple[float, float]:
    """(seconds per step, seconds per token of the step) a tp x pp worker spends on its link, serial
    with the kernels (no overlap of communication and compute is assumed).

    TP: two all-reduces per layer of tokens x hidden activations; every layer's latency is on a
    token's path (the round crosses all stages). PP: pp - 1 sends per round, each token's activations
    crossing pp - 1 boundaries. The per-token bytes then divide over the round's micro-batches
    (kernels._step_time: stages send in parallel, each its own micro-batch)."""
    if tp <= 1 and pp <= 1:
        return 0.0, 0.0
    step = tok = 0.0
    bw = hw.link_gbs * 1e9 * link_eff
    lat = hw.link_latency_us * 1e-6 * latency_scale
    if tp > 1:
        per_tok_bytes = model.hidden * ACT_BYTES
        calls = 2.0 * model.n_layers
        step += calls * allreduce_s(0.0, tp, hw, link_eff, latency_scale)
        tok += calls * (
            allreduce_s(per_tok_bytes, tp, hw, link_eff, latency_scale)
            - allreduce_s(0.0, tp, hw, link_eff, latency_scale)
        )
    if pp > 1:
        step += (pp - 1) * lat
        tok += model.hidden * ACT_BYTES * (pp - 1) / bw
    return step, tok


def replica_load(concurrency: int, rate_rps: float, replicas: int) -> tuple[int, float, float]:
    """(clients per replica, rate per replica, busy replicas): the load one replica is simulated under
    and by how much its throughput multiplies. A closed loop of C clients over R replicas gives each
    ceil(C / R) clients and keeps C / ceil(C / R) replicas busy (latency from the most loaded one: an
    uneven split is judged by its busiest replica); an open loop splits its rate evenly."""
    if replicas <= 1:
        return concurrency, rate_rps, 1.0
    if concurrency > 0:
        per = math.ceil(concurrency / replicas)
        return per, rate_rps, concurrency / per
    return concurrency, rate_rps / replicas, float(replicas)


def min_gpus_for_weights(weight_bytes: float, usable_bytes: float) -> int:
    """The smallest power-of-two count of devices whose memory holds the weights with room left for KV."""
    n = 1
    while weight_bytes / n >= usable_bytes and n < 1024:
        n *= 2
    return n
