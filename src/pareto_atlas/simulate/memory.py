"""Memory capacity: weights plus KV per sequence decide how many sequences fit, or none."""

from __future__ import annotations

from dataclasses import dataclass

from pareto_atlas.simulate.cost_model import draft_card, weight_bytes
from pareto_atlas.simulate.params import CalibParams
from pareto_atlas.spec.cards import HardwareCard, ModelCard
from pareto_atlas.spec.knobs import BITS_PER_KV, Knobs

GIB = 2.0 ** 30


@dataclass(frozen=True)
class MemoryPlan:
    weights_bytes: float
    kv_bytes_per_token: float      # stored, after eviction (draft model's KV included)
    kv_cap_tokens: float           # context tokens (before eviction) the KV budget holds
    max_seqs: int                  # full-length sequences (prompt + output) that fit at once
    feasible: bool
    reason: str

    def mem_gb(self, kv_tokens: float) -> float:
        """Peak memory in GB (1e9 bytes) with `kv_tokens` context tokens resident."""
        return (self.weights_bytes + kv_tokens * self.kv_bytes_per_token) / 1e9


def plan_memory(model: ModelCard, hw: HardwareCard, knobs: Knobs, prompt_tokens: int, output_tokens: int,
                params: CalibParams, draft: ModelCard | None = None) -> MemoryPlan:
    bits = BITS_PER_KV[knobs.kv]
    w = weight_bytes(model, knobs.weights, matmul_only=False)
    # kv_keep is the share kept over all layers: PyramidKV's uneven layers keep the same total as a
    # uniform policy at the same keep, so the same memory
    per_tok = model.kv_bytes_per_token(bits) * knobs.kv_keep
    dc = draft_card(model, knobs.spec, draft) if knobs.spec != "none" else None
    if dc is not None:
        w += weight_bytes(dc, knobs.weights, matmul_only=False)
        per_tok += dc.kv_bytes_per_token(bits)
    budget = hw.mem_gib * GIB * params.mem_util - w
    per_seq = (prompt_tokens + output_tokens) * per_tok
    if budget <= 0:
        return MemoryPlan(w, per_tok, 0.0, 0, False,
                          f"weights {w / 1e9:.1f} GB exceed {params.mem_util:.0%} of {hw.name}'s {hw.mem_gib:g} GiB")
    max_seqs = int(budget // per_seq)
    if max_seqs < 1:
        return MemoryPlan(w, per_tok, budget / per_tok, 0, False,
                          f"one sequence's KV ({per_seq / 1e9:.2f} GB) exceeds the {budget / 1e9:.2f} GB left on {hw.name}")
    if knobs.batching == "disagg" and hw.link_gbs <= 0:
        return MemoryPlan(w, per_tok, budget / per_tok, max_seqs, False,
                          f"disaggregation needs a link between pools; {hw.name} has link_gbs = 0")
    return MemoryPlan(w, per_tok, budget / per_tok, max_seqs, True, "")
