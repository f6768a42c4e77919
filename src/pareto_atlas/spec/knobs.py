"""One configuration ("arm") of the optimization stack, shared by measurement and simulation.

A `Knobs` value is everything that changes how a model is served; the same value keys an
anchor in the store, a simulated point, and a row of the atlas.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields
from pareto_atlas.spec.fields import check_fields

WEIGHT_TYPES = ("F32", "F16", "BF16", "Q8_0", "FP8", "Q5_0", "Q4_1", "Q4_K_M", "Q4_0", "AWQ4", "W4A16", "W8A8", "Q3_K", "Q2_K", "RANDOM")
KV_TYPES = ("f16", "q8_0", "fp8", "q4_0")
EVICTION = ("none", "streaming", "h2o", "snapkv", "pyramidkv")
SPEC = ("none", "ngram", "draft", "eagle")
BATCHING = ("static", "continuous", "chunked", "slo", "disagg")

# Bits per weight including block scales (GGUF block layouts; FP8/AWQ as served by vLLM; W4A16: GPTQ-style
# int4 weight-only with group-128 scales, as AWQ; W8A8: int8 weights and activations, per-channel scales). F32 is vLLM's
# float32 on a CPU without native bf16: the GGUF source dequantized, stored and streamed as float32.
BITS_PER_WEIGHT = {
    "F32": 32.0, "F16": 16.0, "BF16": 16.0, "Q8_0": 8.5, "FP8": 8.0, "Q5_0": 5.5, "Q4_1": 5.0, "Q4_K_M": 4.85,
    "Q4_0": 4.5, "AWQ4": 4.25, "W4A16": 4.25, "W8A8": 8.0, "Q3_K": 3.4375, "Q2_K": 2.625, "RANDOM": 4.5,  # RANDOM is stored as Q4_0
}
BITS_PER_KV = {"f16": 16.0, "q8_0": 8.5, "fp8": 8.0, "q4_0": 4.5}


@dataclass(frozen=True)
class Knobs:
    """The serving configuration. Defaults are the unoptimized baseline."""

    weights: str = "F16"
    kv: str = "f16"
    kv_keep: float = 1.0          # fraction of KV entries kept by an eviction policy
    eviction: str = "none"
    spec: str = "none"            # speculative decoding method
    spec_k: int = 0               # draft length
    spec_accept: float = 0.0      # acceptance rate per drafted token (measured where anchored)
    batching: str = "continuous"
    slots: int = 1                # max sequences decoded together (llama.cpp --parallel)
    chunk_tokens: int = 0         # prefill chunk budget for batching="chunked"/"slo" (0 = none)
    sparse_budget: float = 1.0    # fraction of the KV read per decode step by sparse attention

    def __post_init__(self) -> None:
        for name, allowed in (("weights", WEIGHT_TYPES), ("kv", KV_TYPES), ("eviction", EVICTION),
                              ("spec", SPEC), ("batching", BATCHING)):
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
        if self.slots > 1 or self.batching in ("chunked", "slo"):
            on.append("batching")
        if self.batching == "disagg":
            on.append("disaggregation")
        if self.sparse_budget < 1.0:
            on.append("sparse-attn")
        return tuple(on)

    def quality_key(self) -> str:
        """Knobs that can change the tokens produced; speed-only knobs do not enter.

        Greedy speculative decoding and batching are exact in principle, so arms that differ
        only in those share one quality measurement (recorded as inherited, never as measured).
        """
        q = {"weights": self.weights, "kv": self.kv, "kv_keep": self.kv_keep, "eviction": self.eviction,
             "sparse_budget": self.sparse_budget}
        return json.dumps(q, sort_keys=True)

    def to_dict(self) -> dict:
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
                if v is not None and v == v:          # NaN is missing
                    out[f.name] = v
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
        return "+".join(parts)
