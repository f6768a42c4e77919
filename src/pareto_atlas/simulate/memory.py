"""Memory capacity: weights plus KV per sequence decide how many sequences fit, or none.

Per GPU: a tp x pp worker's device holds 1 / (tp pp) of the weights and its share of the KV
(simulate.parallel.kv_share over 1 / pp of the layers); a mixture of experts' routed experts split
over tp x attn_dp GPUs and each attention-DP group keeps its own sequences' KV (simulate.moe);
a disaggregated configuration's prefill
workers (prefill_tp devices) must hold the weights and one prompt's KV too."""

from __future__ import annotations

from dataclasses import dataclass

from pareto_atlas.simulate.cost_model import draft_card, weight_bytes
from pareto_atlas.simulate.moe import weights_per_gpu
from pareto_atlas.simulate.parallel import kv_share, min_gpus_for_weights
from pareto_atlas.simulate.params import CalibParams
from pareto_atlas.spec.cards import HardwareCard, ModelCard
from pareto_atlas.spec.knobs import BITS_PER_KV, Knobs

GIB = 2.0**30


@dataclass(frozen=True)
class MemoryPlan:
    weights_bytes: float  # on one GPU of the (decode) worker
    kv_bytes_per_token: float  # stored on that GPU per context token, after eviction (draft model's KV included)
    kv_cap_tokens: float  # context tokens (before eviction) the worker's KV budget holds
    max_seqs: int  # full-length sequences (prompt + output) that fit at once
    feasible: bool
    reason: str

    def mem_gb(self, kv_tokens: float) -> float:
        """Peak memory of one GPU in GB (1e9 bytes) with `kv_tokens` context tokens resident in its worker."""
        return (self.weights_bytes + kv_tokens * self.kv_bytes_per_token) / 1e9


def plan_memory(
    model: ModelCard,
    hw: HardwareCard,
    knobs: Knobs,
    prompt_tokens: int,
    output_tokens: int,
    params: CalibParams,
    draft: ModelCard | None = None,
) -> MemoryPlan:
    bits = BITS_PER_KV[knobs.kv]
    tp, pp = knobs.tp, knobs.pp
    w_all = weight_bytes(model, knobs.weights, matmul_only=False)
    w = w_all / (tp * pp)
    # kv_keep is the share kept over all layers: PyramidKV's uneven layers keep the same total as a
    # uniform policy at the same keep, so the same memory
    share = kv_share(model, tp) / pp if tp * pp > 1 else 1.0
    if model.is_moe:
        # all experts held, split over the worker's tp x attn_dp GPUs (simulate.moe)
        w = weights_per_gpu(model, knobs.weights, tp, pp, knobs.attn_dp)
    if knobs.attn_dp > 1:
        # each attention-DP group holds the KV of its own share of the sequences
        share = share / knobs.attn_dp
    per_tok = model.kv_bytes_per_token(bits) * knobs.kv_keep * share
    if model.sliding_layers:
        # sliding-window layers hold at most their window: per token of a full-length sequence,
        # so max_seqs and the token capacity count what such a sequence holds (gpt-oss: half its
        # layers at 128 tokens, about half the KV of a 5,000-token sequence)
        length = prompt_tokens + output_tokens
        per_tok *= model.kv_bytes_per_seq(bits, length) / (length * model.kv_bytes_per_token(bits))
    dc = draft_card(model, knobs.spec, draft) if knobs.spec != "none" else None
    if dc is not None:
        w_all += weight_bytes(dc, knobs.weights, matmul_only=False)
        w += weight_bytes(dc, knobs.weights, matmul_only=False) / tp
        per_tok += dc.kv_bytes_per_token(bits) * (kv_share(dc, tp) if tp > 1 else 1.0)
    usable = hw.mem_gib * GIB * params.mem_util
    budget = usable - w
    per_seq = (prompt_tokens + output_tokens) * per_tok
    if budget <= 0:
        need = min_gpus_for_weights(w_all, usable)
        # an MoE worker spreads its experts over attention-DP (and EP) GPUs too: TP x PP alone is not what it needs
        gpus = "GPUs per worker (TP x attention-DP x PP)" if model.is_moe else "TP x PP"
        layout = f"tp {tp} x attn_dp {knobs.attn_dp} x pp {pp}" if model.is_moe else f"tp {tp} x pp {pp}"
        where = (
            f" at {layout} ({w / 1e9:.1f} GB per GPU)" if tp * pp * (knobs.attn_dp if model.is_moe else 1) > 1 else ""
        )
        fix = (
            f": {gpus} >= {need} on {hw.mem_gib:g} GiB cards"
            if need <= hw.gpus_per_node
            else f": more than the {hw.gpus_per_node} GPUs of a {hw.name} node"
        )
        return MemoryPlan(
            w,
            per_tok,
            0.0,
            0,
            False,
            f"{model.name} {knobs.weights} needs {w_all / 1e9:.0f} GB of weights{where}, over "
            f"{params.mem_util:.0%} of {hw.name}'s {hw.mem_gib:g} GiB{fix}",
        )
    max_seqs = int(budget // per_seq)
    if max_seqs < 1:
        return MemoryPlan(
            w,
            per_tok,
            budget / per_tok,
            0,
            False,
            f"one sequence's KV ({per_seq / 1e9:.2f} GB per GPU) exceeds the {budget / 1e9:.2f} GB left on {hw.name}",
        )
    if knobs.batching == "disagg" and hw.link_gbs <= 0:
        return MemoryPlan(
            w,
            per_tok,
            budget / per_tok,
            max_seqs,
            False,
            f"disaggregation needs a link between pools; {hw.name} has link_gbs = 0",
        )
    if knobs.batching == "disagg" and knobs.prefill_tp_resolved != tp * pp:
        ptp = knobs.prefill_tp_resolved
        pw = w_all / ptp
        p_per_tok = model.kv_bytes_per_token(bits) * (kv_share(model, ptp) if ptp > 1 else 1.0)
        if pw + prompt_tokens * p_per_tok >= usable:
            return MemoryPlan(
                w,
                per_tok,
                budget / per_tok,
                max_seqs,
                False,
                f"a prefill worker of prefill_tp {ptp} holds {pw / 1e9:.0f} GB of weights per GPU, over "
                f"{params.mem_util:.0%} of {hw.name}'s {hw.mem_gib:g} GiB with one prompt's KV",
            )
    return MemoryPlan(w, per_tok, budget / per_tok, max_seqs, True, "")
