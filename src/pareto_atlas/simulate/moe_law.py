"""An MoE layer's time from aiconfigurator's operator measurements: per (card, engine, expert weight format),
and per split of the experts over a worker's GPUs (MoE-TP x EP), a law fitted on the layer timed alone
(spec/published_moe_ops.csv, read by
calibrate.published_readers.aiconfigurator_moe_ops from aiconfigurator's moe_perf tables):

    latency per layer = fixed_s + s_per_weight x routed weights one GPU streams + s_per_flop x its expert FLOPs

where a step of T tokens routed top-k of E experts (balanced, as the tables route) touches min(E, T k) experts,
E / ep of them on each GPU, each GPU holding 1 / moe_tp of each expert's 3 x hidden x inter weights, and does
2 T k x 3 hidden inter / (moe_tp ep) FLOPs. Fitted by non-negative least squares on relative error over
the table's rows of that split, every shipped MoE shape of that format, 1-4096 tokens. Per split, because
what a layer costs at few tokens does not follow its bytes across splits (H200 TensorRT-LLM, BF16 x MXFP4,
one token: 100 us on one GPU, 28 us a GPU at MoE-TP 8; one law over every split is 40 % off at one GPU), and
because H200 vLLM 0.18.0's table times the layer alike at EP 1-8 (0.72 ms at 32 tokens), which no law of
bytes a GPU fits across splits.

cost_model._moe_terms charges an MoE layer by the law where one exists for the point's (card, engine,
format, MoE-TP, EP) (`law_for`): fixed_s a layer a step (in place of the fitted calib.moe_layer_s), the touched experts'
weights at 1 / s_per_weight (in place of the dense fit's streaming rate) and the expert FLOPs at
1 / s_per_flop (in place of the dense GEMMs'); elsewhere its own terms. The law is fitted on operator rows,
never on the served rows the MoE fit holds out.

MODE: "on" (the product's default: every law used), "off" (no law, the cost model's own terms) or
"leave-shape-out" (a model's layer priced by the law fitted without its own shape's rows: what a model
whose shape aiconfigurator never measured would get). On since session 17, with each engine's rows on its
own all-reduce latency (calibrate.published_moe.dense_bases), untimed splits on the one-GPU law (split_law)
and the FP8 formats read per checkpoint (moe_dtype): against "off" on the same tree the MoE fit's
leave-one-model-out TPOT goes 31 -> 18 % (B200 70 -> 25 %, H200 17 -> 15 %, H100-SXM 31 -> 25 %) and
throughput 14 -> 8 %, while B200's TTFT goes 32 -> 50 % and its latency bar +-141 -> +-1033 % (DeepSeek-V3's
attention-DP rows, whose TTFT both modes under-predict 5-12x, set it); docs/results/2026-12-03-moe-laws-on.md.
`scripts/moe_refit.py --moe-law off` measures the other side.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from pareto_atlas.spec.cards import HardwareCard, ModelCard

SHIPPED = "published_moe_ops.csv"  # spec/ (calibrate.published_readers.aiconfigurator_moe_ops.SHIPPED)
MODES = ("on", "off", "leave-shape-out")
MODE = "on"
SHAPE = ("hidden_size", "inter_size", "num_experts", "topk")


@dataclass(frozen=True)
class MoeLaw:
    gpu: str
    engine: str
    moe_dtype: str
    moe_tp: int
    ep: int
    fixed_s: float  # seconds per MoE layer per step
    s_per_weight: float  # seconds per routed weight a GPU streams
    s_per_flop: float  # seconds per expert FLOP on a GPU
    rows: int  # operator rows fitted
    shapes: tuple[tuple[int, int, int, int], ...]  # (hidden, inter, experts, topk) fitted
    rel_err: float  # median |relative error| of the law on its rows
    source: str  # the rows' provenance(s)

    def layer_s(self, tokens: float, hidden: int, inter: int, experts: int, topk: int, moe_tp=1, ep=1) -> float:
        """Seconds of one MoE layer for `tokens` tokens of a step, on one GPU of a moe_tp x ep split."""
        x = design(np.array([tokens], float), hidden, inter, experts, topk, moe_tp, ep)[0]
        return float(x @ np.array([self.fixed_s, self.s_per_weight, self.s_per_flop]))

    def provenance(self) -> str:
        return (
            f"MoE layer: aiconfigurator operator law {self.gpu}/{self.engine}/{self.moe_dtype} "
            f"MoE-TP{self.moe_tp} EP{self.ep} ({self.rows} rows, "
            f"{len(self.shapes)} shapes, {self.fixed_s * 1e6:.0f} us + {1e-12 / self.s_per_weight:.2f} T weights/s "
            f"median |err| {self.rel_err:.0%}; {self.source})"
            if self.s_per_weight > 0
            else f"MoE layer: aiconfigurator operator law {self.gpu}/{self.engine}/{self.moe_dtype} MoE-TP{self.moe_tp} "
            f"EP{self.ep} ({self.source})"
        )


def design(tokens, hidden, inter, experts, topk, moe_tp=1, ep=1) -> np.ndarray:
    """Rows [1, routed weights one GPU streams, its expert FLOPs] for arrays (or scalars) of the fields."""
    tokens = np.asarray(tokens, float)
    pe = 3.0 * np.asarray(hidden, float) * np.asarray(inter, float)
    touched = np.minimum(np.asarray(experts, float), tokens * topk) / ep
    flops = 2.0 * tokens * topk * pe / (np.asarray(moe_tp, float) * ep)
    one = np.ones_like(tokens * pe)
    return np.stack(np.broadcast_arrays(one, touched * pe / moe_tp, flops), axis=-1)


def fit_law(x: np.ndarray, seconds: np.ndarray) -> tuple[np.ndarray, float]:
    """Non-negative (fixed_s, s_per_weight, s_per_flop) minimising the relative error on rows x, and the
    median |relative error|."""
    from scipy.optimize import nnls

    w = 1.0 / seconds
    coef, _ = nnls(x * w[:, None], seconds * w)
    return coef, float(np.median(np.abs(x @ coef / seconds - 1.0)))


@lru_cache(maxsize=1)
def operator_table():
    """The shipped operator rows (spec/published_moe_ops.csv)."""
    from importlib import resources

    import pandas as pd

    with resources.files("pareto_atlas.spec").joinpath(SHIPPED).open() as f:
        df = pd.read_csv(f, dtype={"version": str})
    missing = [
        c
        for c in ("gpu", "engine", "moe_dtype", "num_tokens", *SHAPE, "moe_tp_size", "moe_ep_size", "latency", "source")
        if c not in df.columns
    ]
    if missing:
        raise ValueError(f"spec/{SHIPPED}: no column {missing[0]!r}")
    return df


def fit_laws(df, leave_out: tuple[int, int, int, int] | None = None) -> dict[tuple, MoeLaw]:
    """A law per (gpu, engine, moe_dtype, moe_tp_size, moe_ep_size) of `df` (the operator table's columns),
    the rows of shape `leave_out` left out."""
    out = {}
    if leave_out is not None:
        df = df[[tuple(int(v) for v in s) != leave_out for s in zip(*(df[c] for c in SHAPE))]]
    keys = ["gpu", "engine", "moe_dtype", "moe_tp_size", "moe_ep_size"]
    for (gpu, engine, dtype, mtp, ep), g in df.groupby(keys, sort=True):
        x = design(g.num_tokens, g.hidden_size, g.inter_size, g.num_experts, g.topk, g.moe_tp_size, g.moe_ep_size)
        coef, err = fit_law(x, g.latency.to_numpy(float) * 1e-3)
        shapes = tuple(sorted({tuple(int(v) for v in s) for s in zip(*(g[c] for c in SHAPE))}))
        src = "; ".join(sorted(g.source.unique()))
        mtp, ep = int(mtp), int(ep)
        out[gpu, engine, dtype, mtp, ep] = MoeLaw(
            gpu, engine, dtype, mtp, ep, *map(float, coef), len(g), shapes, err, src
        )
    return out


@lru_cache(maxsize=16)
def laws(leave_out: tuple[int, int, int, int] | None = None) -> dict[tuple, MoeLaw]:
    """The shipped laws (fit_laws on the operator table), cached."""
    return fit_laws(operator_table(), leave_out)


# The MoE cards whose published FP8 checkpoint scales its weights in blocks: config.json's
# quantization_config is quant_method fp8 with weight_block_size [128, 128] (deepseek-ai/DeepSeek-V3,
# Qwen/Qwen3-235B-A22B-FP8; as ai-dynamo/aiconfigurator ships them:
# aic-core/src/aiconfigurator_core/model_configs/{deepseek-ai--DeepSeek-V3,Qwen--Qwen3-235B-A22B-FP8}_config.json
# @095f58a5). Any other card served in FP8 is quantized per tensor: its checkpoint is 16-bit
# (mistralai/Mixtral-8x7B-v0.1's config.json has no quantization_config; TensorRT-LLM's perf-overview
# quantizes it to FP8 when it builds), and aiconfigurator reads an FP8 checkpoint without
# weight_block_size as per-tensor fp8 (aic-core/src/aiconfigurator_core/sdk/models/helpers.py
# _infer_mixed_precision_quant_modes @095f58a5).
FP8_BLOCK = ("deepseek-v3", "qwen3-235b-a22b")
# The table a per-tensor FP8 card's experts are priced by: "fp8_block" (the default: the block-FP8 law, as
# before the per-tensor tables were read) or "fp8" (aiconfigurator's per-tensor tables, TensorRT-LLM
# 1.2.0rc5 on H100-SXM and H200; `scripts/moe_refit.py --fp8-per-tensor fp8` measures it). The per-tensor
# layer is measured up to twice as fast where it computes (Mixtral, 4,096 tokens, one H100: 2.07 against
# 4.09 ms), and Mixtral's FP8 rows (TensorRT-LLM 0.17's perf-overview, offline throughput, a release
# aiconfigurator never measured) come out that much faster under it: laws on, leave-one-model-out
# throughput H100-SXM 7 -> 25 %, H200 6 -> 29 % (docs/results/2026-12-03-moe-fp8.md).
PER_TENSOR_FP8 = "fp8_block"
PER_TENSOR_FP8_CHOICES = ("fp8_block", "fp8")


def moe_dtype(weights: str, hw: HardwareCard, engine: str, model: ModelCard) -> str | None:
    """The operator table's format an MoE point's experts run as (None: none measured): MXFP4 experts run
    BF16 x MXFP4 on Hopper (Triton), MXFP8 x MXFP4 under TensorRT-LLM on Blackwell (its TRTLLM backend);
    FP8 as block-scaled FP8 where the model's FP8 checkpoint is block-scaled (FP8_BLOCK), else by the
    table PER_TENSOR_FP8 names (read_published.MOE_OPS)."""
    if weights == "MXFP4":
        return "w4a8_mxfp4_mxfp8" if hw.arch == "blackwell" and engine == "trtllm" else "w4a16_mxfp4"
    if weights == "FP8":
        if PER_TENSOR_FP8 not in PER_TENSOR_FP8_CHOICES:
            raise ValueError(
                f"moe_law.PER_TENSOR_FP8: {PER_TENSOR_FP8!r} must be one of {', '.join(PER_TENSOR_FP8_CHOICES)}"
            )
        return "fp8_block" if model.name in FP8_BLOCK else PER_TENSOR_FP8
    return None


def model_shape(model: ModelCard) -> tuple[int, int, int, int]:
    return (model.hidden, model.expert_intermediate, model.n_experts, model.experts_per_token)


def law_for(
    hw: HardwareCard, engine: str, model: ModelCard, weights: str, moe_tp: int = 1, ep: int = 1
) -> MoeLaw | None:
    """The law a point's MoE layers run by under MODE (its experts split MoE-TP x EP), or None (the cost
    model's own terms)."""
    if MODE not in MODES:
        raise ValueError(f"moe_law.MODE: {MODE!r} must be one of {', '.join(MODES)}")
    if MODE == "off" or not model.is_moe:
        return None
    dtype = moe_dtype(weights, hw, engine, model)
    if dtype is None:
        return None
    found = laws(model_shape(model) if MODE == "leave-shape-out" else None)
    return split_law(found, (hw.name, engine, dtype), int(moe_tp), int(ep))


def split_law(found: dict[tuple, MoeLaw], where: tuple[str, str, str], moe_tp: int, ep: int) -> MoeLaw | None:
    """The law of (gpu, engine, moe_dtype) `where` at split MoE-TP x EP: its own where the table timed that
    split, else the one-GPU law (MoE-TP1 EP1), whose fixed cost a layer the split pays whole and whose
    rates price the GPU's share of the weights and FLOPs (cost_model._moe_terms divides them by the split).
    A split's launches, routing and permutation do not shrink with its share of the experts: H200 vLLM
    0.18.0's MXFP4 table times the layer alike at EP 1-32 (0.152-0.155 ms at 4 tokens, 0.092-0.097 at
    one), and it times no MoE-TP above 1, where the engine runs gpt-oss at TP 2-8 (its default splits the
    experts by TP). None: no law of the format on the card and engine."""
    return found.get((*where, moe_tp, ep)) or found.get((*where, 1, 1))


def carried_law(
    hw: HardwareCard, engine: str, model: ModelCard, weights: str, moe_tp: int = 1, ep: int = 1
) -> MoeLaw | None:
    """For a point whose format aiconfigurator never timed on its card and engine (law_for None: a 16-bit
    or NVFP4 MoE on Hopper), the law whose fixed cost a layer it pays (cost_model._moe_terms; its weights
    and FLOPs stay at the cost model's own rates): of the formats timed on the card and engine at the
    split (split_law), the one of least fixed cost, since a layer that quantizes nothing pays no
    dequantization or activation scaling. Without it such a point would pay the MoE fit's per-layer term,
    which with the laws on is fitted on the few rows no law prices (B200's vLLM and NVFP4 rows: 0 us) and
    put Qwen3-30B-A3B at 16 bits on eight H200s at 0.9 ms a token. None: MODE off, a dense model, a format
    with its own law, or no format timed on the card and engine."""
    if MODE == "off" or not model.is_moe or law_for(hw, engine, model, weights, moe_tp, ep) is not None:
        return None
    found = laws(model_shape(model) if MODE == "leave-shape-out" else None)
    dtypes = sorted({k[2] for k in found if k[:2] == (hw.name, engine)})
    timed = [law for d in dtypes if (law := split_law(found, (hw.name, engine, d), int(moe_tp), int(ep)))]
    return min(timed, key=lambda law: (law.fixed_s, law.moe_dtype)) if timed else None


def point_note(model: ModelCard, hw: HardwareCard, knobs, params) -> str:
    """ "; <the law's provenance>" for a point (knobs, params: a Knobs and a CalibParams) whose MoE layers
    cost_model._moe_terms prices by a law (its decode worker's split of the experts), else ""."""
    if not model.is_moe:
        return ""
    g, ep = knobs.tp * knobs.attn_dp, max(knobs.ep, 1)
    law = law_for(hw, params.engine, model, knobs.weights, max(g // ep, 1), ep)
    if law is None:
        lent = carried_law(hw, params.engine, model, knobs.weights, max(g // ep, 1), ep)
        return (
            f"; MoE layer's fixed cost {lent.fixed_s * 1e6:.0f} us from the {lent.moe_dtype} law "
            f"({knobs.weights} not timed on {hw.name}/{params.engine}: the least of the formats timed; "
            f"{lent.provenance()})"
            if lent is not None
            else ""
        )
    lent = (law.moe_tp, law.ep) != (max(g // ep, 1), ep)
    return f"; {law.provenance()}" + (f" for split MoE-TP{max(g // ep, 1)} EP{ep} (not timed)" if lent else "")
