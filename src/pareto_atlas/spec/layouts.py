"""The parallel layouts the simulator searches on GPU cards, as data: tensor parallel within a node, a
pipeline split, replicas, disaggregated xPyD pools, and a mixture of experts' expert-parallel and
attention-DP layouts. simulate.space and simulate.moe search them; a study's grid (spec.study.space)
may list only values they take, so a value none takes is an error at load, not an empty space."""

from __future__ import annotations

from pareto_atlas.spec.knobs import PARALLEL_DEFAULTS, PARALLEL_FIELDS

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


def layout_values(moe: bool = False) -> dict[str, set[int]]:
    """Per parallel field, every value a searched layout gives it (the one-GPU default included):
    what a study's grid may list for it (MOE_LAYOUTS beside the others on an MoE card)."""
    out = {f: {PARALLEL_DEFAULTS[f]} for f in PARALLEL_FIELDS}
    for shape in AGG_LAYOUTS + DISAGG_LAYOUTS + (MOE_LAYOUTS if moe else ()):
        for f, v in shape.items():
            out[f].add(v)
    return out


def check_grid_layouts(
    layouts: dict[str, list[int] | None], moe: bool, gpus_per_node: int, where: str = "simulate.grid"
) -> None:
    """A study's grid value of a parallel field that no searched layout takes keeps no configuration
    of its own: a one-line error naming the field (`where`.field) and the values the layouts take, not an
    empty space. `moe`: whether an MoE card is among the study's models (its layouts count)."""
    reach = layout_values(moe)
    for f, vals in layouts.items():
        for v in vals or ():
            if v in reach[f]:
                continue
            allowed = ", ".join(str(x) for x in sorted(reach[f]))
            if f in ("tp", "pp", "ep", "attn_dp", "prefill_tp") and v > gpus_per_node:
                why = f"a worker stays within one node: {gpus_per_node} GPUs on the study's cards, gpus_per_node"
            elif f in ("ep", "attn_dp") and not moe:
                why = "expert parallel and attention-DP layouts are searched for a mixture of experts' card only"
            else:
                why = "the searched layouts: spec.layouts"
            raise ValueError(f"{where}.{f}: {v} is in no searched layout; {f} takes {allowed} ({why})")
