"""One configuration ("arm") of the optimization stack, shared by measurement and simulation.

A `Knobs` value is everything that changes how a model is served; the same value keys an
anchor in the store, a simulated point, and a row of the atlas.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields
from pareto_atlas.spec.fields import check_fields
from pareto_atlas.spec.fp4 import FP4

WEIGHT_TYPES = (
    "F32",
    "F16",
    "BF16",
    "Q8_0",
    "FP8",
    "Q5_0",
    "Q4_1",
    "Q4_K_M",
    "Q4_0",
    "AWQ4",
    "W4A16",
    "W8A8",
    "NVFP4",
    "NVFP4A16",
    "MXFP4",
    "Q3_K",
    "Q2_K",
    "RANDOM",
)
KV_TYPES = ("f16", "q8_0", "fp8", "q4_0")
EVICTION = ("none", "streaming", "h2o", "snapkv", "pyramidkv")
SPEC = ("none", "ngram", "draft", "eagle")
# whole / unmixed / mixed: TensorRT-LLM's and SGLang's schedulers (simulate.schedulers, kernels.layout)
BATCHING = (
    "static",
    "continuous",
    "chunked",
    "slo",
    "disagg",
    "whole",
    "unmixed",
    # the same three under an overlap scheduler (simulate.kernels.layout)
    "whole+overlap",
    "unmixed+overlap",
    "chunked+overlap",
    # SGLang with enable_mixed_chunk on, without and with its overlap scheduler (simulate.kernels.layout)
    "mixed",
    "mixed+overlap",
)
# every policy with a per-step token budget: all but whole batches (static), one prefill a step
# (continuous) and separate pools (disagg)
BUDGETED = tuple(b for b in BATCHING if b not in ("static", "continuous", "disagg"))

# Bits per weight including block scales (GGUF block layouts; FP8/AWQ as served by vLLM; W4A16: GPTQ-style
# int4 weight-only with group-128 scales, as AWQ; W8A8: int8 weights and activations, per-channel scales). F32 is vLLM's
# float32 on a CPU without native bf16: the GGUF source dequantized, stored and streamed as float32.
# The 4-bit floating-point formats (spec.fp4: layouts and where each runs natively) store E2M1 values
# with a scale per block: NVFP4 an FP8 E4M3 scale per 16 values (4 + 8/16 = 4.5 bits; its one FP32
# scale per tensor is under 1e-6 bit a weight), MXFP4 an E8M0 scale per 32 (4 + 8/32 = 4.25).
BITS_PER_WEIGHT = {
    "F32": 32.0,
    "F16": 16.0,
    "BF16": 16.0,
    "Q8_0": 8.5,
    "FP8": 8.0,
    "Q5_0": 5.5,
    "Q4_1": 5.0,
    "Q4_K_M": 4.85,
    "Q4_0": 4.5,
    "AWQ4": 4.25,
    "W4A16": 4.25,
    "W8A8": 8.0,
    **{name: layout.bits_per_weight for name, layout in FP4.items()},
    "Q3_K": 3.4375,
    "Q2_K": 2.625,
    "RANDOM": 4.5,  # RANDOM is stored as Q4_0
}
BITS_PER_KV = {"f16": 16.0, "q8_0": 8.5, "fp8": 8.0, "q4_0": 4.5}
# Parallelism fields and their defaults (one GPU, one copy): left out of a key where default.
PARALLEL_DEFAULTS = {
    "tp": 1,
    "pp": 1,
    "replicas": 1,
    "prefill_workers": 1,
    "prefill_tp": 0,
    "decode_workers": 1,
    "ep": 1,
    "attn_dp": 1,
}
PARALLEL_FIELDS = tuple(PARALLEL_DEFAULTS)
DISAGG_FIELDS = ("prefill_workers", "prefill_tp", "decode_workers")


@dataclass(frozen=True)
class Knobs:
    """The serving configuration. Defaults are the unoptimized baseline."""

    weights: str = "F16"
    kv: str = "f16"
    kv_keep: float = 1.0  # fraction of KV entries kept by an eviction policy
    eviction: str = "none"
    spec: str = "none"  # speculative decoding method
    spec_k: int = 0  # draft length
    spec_accept: float = 0.0  # acceptance rate per drafted token (measured where anchored)
    batching: str = "continuous"
    slots: int = 1  # max sequences decoded together (llama.cpp --parallel)
    chunk_tokens: int = 0  # prefill token budget for batching="chunked"/"slo"/"whole"/"unmixed" (0 = none)
    sparse_budget: float = 1.0  # fraction of the KV read per decode step by sparse attention
    # Parallelism (speed only: the tokens are the same). One worker is tp x pp GPUs of one node; the
    # whole unit is copied `replicas` times. With batching = "disagg" the unit is prefill_workers
    # workers of prefill_tp GPUs (0: tp) and decode_workers workers of tp x pp GPUs.
    tp: int = 1  # tensor-parallel degree of a worker
    pp: int = 1  # pipeline stages of a worker
    replicas: int = 1  # data-parallel copies of the unit, each taking load / replicas
    prefill_workers: int = 1
    prefill_tp: int = 0
    decode_workers: int = 1
    # Mixture-of-experts layouts (simulate.moe): a (decode) worker's tp x attn_dp GPUs run attention as
    # attn_dp data-parallel groups of tp, and the experts over the same GPUs as ep expert-parallel
    # groups of MoE-TP = tp x attn_dp / ep (TP x attention-DP = MoE-TP x EP).
    ep: int = 1  # expert-parallel degree: the routed experts split over ep GPUs
    attn_dp: int = 1  # attention data-parallel groups: the batch split for attention

    # Prefix caching (speed only: exact reuse yields the same tokens): a request's prefix whose KV is
    # still cached from an earlier request skips its prefill. Off by default, so every key made before
    # the field existed stays the same (left out of a key while off) and a workload whose prompts are
    # unique is simulated as before; the grid carries it on beside off where the workload shares
    # (simulate.space.prefix_variants), which is where engines that turn it on by default (vLLM) stand.
    prefix_cache: bool = False

    def __post_init__(self) -> None:
        for name, allowed in (
            ("weights", WEIGHT_TYPES),
            ("kv", KV_TYPES),
            ("eviction", EVICTION),
            ("spec", SPEC),
            ("batching", BATCHING),
        ):
            value = getattr(self, name)
            if value not in allowed:
                raise ValueError(f"knobs.{name}: {value!r} is not one of {', '.join(allowed)}")
        if not 0.0 < self.kv_keep <= 1.0:
            raise ValueError(f"knobs.kv_keep: {self.kv_keep} must be in (0, 1]")
        if not 0.0 < self.sparse_budget <= 1.0:
            raise ValueError(f"knobs.sparse_budget: {self.sparse_budget} must be in (0, 1]")
        if self.slots < 1:
            raise ValueError(f"knobs.slots: {self.slots} must be >= 1")
        if not 0.0 <= self.spec_accept < 1.0:
            raise ValueError(f"knobs.spec_accept: {self.spec_accept} must be in [0, 1)")
        if not isinstance(self.prefix_cache, bool):
            raise ValueError(f"knobs.prefix_cache: {self.prefix_cache!r} must be true or false")
        for name in PARALLEL_FIELDS:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise ValueError(f"knobs.{name}: {v!r} must be an integer")
        for name in ("tp", "prefill_tp", "ep", "attn_dp"):
            v = getattr(self, name)
            lo = 0 if name == "prefill_tp" else 1
            if v < lo or (v > 0 and v & (v - 1)):
                raise ValueError(
                    f"knobs.{name}: {v} must be a power of two >= 1" + (" (or 0: same as tp)" if lo == 0 else "")
                )
        for name in ("pp", "replicas", "prefill_workers", "decode_workers"):
            if getattr(self, name) < 1:
                raise ValueError(f"knobs.{name}: {getattr(self, name)} must be >= 1")
        if (self.tp * self.attn_dp) % self.ep:
            raise ValueError(
                f"knobs.ep: {self.ep} does not divide tp x attn_dp = {self.tp * self.attn_dp} "
                f"(TP x attention-DP = MoE-TP x EP over one worker's GPUs)"
            )
        if self.batching != "disagg":
            for name in DISAGG_FIELDS:
                if getattr(self, name) != PARALLEL_DEFAULTS[name]:
                    raise ValueError(
                        f"knobs.{name}: {getattr(self, name)} is only meaningful with batching = \"disagg\" "
                        f"(batching is {self.batching!r})"
                    )

    @property
    def prefill_tp_resolved(self) -> int:
        """GPUs of one prefill worker (disagg): prefill_tp, or tp where it is 0."""
        return self.prefill_tp or self.tp

    @property
    def moe_tp(self) -> int:
        """Tensor-parallel degree of each expert: tp x attn_dp / ep."""
        return self.tp * self.attn_dp // self.ep

    def gpus_per_worker(self) -> int:
        """GPUs of one (decode, for disagg) worker: tp x attn_dp x pp, all on one node."""
        return self.tp * self.attn_dp * self.pp

    def gpus(self) -> int:
        """GPUs the configuration occupies: every replica, every stage and both pools of a disaggregated one."""
        if self.batching == "disagg":
            return self.replicas * (
                self.prefill_workers * self.prefill_tp_resolved + self.decode_workers * self.gpus_per_worker()
            )
        return self.replicas * self.gpus_per_worker()

    def is_default_parallelism(self) -> bool:
        return all(getattr(self, f) == d for f, d in PARALLEL_DEFAULTS.items())

    def optimizations(self) -> tuple[str, ...]:
        """The optimization families this configuration turns on, relative to 16-bit serving."""
        on = []
        if BITS_PER_WEIGHT[self.weights] < 16.0:
            on.append("weight-quant")
        if self.kv != "f16":
            on.append("kv-quant")
        if self.eviction != "none" and self.kv_keep < 1.0:
            on.append("kv-evict")
        if self.spec != "none":
            on.append("speculation")
        if self.slots > 1 or self.batching in BUDGETED:
            on.append("batching")
        if self.batching == "disagg":
            on.append("disaggregation")
        if self.sparse_budget < 1.0:
            on.append("sparse-attn")
        if not self.is_default_parallelism():
            on.append("parallelism")
        if self.prefix_cache:
            on.append("prefix-cache")
        return tuple(on)

    def quality_key(self) -> str:
        """Knobs that can change the tokens produced; speed-only knobs do not enter.

        Greedy speculative decoding, batching and prefix caching (exact reuse of a prefix's KV) are
        exact in principle, so arms that differ only in those share one quality measurement (recorded
        as inherited, never as measured). For caching, vLLM's greedy tokens were found identical cold
        and warm here and llama.cpp's not always (docs/structures.md, "Exact reuse").
        """
        q = {
            "weights": self.weights,
            "kv": self.kv,
            "kv_keep": self.kv_keep,
            "eviction": self.eviction,
            "sparse_budget": self.sparse_budget,
        }
        return json.dumps(q, sort_keys=True)

    def to_dict(self) -> dict:
        """The fields that key a configuration: parallelism fields only where they differ from their
        default, so every key made before they existed (anchors, points, caches) stays the same."""
        d = asdict(self)
        for name, default in PARALLEL_DEFAULTS.items():
            if d[name] == default:
                del d[name]
        if not d["prefix_cache"]:
            del d["prefix_cache"]
        return d

    def as_row(self) -> dict:
        """Every field, defaults included: the knob columns of a points table."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Knobs":
        check_fields(cls, d, "knobs")
        return cls(**d)

    @classmethod
    def from_row(cls, row) -> "Knobs":
        """The knobs of one points-table row (a pandas Series or mapping): the Knobs columns that are
        present and not missing, numpy scalars turned into Python ones."""
        out = {}
        for f in fields(cls):
            if f.name in row:
                v = row[f.name]
                v = v.item() if hasattr(v, "item") else v
                if v is not None and v == v:  # NaN is missing
                    # an integer knob read back from a float column (a table where some rows lack it)
                    out[f.name] = int(v) if f.type == "int" and isinstance(v, float) and v.is_integer() else v
        return cls.from_dict(out)

    def key(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:16]

    def label(self) -> str:
        parts = [self.weights]
        if self.kv != "f16":
            parts.append(f"kv{self.kv}")
        if self.eviction != "none":
            parts.append(f"{self.eviction}@{self.kv_keep:g}")
        if self.spec != "none":
            parts.append(f"{self.spec}{self.spec_k or ''}")
        if self.sparse_budget < 1.0:
            parts.append(f"sparse@{self.sparse_budget:g}")
        if self.batching != "continuous":
            parts.append(self.batching)
        parts.append(f"x{self.slots}")
        parts.extend(self.parallel_label_parts())
        if self.prefix_cache:
            parts.append("pcache")
        return "+".join(parts)

    def layout_words(self, hardware: str = "") -> str:
        """The deployment in words, for winners: "TP4 x 2 replicas, 8 x H100-SXM", "1P(TP2) + 3D(TP4), 14 x H200"."""
        if self.batching == "disagg":
            dec = f"TP{self.tp}" + (f" PP{self.pp}" if self.pp > 1 else "")
            unit = f"{self.prefill_workers}P(TP{self.prefill_tp_resolved}) + {self.decode_workers}D({dec})"
        else:
            unit = " ".join(
                p for p in (f"TP{self.tp}" if self.tp > 1 else "", f"PP{self.pp}" if self.pp > 1 else "") if p
            )
        moe = " ".join(
            p
            for p in (f"attention-DP{self.attn_dp}" if self.attn_dp > 1 else "", f"EP{self.ep}" if self.ep > 1 else "")
            if p
        )
        unit = " ".join(p for p in (unit, moe) if p)
        parts = [p for p in (unit, f"{self.replicas} replicas" if self.replicas > 1 else "") if p]
        words = " \u00d7 ".join(parts) or "one GPU"
        n = self.gpus()
        return f"{words}, {n} \u00d7 {hardware}" if hardware else words

    def parallel_label_parts(self) -> list[str]:
        """`tp4`, `pp2`, `x2rep`, `1P(tp2)3D(tp4)`: only what differs from one GPU per worker."""
        out = []
        if self.batching == "disagg":
            if (self.tp, self.pp, self.prefill_tp, self.prefill_workers, self.decode_workers) != (1, 1, 0, 1, 1):
                dec = f"tp{self.tp}" + (f"pp{self.pp}" if self.pp > 1 else "")
                out.append(f"{self.prefill_workers}P(tp{self.prefill_tp_resolved}){self.decode_workers}D({dec})")
        else:
            if self.tp > 1:
                out.append(f"tp{self.tp}")
            if self.pp > 1:
                out.append(f"pp{self.pp}")
        if self.attn_dp > 1:
            out.append(f"adp{self.attn_dp}")
        if self.ep > 1:
            out.append(f"ep{self.ep}")
        if self.replicas > 1:
            out.append(f"x{self.replicas}rep")
        return out
