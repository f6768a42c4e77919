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
from pareto_atlas.spec.knobs import Knobs

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


def check_layout(model: ModelCard, hw: HardwareCard, knobs: Knobs) -> str:
    """ "" where the configuration's parallelism fits the model and the node, else why not, in one line
    naming the field. Multi-node tensor or pipeline parallelism is out of scope: a worker is one node."""
    if knobs.is_default_parallelism():
        return ""
    if hw.kind == "cpu" and knobs.gpus_per_worker() > 1:
        return f"knobs.tp x pp: {hw.name} is one CPU device; parallel workers need GPU cards"
    for name, tp in (("tp", knobs.tp), ("prefill_tp", knobs.prefill_tp_resolved if knobs.batching == "disagg" else 1)):
        if model.n_heads % tp:
            return f"knobs.{name}: {tp} does not divide {model.name}'s {model.n_heads} attention heads"
        if tp > model.n_kv_heads and tp % model.n_kv_heads:
            return (
                f"knobs.{name}: {tp} exceeds {model.name}'s {model.n_kv_heads} KV heads and is not a multiple "
                f"of them (each KV head would be replicated unevenly)"
            )
        if tp <= model.n_kv_heads and model.n_kv_heads % tp:
            return f"knobs.{name}: {tp} does not divide {model.name}'s {model.n_kv_heads} KV heads"
    moe = check_moe_layout(model, knobs.tp, knobs.ep, knobs.attn_dp)
    if moe:
        return moe
    if knobs.pp > model.n_layers:
        return f"knobs.pp: {knobs.pp} stages exceed {model.name}'s {model.n_layers} layers"
    per_worker = max(knobs.gpus_per_worker(), knobs.prefill_tp_resolved if knobs.batching == "disagg" else 1)
    if per_worker > hw.gpus_per_node:
        what = (
            ("tp x attn_dp x pp" if knobs.attn_dp > 1 else "tp x pp")
            if knobs.gpus_per_worker() >= per_worker
            else "prefill_tp"
        )
        return (
            f"knobs.{what}: {per_worker} GPUs per worker exceed {hw.name}'s {hw.gpus_per_node} per node "
            f"(gpus_per_node; multi-node workers are out of scope, replicas may span nodes)"
        )
    if per_worker > 1 and (hw.link == "none" or hw.link_gbs <= 0):
        return f"knobs.tp: {hw.name} has no link between devices (link = {hw.link!r}, link_gbs = {hw.link_gbs:g})"
    return ""


def check_moe_layout(model: ModelCard, tp: int, ep: int, attn_dp: int) -> str:
    """ "" where an expert/attention-DP layout fits the card, else one line naming the field."""
    if ep == 1 and attn_dp == 1:
        return ""
    if not model.is_moe:
        field = "ep" if ep > 1 else "attn_dp"
        return (
            f"knobs.{field}: {model.name} is a dense model (no experts to split); ep and attn_dp are "
            f"for mixture-of-experts cards"
        )
    if model.n_experts % ep:
        return f"knobs.ep: {ep} does not divide {model.name}'s {model.n_experts} experts"
    moe_tp = tp * attn_dp // ep
    if model.expert_intermediate % moe_tp:
        return (
            f"knobs.ep: MoE-TP = tp x attn_dp / ep = {moe_tp} does not divide {model.name}'s expert "
            f"width {model.expert_intermediate}"
        )
    return ""


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
