"""A linear layer's fixed cost a call, from aiconfigurator's operator measurements: per (card, engine, weight
format), the intercept of the law fitted on the engine's own Linear module timed alone at a decode step's
sizes (spec/published_gemm_ops.csv, read by calibrate.published_readers.aiconfigurator_gemm_ops from
aiconfigurator's gemm_perf tables):

    latency per call = fixed_s + s_per_byte x weight bytes (n x k x bytes per weight)

fitted by non-negative least squares on relative error over the table's rows of that format, m = 1-16 tokens,
n and k 1,024-16,384. On H100-SXM it is 3.4-4.5 us a call in BF16 and 13-15 us in per-tensor FP8 (TensorRT-LLM
and vLLM alike), within 1-6 % of every row (docs/results/2026-12-03-h100-tpot.md); the FP8 call's extra ~10 us
is its activation quantization: both collectors time FP8 with a dynamic activation scale (TensorRT-LLM's
FP8QDQ "includes the compute-scale overhead", collector/trtllm/collect_gemm.py; vLLM's Fp8Config
activation_scheme "dynamic", collector/vllm/collect_gemm.py, ai-dynamo/aiconfigurator@095f58a5), as the
published rows' "gemm_quant_mode fp8" states theirs.

What it changes: the cost model streams a step's weights at a rate (seconds per byte, or per weight and
token), so a device's share of the linear layers costs 1 / tp of one GPU's, and the fitted one-GPU rate carries
the calls' fixed cost spread over the weights of the models it was fitted on. A call's fixed cost does not
shrink with TP: at TP8 a Qwen3-32B FP8 layer's four calls stream 18 us of weights and take 81 us
(TensorRT-LLM's table). cost_model.coeffs adds `calls(model) x fixed_s` a step (O_DEV, the device's fixed
time) where a law exists for the point's (card, engine, format) and MODE is "on", and the one-GPU fits then
fit the rate on top of it.

MODE: "on" or "off" (the product's: no fixed cost, the cost model's rates alone, as before). Off because on,
with the one-GPU fits refitted on top of it, it moves H100-SXM's TensorRT-LLM Qwen3-32B FP8 rows from -15 to
-26 % to -16 to +37 % (LOSO signed median -17 -> +3 %) but H200's TensorRT-LLM Llama-3.1-70B FP8 rows from +5
to +26 % (at 4 clients +46 to +90 %: their measured 6.3 ms a step at TP8 is below the dynamic-FP8 calls'
fixed cost plus the weights' streaming, so those rows did not pay it) and H100-SXM's LOSO TTFT 23 -> 36 %;
docs/results/2026-12-03-h100-tpot.md.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from pareto_atlas.spec.cards import ModelCard

SHIPPED = "published_gemm_ops.csv"  # spec/ (calibrate.published_readers.aiconfigurator_gemm_ops.SHIPPED)
MODES = ("on", "off")
MODE = "off"
# the product's weight formats -> the tables' gemm_dtype: 16-bit floats run the BF16 GEMMs, FP8 the per-tensor
# FP8 path (the published rows' "gemm_quant_mode fp8"); other formats have no law (their kernels are not timed)
DTYPES = {"BF16": "bfloat16", "F16": "bfloat16", "FP8": "fp8"}
BYTES_PER_WEIGHT = {"bfloat16": 2.0, "fp8": 1.0}
# the linear calls of a dense decoder layer as the engines run them: the fused QKV projection, the output
# projection, the fused gate-and-up projection and the down projection (vLLM's QKVParallelLinear and
# MergedColumnParallelLinear, TensorRT-LLM's fused qkv and gate_up Linear modules); one lm_head a step
LAYER_CALLS = 4


@dataclass(frozen=True)
class GemmFloor:
    gpu: str
    engine: str
    gemm_dtype: str
    fixed_s: float  # seconds per linear call
    s_per_byte: float  # seconds per weight byte streamed (not used by the cost model: its rate is fitted)
    rows: int
    rel_err: float  # median |relative error| of the law on its rows
    source: str

    def provenance(self) -> str:
        return (
            f"linear call: aiconfigurator GEMM law {self.gpu}/{self.engine}/{self.gemm_dtype} "
            f"({self.rows} rows, {self.fixed_s * 1e6:.1f} us a call + {1e-12 / self.s_per_byte:.2f} TB/s, "
            f"median |err| {self.rel_err:.0%}; {self.source})"
        )


def calls(model: ModelCard) -> int:
    """Linear calls of one step of a dense model: LAYER_CALLS a layer and the lm_head."""
    return LAYER_CALLS * model.n_layers + 1


def fit_floor(weight_bytes: np.ndarray, seconds: np.ndarray) -> tuple[float, float, float]:
    """Non-negative (fixed_s, s_per_byte) minimising the relative error over rows, and the median |relative error|."""
    from scipy.optimize import nnls

    x = np.stack([np.ones_like(weight_bytes), weight_bytes], axis=-1)
    w = 1.0 / seconds
    coef, _ = nnls(x * w[:, None], seconds * w)
    return float(coef[0]), float(coef[1]), float(np.median(np.abs(x @ coef / seconds - 1.0)))


@lru_cache(maxsize=1)
def operator_table():
    """The shipped operator rows (spec/published_gemm_ops.csv)."""
    from importlib import resources

    import pandas as pd

    with resources.files("pareto_atlas.spec").joinpath(SHIPPED).open() as f:
        df = pd.read_csv(f, dtype={"version": str})
    missing = [c for c in ("gpu", "engine", "gemm_dtype", "m", "n", "k", "latency", "source") if c not in df.columns]
    if missing:
        raise ValueError(f"spec/{SHIPPED}: no column {missing[0]!r}")
    return df


def fit_floors(df) -> dict[tuple[str, str, str], GemmFloor]:
    """A law per (gpu, engine, gemm_dtype) of `df` (the operator table's columns)."""
    out = {}
    for (gpu, engine, dtype), g in df.groupby(["gpu", "engine", "gemm_dtype"], sort=True):
        if dtype not in BYTES_PER_WEIGHT:
            raise ValueError(
                f"spec/{SHIPPED}: gemm_dtype {dtype!r} has no bytes per weight ({', '.join(BYTES_PER_WEIGHT)})"
            )
        b = g.n.to_numpy(float) * g.k.to_numpy(float) * BYTES_PER_WEIGHT[dtype]
        fixed, per_byte, err = fit_floor(b, g.latency.to_numpy(float) * 1e-3)
        src = "; ".join(sorted(g.source.unique()))
        out[gpu, engine, dtype] = GemmFloor(gpu, engine, dtype, fixed, per_byte, len(g), err, src)
    return out


@lru_cache(maxsize=1)
def floors() -> dict[tuple[str, str, str], GemmFloor]:
    """The shipped laws (fit_floors on the operator table), cached."""
    return fit_floors(operator_table())


def floor_for(gpu: str, engine: str, weights: str) -> GemmFloor | None:
    """The law of a point's (card, engine, weight format) where MODE is on and the table has one, else None."""
    if MODE == "off":
        return None
    if MODE not in MODES:
        raise ValueError(f"gemm_floor.MODE: {MODE!r} is not one of {', '.join(MODES)}")
    dtype = DTYPES.get(weights)
    return floors().get((gpu, engine, dtype)) if dtype else None


def step_fixed_s(model: ModelCard, gpu: str, engine: str, weights: str) -> float:
    """Seconds a step of one device spends on its linear calls' fixed cost (0 where no law applies: MODE
    off, a card, engine or format the table does not hold, a mixture of experts or latent attention, whose
    layers the MoE terms price)."""
    if model.is_moe or model.is_mla:
        return 0.0
    law = floor_for(gpu, engine, weights)
    return calls(model) * law.fixed_s if law is not None else 0.0


def key() -> str:
    """What the published fits depend on here: the mode and, where on, the shipped table's content."""
    if MODE == "off":
        return "gemm-floor:off"
    from importlib import resources

    data = resources.files("pareto_atlas.spec").joinpath(SHIPPED).read_bytes()
    return f"gemm-floor:{MODE}:{hashlib.sha256(data).hexdigest()[:12]}"
