"""The simulator's free parameters (efficiencies and overheads), per hardware and engine.

Calibration fits them to anchors; a card without anchors gets the defaults below, labelled
"uncalibrated default" so no one mistakes them for a measurement.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

import numpy as np

from pareto_atlas.spec.cards import HardwareCard
from pareto_atlas.spec.fields import check_fields

# Weight formats that share dequantize+dot kernels; a format without its own fitted cost borrows
# its family's (and is then an extrapolation). RANDOM is stored in the Q4_0 layout. FP8 is a family
# of its own: its GEMMs run on FP8 units at twice the 16-bit rate, so neither stands in for the other.
FAMILY = {
    "Q4_0": "legacy",
    "Q4_1": "legacy",
    "Q5_0": "legacy",
    "Q8_0": "legacy",
    "RANDOM": "legacy",
    "Q4_K_M": "k-quant",
    "Q3_K": "k-quant",
    "Q2_K": "k-quant",
    "F32": "float",
    "F16": "float",
    "BF16": "float",
    "FP8": "fp8",
    "AWQ4": "int4-gpu",
    # W4A16 (GPTQ int4 weight-only) runs the same Marlin-class kernels as AWQ; W8A8 its own int8 GEMMs
    "W4A16": "int4-gpu",
    "W8A8": "int8",
    # FP4 (spec.fp4): W4A4 NVFP4 runs FP4 tensor-core GEMMs; weight-only NVFP4 and MXFP4 dequantize to
    # 16 bits (Marlin-class FP4 kernels, not AWQ's int4 ones), so neither family stands in for the other
    "NVFP4": "fp4",
    "NVFP4A16": "fp4-weight-only",
    "MXFP4": "fp4-weight-only",
}
LAYOUT = {"RANDOM": "Q4_0"}  # formats that run exactly another format's kernels
# llama.cpp's K-quants pack 256 weights a block along a tensor's rows; a tensor whose rows are not a
# multiple of 256 long is stored in a legacy type instead (Q4_K -> Q5_0, Q6_K -> Q8_0). A model whose
# hidden size is not a multiple of 256 so runs mostly legacy kernels under a K-quant's name:
# Qwen2.5-0.5B's Q4_K_M file is 71 % Q5_0, 15 % Q4_K, 15 % Q6_K of its body weights (hidden 896),
# Qwen2.5-1.5B's 85 % Q4_K, 15 % Q6_K (hidden 1536). Their fitted costs are two formats', not one.
QK_K = 256
LEGACY_ROWS = "/legacy-rows"


def kernel_format(weights: str, model=None) -> str:
    """The kernels a weight format runs on `model` (a ModelCard; None: the format's own): the format,
    or `<K-quant>/legacy-rows` where the model's rows do not fit K-quant blocks (see QK_K)."""
    w = LAYOUT.get(weights, weights)
    if model is not None and FAMILY.get(w) == "k-quant" and getattr(model, "hidden", 0) % QK_K:
        return w + LEGACY_ROWS
    return w


def base_format(fmt: str) -> str:
    """A kernel format's weight format (its label without /legacy-rows)."""
    return fmt.removesuffix(LEGACY_ROWS)


def format_family(fmt: str) -> str:
    """A kernel format's family: a K-quant on legacy rows runs mostly legacy kernels."""
    return "legacy" if fmt.endswith(LEGACY_ROWS) else FAMILY.get(fmt, fmt)


MAX_EFF_BW = 2.0
LINK_DEFAULTS = {
    "link_eff": 0.75,
    "link_latency_scale": 1.0,
    "par_lat_rel_err": float("nan"),
    "par_thr_rel_err": float("nan"),
    "link_provenance": "",
    # a mixture of experts' routing skew and bar, fitted on published MoE rows (calibrate.published_moe)
    "routing_skew": float("nan"),
    "moe_layer_s": 0.0,
    "moe_flops_eff": 1.0,
    "moe_lat_rel_err": float("nan"),
    "moe_thr_rel_err": float("nan"),
    "moe_provenance": "",
}
# The error bar of an uncalibrated default (no anchor and no published row fitted it): the floor of any
# bar a point resting on a default part carries
DEFAULT_BAR = 0.25


@dataclass(frozen=True)
class CalibParams:
    """Efficiencies are fractions of the card's peak (0, 1]; overheads are seconds."""

    hardware: str = ""
    engine: str = ""
    eff_bw: float = 0.75  # achieved / peak bandwidth when streaming weights
    eff_bw_by_dtype: dict = field(default_factory=dict)  # weight dtype -> eff_bw (dequant kernels differ)
    eff_flops: float = 0.5  # achieved / peak FLOP/s of the linear layers
    eff_flops_by_dtype: dict = field(default_factory=dict)
    eff_attn: float = 0.6  # achieved / peak bandwidth when reading the KV cache
    eff_attn_by_kv: dict = field(default_factory=dict)  # KV dtype -> eff_attn (attention on quantized KV)
    # Attention's matmuls (QK^T, PV) as a fraction of peak FLOP/s, by KV dtype. A prompt's attention is
    # a GEMM over its (query, key) pairs, a decode step's a matrix-vector pass over the cache: one
    # efficiency cannot be both (llama.cpp on 2 cores: f16 KV costs ~6 us per cached cell per decode
    # step, yet a 512-token prompt's attention is almost free). Fitted where the anchors span two
    # prompt lengths; a KV dtype missing here uses its eff_attn.
    eff_attn_flops_by_kv: dict = field(default_factory=dict)
    # The engine attends over the KV cache padded to a multiple of this many cells (llama.cpp pads
    # n_kv to 256: llama_kv_cache::get_n_kv), so a decode step over c cached tokens reads and
    # multiplies ceil(c / pad) * pad of them; modelled in expectation, half a pad per sequence. 0: none.
    kv_pad: int = 0
    # Seconds per weight per token of the dequantize+dot kernels, by weight format; a format
    # missing here falls back to its family, then to 2 FLOPs / (peak x eff_flops).
    gemv_s_per_weight: dict = field(default_factory=dict)  # small batches: one pass over the weights per token
    gemm_s_per_weight: dict = field(default_factory=dict)  # tiled GEMM columns (prefill, large batches)
    # Kernel formats whose costs above were carried from other cards of this card's generation (format ->
    # the cards they were fitted on), not fitted on this card's own anchors (calibrate.published_formats).
    # Left out of to_dict when empty.
    carried_formats: dict = field(default_factory=dict)
    # Per kernel format, {"lat": .., "thr": ..} relative error bars of its fitted, carried or derived cost:
    # p90 of its held-out error (calibrate.published_formats; a key only where one was measured). A point
    # of the format carries the wider of this and the card's bar. Left out of to_dict when empty.
    format_rel_err: dict = field(default_factory=dict)
    gemm_tile: int = 0  # GEMM column tile; 0: every batch runs as GEMM (GPU kernels)
    head_ratio: float = 1.0  # lm_head cost per weight relative to the body's GEMV
    overhead_step_s: float = 2e-3  # scheduler, sampling, kernel launches: paid once per step
    overhead_seq_s: float = 5e-5  # per sequence in the step (bookkeeping, sampling)
    # Per request, outside the engine's steps: the API server's HTTP handling, tokenization and hop
    # to the engine, between a client's send and the engine seeing the request (in TTFT and E2E).
    # Fitted on GPU cards (calibrate.fit); on a CPU, where a TTFT is seconds of prefill, it is left
    # at 0 and whatever it is sits in the fitted prefill costs.
    overhead_req_s: float = 5e-3
    ngram_lookup_s: float = 1e-4  # n-gram draft: a table lookup per draft step, no forward
    draft_forward_s: float = 3e-4  # launch cost of one draft-model (or EAGLE head) forward
    step_cv: float = 0.03  # step-to-step jitter (coefficient of variation)
    roofline_p: float = 4.0  # sharpness of the smooth max(memory, compute)
    mem_util: float = 0.9  # fraction of device memory the engine may use
    provenance: str = "uncalibrated default"
    lat_rel_err: float = DEFAULT_BAR  # error bar carried by every point simulated with these
    thr_rel_err: float = DEFAULT_BAR
    # The error bar of a point carried to a model the fit did not see: the relative error of each
    # model's anchors predicted by a fit on the other models' (leave-one-model-out, calibrate.sizes;
    # on a GPU card, over its published models). NaN: not measured (the fit saw one model). The
    # within-model lat_rel_err / thr_rel_err above stay the measured model's.
    xfer_lat_rel_err: float = float("nan")
    xfer_thr_rel_err: float = float("nan")
    # A parallel worker's link: the achieved fraction of link_gbs in its collectives, and a factor on
    # the card's per-hop latency (NCCL reaches ~70-80 % of NVLink's bus bandwidth on large messages;
    # fitted where published multi-GPU rows cover a card). Left out of to_dict at these defaults.
    link_eff: float = 0.75
    link_latency_scale: float = 1.0
    # The error bar of a point on several GPUs and what it rests on: the held-out error of the card's
    # link fit on published multi-GPU rows (calibrate.published_link). NaN / "": not fitted, a
    # parallel point carries the one-GPU bar. Left out of to_dict at these defaults.
    par_lat_rel_err: float = float("nan")
    par_thr_rel_err: float = float("nan")
    link_provenance: str = ""
    # A mixture of experts on this card: the routing skew exponent fitted on published MoE rows
    # (simulate.moe; NaN: its prior moe.ROUTING_SKEW), and an MoE point's bar and what it rests on (the
    # held-out error of that fit, calibrate.published_moe; NaN / "": an MoE point carries the dense bar).
    # Left out of to_dict at these defaults.
    routing_skew: float = float("nan")
    # What an MoE layer costs beyond its weights and FLOPs at the dense kernels' rates, fitted beside the
    # skew: seconds per MoE layer per step (router, top-k, token permutation and the grouped GEMMs'
    # launches, paid whatever the batch), and the expert GEMMs' efficiency relative to the dense GEMMs'
    # (tokens split over many small experts run tiles part empty). 0 and 1: the dense kernels' costs.
    moe_layer_s: float = 0.0
    moe_flops_eff: float = 1.0
    moe_lat_rel_err: float = float("nan")
    moe_thr_rel_err: float = float("nan")
    moe_provenance: str = ""

    def __post_init__(self) -> None:
        # eff_bw may exceed 1: a CPU card's bandwidth is a one-thread numpy copy, and the engine's
        # threads streaming weights read-only go faster than that.
        for name, hi in (("eff_bw", MAX_EFF_BW), ("eff_flops", 1.0), ("eff_attn", 1.0), ("mem_util", 1.0)):
            v = getattr(self, name)
            if not 0.0 < v <= hi:
                raise ValueError(f"calib.{name}: {v} must be in (0, {hi:g}]")
        for name, d, hi in (
            ("eff_bw_by_dtype", self.eff_bw_by_dtype, MAX_EFF_BW),
            ("eff_flops_by_dtype", self.eff_flops_by_dtype, 1.0),
            ("eff_attn_by_kv", self.eff_attn_by_kv, 1.0),
            ("eff_attn_flops_by_kv", self.eff_attn_flops_by_kv, 1.0),
        ):
            for k, v in d.items():
                if not 0.0 < v <= hi:
                    raise ValueError(f"calib.{name}[{k!r}]: {v} must be in (0, {hi:g}]")
        for name, d in (("gemv_s_per_weight", self.gemv_s_per_weight), ("gemm_s_per_weight", self.gemm_s_per_weight)):
            for k, v in d.items():
                if not v > 0.0:
                    raise ValueError(f"calib.{name}[{k!r}]: {v} must be > 0 seconds")
        if self.kv_pad < 0:
            raise ValueError(f"calib.kv_pad: {self.kv_pad} must be >= 0 cells")
        if self.gemm_tile < 0 or self.head_ratio <= 0:
            raise ValueError(f"calib.gemm_tile {self.gemm_tile} must be >= 0 and head_ratio {self.head_ratio} > 0")
        if self.moe_layer_s < 0 or not 0.0 < self.moe_flops_eff <= 1.0:
            raise ValueError(
                f"calib.moe_layer_s {self.moe_layer_s} must be >= 0 s and moe_flops_eff {self.moe_flops_eff} in (0, 1]"
            )
        if self.routing_skew == self.routing_skew and not 0.0 < self.routing_skew <= 1.5:
            raise ValueError(f"calib.routing_skew: {self.routing_skew} must be in (0, 1.5] or NaN (the prior)")
        for name in (
            "xfer_lat_rel_err",
            "xfer_thr_rel_err",
            "par_lat_rel_err",
            "par_thr_rel_err",
            "moe_lat_rel_err",
            "moe_thr_rel_err",
        ):
            v = getattr(self, name)
            if v == v and not v >= 0.0:
                raise ValueError(f"calib.{name}: {v} must be >= 0 (a relative error) or NaN (not measured)")
        for name in (
            "overhead_step_s",
            "overhead_seq_s",
            "overhead_req_s",
            "ngram_lookup_s",
            "draft_forward_s",
            "step_cv",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"calib.{name}: {getattr(self, name)} must be >= 0")
        if not 0.0 < self.link_eff <= 1.0:
            raise ValueError(f"calib.link_eff: {self.link_eff} must be in (0, 1]")
        if self.link_latency_scale < 0:
            raise ValueError(f"calib.link_latency_scale: {self.link_latency_scale} must be >= 0")
        if self.roofline_p < 1:
            raise ValueError(f"calib.roofline_p: {self.roofline_p} must be >= 1")

    def bw_eff(self, weights: str, model=None) -> float:
        """The streaming efficiency of a weight format's kernels on `model`'s rows (kernel_format, as the
        fit keys it): the kernel format's own, else its family's (geometric mean: a K-quant file on legacy
        rows streams as the legacy kernels do), else the card's. So a legacy-row file's rate informs the
        legacy kernels and never stands for real K-quant rows."""
        w = kernel_format(weights, model)
        if w in self.eff_bw_by_dtype:
            return self.eff_bw_by_dtype[w]
        fam = [v for k, v in self.eff_bw_by_dtype.items() if format_family(k) == format_family(w)]
        return float(np.exp(np.mean(np.log(fam)))) if fam else self.eff_bw

    def flops_eff(self, weights: str) -> float:
        return self.eff_flops_by_dtype.get(weights, self.eff_flops)

    def attn_eff(self, kv: str) -> float:
        return self.eff_attn_by_kv.get(kv, self.eff_attn)

    def attn_flops_eff(self, kv: str) -> float:
        return self.eff_attn_flops_by_kv.get(kv, self.attn_eff(kv))

    def weight_cost(self, weights: str, path: str, model=None) -> tuple[float | None, str]:
        """(seconds per weight per token on `path` ("gemv" or "gemm"), where it came from): the
        kernel format's own fitted cost (kernel_format: the format on `model`'s rows), its layout's,
        one carried from a card of the same generation ("generation"), its family's (geometric
        mean), or None (derive it)."""
        table = self.gemv_s_per_weight if path == "gemv" else self.gemm_s_per_weight
        w = kernel_format(weights, model)
        if w in table:
            return table[w], "generation" if w in self.carried_formats else "fitted"
        fam = [v for k, v in table.items() if format_family(k) == format_family(w)]
        if fam:
            return float(np.exp(np.mean(np.log(fam)))), "family"
        return None, "derived"

    def bars_for(self, weights: str, model=None) -> tuple[float, float]:
        """(latency, throughput) bar of a point of this weight format: the card's, widened to the format's
        own held-out error where its cost was fitted or carried with one (format_rel_err)."""
        own = self.format_rel_err.get(kernel_format(weights, model), {})
        return max(self.lat_rel_err, own.get("lat", 0.0)), max(self.thr_rel_err, own.get("thr", 0.0))

    def to_dict(self) -> dict:
        # the link's parameters only where they differ from their defaults: calibrations stored and
        # keyed before they existed keep their keys
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if (f.name not in LINK_DEFAULTS or not _same(getattr(self, f.name), LINK_DEFAULTS[f.name]))
            and not (f.name in ("carried_formats", "format_rel_err") and not getattr(self, f.name))
        }

    def parallel_bars(self) -> tuple[float, float, str]:
        """(latency bar, throughput bar, provenance) of a point on several GPUs: the link fit's where
        the card has one, else the one-GPU bar with the provenance saying the link is not fitted."""
        if self.par_lat_rel_err == self.par_lat_rel_err and self.par_thr_rel_err == self.par_thr_rel_err:
            return self.par_lat_rel_err, self.par_thr_rel_err, f"{self.provenance}; {self.link_provenance}"
        # no multi-GPU row of this card fitted its link (H100-PCIe, L4, ...): the link is the uncalibrated
        # default's, and so is the bar where the card's one-GPU bar is narrower; the point says so
        # (atlas.evidence reads "uncalibrated" at its start), its per-GPU costs keep their own provenance
        lat, thr = max(self.lat_rel_err, DEFAULT_BAR), max(self.thr_rel_err, DEFAULT_BAR)
        return (
            lat,
            thr,
            f"uncalibrated link of {self.hardware} (no published multi-GPU row of this card: default link_eff "
            f"{self.link_eff:g}, latency x{self.link_latency_scale:g}; the bar at least the uncalibrated default's "
            f"±{DEFAULT_BAR:.0%}); per-GPU costs: {self.provenance}",
        )

    def point_bars(self, gpus: int, moe: bool, weights: str = "", model=None) -> tuple[float, float, str]:
        """(latency bar, throughput bar, provenance) of a simulated point: a mixture of experts carries
        its card's MoE fit's held-out bar where fitted, a point on several GPUs the link fit's
        (parallel_bars), one GPU the card's own widened to its weight format's (bars_for)."""
        if moe and self.moe_lat_rel_err == self.moe_lat_rel_err and self.moe_thr_rel_err == self.moe_thr_rel_err:
            return self.moe_lat_rel_err, self.moe_thr_rel_err, f"{self.provenance}; {self.moe_provenance}"
        if gpus > 1:
            return self.parallel_bars()
        return (
            (*self.bars_for(weights, model), self.provenance)
            if weights
            else (
                self.lat_rel_err,
                self.thr_rel_err,
                self.provenance,
            )
        )

    @classmethod
    def from_dict(cls, d: dict) -> "CalibParams":
        check_fields(cls, d, "calib")
        return cls(**d)


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and a != a and b != b)


def default_params(hw: HardwareCard, engine: str = "") -> CalibParams:
    """Uncalibrated defaults by hardware kind.

    GPU: typical achieved fractions for mature decode kernels and a Python-scheduled engine
    (about 2 ms per step). CPU: a measured card already reports achieved read bandwidth and
    SGEMM rate, so efficiencies start near 1 and llama.cpp's per-step overhead is small.
    """
    if hw.kind == "cpu" and engine == "vllm":
        # vLLM on a CPU: torch's GEMMs at every batch size (no GEMV path of its own, so no tile), and a
        # Python scheduler plus a process hop per step on the same two cores as the model: tens of ms.
        return CalibParams(
            hardware=hw.name,
            engine=engine,
            eff_bw=0.7,
            eff_flops=0.5,
            eff_attn=0.3,
            overhead_step_s=2e-2,
            overhead_seq_s=1e-3,
            overhead_req_s=0.0,
            step_cv=0.05,
            mem_util=0.8,
            gemm_tile=0,
        )
    if hw.kind == "cpu":
        # llama.cpp repacks weights for tiled GEMM kernels of 4 columns; the tied lm_head (used by
        # the embedding lookup too) is not repacked, so it runs at GEMV speed.
        return CalibParams(
            hardware=hw.name,
            engine=engine or "llamacpp",
            eff_bw=0.7,
            eff_flops=0.6,
            eff_attn=0.5,
            overhead_step_s=1e-3,
            overhead_seq_s=2e-4,
            overhead_req_s=0.0,
            draft_forward_s=5e-4,
            step_cv=0.03,
            mem_util=0.8,
            gemm_tile=4,
            kv_pad=256,
        )
    return CalibParams(hardware=hw.name, engine=engine or "vllm")


def with_error_bars(p: CalibParams, lat_rel_err: float, thr_rel_err: float, provenance: str) -> CalibParams:
    return replace(p, lat_rel_err=float(lat_rel_err), thr_rel_err=float(thr_rel_err), provenance=provenance)
