"""Model and hardware cards: the architecture and machine numbers the simulator derives from.

One source of truth per fact: a card lives here (shipped) or is read from a GGUF file / measured
on this machine at run time; nothing else in the code types these numbers.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from functools import cached_property
from importlib import resources


@dataclass(frozen=True)
class ModelCard:
    name: str
    n_layers: int
    hidden: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied_embeddings: bool = False
    source: str = "shipped"       # "shipped" or "gguf:<path>"
    # Bits per weight of the files actually served, by weight format, where measured: llama.cpp's
    # per-tensor mixes and its fallbacks for rows that blocks do not divide make a file's bits
    # differ from the format's nominal ones (a "Q2_K" of a 896-wide model is mostly Q4_0).
    file_bits: tuple[tuple[str, float], ...] = ()

    def bits_per_weight(self, weights: str) -> float:
        from pareto_atlas.spec.knobs import BITS_PER_WEIGHT

        return dict(self.file_bits).get(weights, BITS_PER_WEIGHT[weights])

    @cached_property
    def params_per_layer(self) -> int:
        attn = self.hidden * (self.n_heads * self.head_dim) * 2 + self.hidden * (self.n_kv_heads * self.head_dim) * 2
        mlp = 3 * self.hidden * self.intermediate
        return attn + mlp

    @cached_property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    @cached_property
    def n_params(self) -> int:
        """Total parameters (embedding counted once when tied)."""
        out = 0 if self.tied_embeddings else self.embedding_params
        return self.n_layers * self.params_per_layer + self.embedding_params + out

    @cached_property
    def matmul_params(self) -> int:
        """Parameters read by the matrix multiplies of one decode step (embedding lookup excluded)."""
        return self.n_layers * self.params_per_layer + self.embedding_params  # lm_head reads vocab x hidden

    def kv_bytes_per_token(self, bits: float) -> float:
        """K and V for one token across all layers."""
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim * bits / 8


@dataclass(frozen=True)
class HardwareCard:
    name: str
    kind: str                      # "gpu" or "cpu"
    mem_bw_gbs: float              # peak memory bandwidth, GB/s
    tflops: dict = field(default_factory=dict)   # dense peak TFLOP/s by compute dtype: fp32, fp16, fp8, int8
    mem_gib: float = 0.0
    price_per_hour: float = 0.0
    price_date: str = ""
    price_source: str = ""
    link_gbs: float = 0.0          # bandwidth between two devices (prefill-decode KV transfer)
    source: str = "spec-sheet"     # "spec-sheet" or "measured:<date>"

    def peak_flops(self, dtype: str) -> float:
        """FLOP/s for a compute dtype, falling back to the widest dtype the card lists."""
        for d in (dtype, "fp16", "fp32"):
            if d in self.tflops:
                return self.tflops[d] * 1e12
        raise ValueError(f"hardware {self.name}: no FLOP/s figure for {dtype!r}; card lists {sorted(self.tflops)}")

    def with_price(self, price_per_hour: float, date: str, source: str = "user override") -> "HardwareCard":
        if price_per_hour <= 0:
            raise ValueError(f"price for {self.name}: {price_per_hour} must be > 0 $/hour")
        return replace(self, price_per_hour=price_per_hour, price_date=date, price_source=source)


def _load_toml(name: str) -> dict:
    return tomllib.loads(resources.files("pareto_atlas.spec").joinpath(name).read_text())


def shipped_hardware() -> dict[str, HardwareCard]:
    raw = _load_toml("hardware.toml")
    return {name: HardwareCard(name=name, **vals) for name, vals in raw["hardware"].items()}


def shipped_models() -> dict[str, ModelCard]:
    raw = _load_toml("models.toml")
    return {name: ModelCard(name=name, **vals) for name, vals in raw["models"].items()}


def model_card_from_gguf(path: str, name: str | None = None) -> ModelCard:
    """Read the architecture numbers from a GGUF file's metadata."""
    from gguf import GGUFReader

    reader = GGUFReader(path)

    def val(key: str):
        f = reader.fields.get(key)
        if f is None:
            return None
        return f.contents()

    arch = val("general.architecture")
    if arch is None:
        raise ValueError(f"{path}: not a GGUF model (no general.architecture)")
    n_heads = int(val(f"{arch}.attention.head_count"))
    hidden = int(val(f"{arch}.embedding_length"))
    n_kv = val(f"{arch}.attention.head_count_kv")
    head_dim = val(f"{arch}.attention.key_length") or hidden // n_heads
    vocab = len(val("tokenizer.ggml.tokens") or []) or int(val(f"{arch}.vocab_size") or 0)
    names = {t.name for t in reader.tensors}
    return ModelCard(
        name=name or str(val("general.name") or arch),
        n_layers=int(val(f"{arch}.block_count")),
        hidden=hidden,
        n_heads=n_heads,
        n_kv_heads=int(n_kv if n_kv is not None else n_heads),
        head_dim=int(head_dim),
        intermediate=int(val(f"{arch}.feed_forward_length")),
        vocab=int(vocab),
        tied_embeddings="output.weight" not in names,
        source=f"gguf:{path}",
    )
