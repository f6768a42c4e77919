"""Parallel layouts: the ones the simulator searches on GPU cards (as data: tensor parallel within a node,
a pipeline split, replicas, disaggregated xPyD pools, a mixture of experts' expert-parallel and attention-DP
layouts), and whether a layout fits a model card and a node (the heads TP splits, the experts EP splits,
the GPUs of one node). The simulator keeps only what fits (simulate.parallel, space); a study's grid may
list only values a searched layout takes (spec.study.space, at load), and a study that states the layout
of a server it measures is checked against its card before anything runs (measure.resolve,
scripts/gpu_anchors.py)."""

from __future__ import annotations

from pareto_atlas.spec.cards import HardwareCard, ModelCard
from pareto_atlas.spec.knobs import PARALLEL_DEFAULTS, PARALLEL_FIELDS, Knobs


def check_layout(model: ModelCard, hw: HardwareCard, knobs: Knobs) -> str:
    """ "" where the configuration's parallelism fits the model and the node, else why not, in one line
    naming the field. Multi-node tensor or pipeline parallelism is out of scope: a worker is one node."""
    if knobs.is_default_parallelism():
        return ""
    if hw.kind == "cpu" and knobs.gpus_per_worker() > 1:
        return f"knobs.tp x pp: {hw.name} is one CPU device; parallel workers need GPU cards"
    if why := check_model_layout(model, knobs):
        return why
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


def check_model_layout(model: ModelCard, knobs: Knobs) -> str:
    """ "" where the configuration's parallelism splits the model evenly (its heads over TP, its experts
    over EP, its layers over PP), else why not, in one line naming the field; no node is asked about."""
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


# Parallel layouts searched on GPU cards (simulate.parallel): tensor parallel within a node, a pipeline
# split, replicas, and a few disaggregated xPyD pools. Each is kept per card and model only where it
# fits (compatible: the heads, the node), so tp 8 on a 14-head model or on a 4-GPU node drops out.
AGG_LAYOUTS = (
    {"tp": 2},
    {"tp": 4},
    {"tp": 8},
    {"tp": 4, "pp": 2},
    {"replicas": 2},
    {"tp": 2, "replicas": 2},
    {"tp": 4, "replicas": 2},
)
DISAGG_LAYOUTS = (
    {"tp": 2},
    {"tp": 4},
    {"decode_workers": 2},
    {"prefill_workers": 2},
    {"tp": 2, "prefill_tp": 2, "decode_workers": 3},
    {"tp": 4, "prefill_tp": 2, "decode_workers": 1},
)


# Expert-parallel layouts a study searches for an MoE card on GPUs (beside AGG_LAYOUTS): EP
# across a TP worker (MoE-TP 1), attention-DP with EP (DeepSeek's and SGLang's large-EP serving), and
# a mix. Each is kept per card and model only where it fits (parallel.check_layout: the experts, the node).
MOE_LAYOUTS = (
    {"tp": 2, "ep": 2},
    {"tp": 4, "ep": 4},
    {"tp": 8, "ep": 8},
    {"attn_dp": 2, "ep": 2},
    {"attn_dp": 4, "ep": 4},
    {"attn_dp": 8, "ep": 8},
    {"tp": 2, "attn_dp": 4, "ep": 8},
    {"tp": 4, "attn_dp": 2, "ep": 8},
    {"tp": 4, "ep": 4, "replicas": 2},
)


def layout_values() -> dict[str, set[int]]:
    """Per parallel field, every value a searched layout gives it (the one-GPU default included, the MoE
    layouts too): what a study's grid may list for it."""
    out = {f: {PARALLEL_DEFAULTS[f]} for f in PARALLEL_FIELDS}
    for shape in AGG_LAYOUTS + DISAGG_LAYOUTS + MOE_LAYOUTS:
        for f, v in shape.items():
            out[f].add(v)
    return out


def check_grid_layouts(layouts: dict[str, list[int] | None], gpus_per_node: int, where: str = "simulate.grid") -> None:
    """A study's grid value of a parallel field that no searched layout takes keeps no configuration
    of its own: a one-line error naming the field (`where`.field) and the values the layouts take, not an
    empty space. (ep or attn_dp above 1 with dense models only: simulate.space.check_expert_grid.)"""
    reach = layout_values()
    for f, vals in layouts.items():
        for v in vals or ():
            if v in reach[f]:
                continue
            allowed = ", ".join(str(x) for x in sorted(reach[f]))
            if f in ("tp", "pp", "ep", "attn_dp", "prefill_tp") and v > gpus_per_node:
                why = f"a worker stays within one node: {gpus_per_node} GPUs on the study's cards, gpus_per_node"
            else:
                why = "the searched layouts: spec.layout"
            raise ValueError(f"{where}.{f}: {v} is in no searched layout; {f} takes {allowed} ({why})")
