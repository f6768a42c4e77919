"""Model and hardware cards: the architecture and machine numbers the simulator derives from.

One source of truth per fact: a card lives here (shipped) or is read from a GGUF file / measured
on this machine at run time; nothing else in the code types these numbers.
"""

from __future__ import annotations

import copy
import tomllib
from dataclasses import dataclass
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path

from pareto_atlas.spec.hf_config import _HF_BOUNDS, CardError, hf_card_fields
from pareto_atlas.spec.hardware_card import HardwareCard
from pareto_atlas.spec.hardware_card import LINKS as LINKS  # re-exported: importable from here as before


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
    source: str = "shipped"  # "shipped", "gguf:<path>" or "config:<path>"
    # Models of one family (same pre-training, same tokenizer) carry quality evidence to each other
    # (store.quality: "carried"); "" where unknown: nothing is carried to or from it.
    family: str = ""
    # Bits per weight of the files actually served, by weight format, where measured: llama.cpp's
    # per-tensor mixes and its fallbacks for rows that blocks do not divide make a file's bits
    # differ from the format's nominal ones (a "Q2_K" of a 896-wide model is mostly Q4_0).
    file_bits: tuple[tuple[str, float], ...] = ()
    # Mixture of experts (all 0: a dense model, every number below as before). Of the n_layers,
    # dense_layers have a dense MLP of `intermediate`; the others route each token to
    # experts_per_token of n_experts experts (SwiGLU MLPs of expert_intermediate) and run
    # n_shared_experts shared ones (of shared_intermediate; 0: expert_intermediate) for every token.
    n_experts: int = 0
    experts_per_token: int = 0
    expert_intermediate: int = 0
    n_shared_experts: int = 0
    shared_intermediate: int = 0
    dense_layers: int = 0
    # Multi-head latent attention (DeepSeek's MLA; all 0: none). The cache holds one latent of
    # kv_lora_rank plus a shared rotary key of qk_rope_head_dim per token and layer, for all heads;
    # queries go through a q_lora_rank bottleneck (0: a full projection).
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    q_lora_rank: int = 0
    # Sliding-window attention (0, 0: none): sliding_layers of the n_layers attend over the last
    # sliding_window tokens only, so their KV stops growing there (gpt-oss: every other layer, 128
    # tokens; config.json's layer_types and sliding_window).
    sliding_window: int = 0
    sliding_layers: int = 0
    # The checkpoint's own quantized format ("": none) and the parts it leaves at 16 bits in that
    # format (config.json's quantization_config: quant_method, modules_to_not_convert), of
    # QUANT_PARTS. gpt-oss ships MXFP4 experts and BF16 attention, router, embedding and lm_head:
    # served in its own format, those parts are read and stored at 16 bits, not at MXFP4's 4.25.
    native_format: str = ""
    native_16bit: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.native_16bit, list):  # from TOML
            object.__setattr__(self, "native_16bit", tuple(self.native_16bit))
        bad = _window_error(self) or _native_error(self)
        if bad:
            raise CardError(f"model card {self.name}: {bad}")
        if (
            self.n_experts
            or self.experts_per_token
            or self.expert_intermediate
            or self.n_shared_experts
            or self.shared_intermediate
            or self.dense_layers
        ):
            bad = moe_fields_error(self)
            if bad:
                raise CardError(f"model card {self.name}: {bad}")
        if self.kv_lora_rank or self.qk_rope_head_dim or self.qk_nope_head_dim or self.v_head_dim or self.q_lora_rank:
            if min(self.kv_lora_rank, self.qk_rope_head_dim, self.qk_nope_head_dim, self.v_head_dim) < 1:
                raise CardError(
                    f"model card {self.name}: latent attention needs kv_lora_rank, qk_rope_head_dim, "
                    f"qk_nope_head_dim and v_head_dim all >= 1 ({self.kv_lora_rank}, "
                    f"{self.qk_rope_head_dim}, {self.qk_nope_head_dim}, {self.v_head_dim} given)"
                )

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    def bits_per_weight(self, weights: str) -> float:
        from pareto_atlas.spec.knobs import BITS_PER_WEIGHT

        return dict(self.file_bits).get(weights, BITS_PER_WEIGHT[weights])

    @cached_property
    def params_per_layer(self) -> int:
        """A dense layer's parameters: attention and the dense MLP (an MoE layer's are moe_layer_params)."""
        return self.attn_params_per_layer + 3 * self.hidden * self.intermediate

    @cached_property
    def attn_params_per_layer(self) -> int:
        if self.is_mla:
            h, rope = self.n_heads, self.qk_rope_head_dim
            q_out = h * (self.qk_nope_head_dim + rope)
            q = self.hidden * self.q_lora_rank + self.q_lora_rank * q_out if self.q_lora_rank else self.hidden * q_out
            kv = self.hidden * (self.kv_lora_rank + rope) + self.kv_lora_rank * h * (
                self.qk_nope_head_dim + self.v_head_dim
            )
            return q + kv + h * self.v_head_dim * self.hidden
        return self.hidden * (self.n_heads * self.head_dim) * 2 + self.hidden * (self.n_kv_heads * self.head_dim) * 2

    @cached_property
    def expert_params(self) -> int:
        """One routed expert (gate, up and down projections)."""
        return 3 * self.hidden * self.expert_intermediate

    @cached_property
    def moe_always_params(self) -> int:
        """Weights of an MoE layer every token runs: attention, the router and the shared experts."""
        shared = 3 * self.hidden * (self.shared_intermediate or self.expert_intermediate) * self.n_shared_experts
        return self.attn_params_per_layer + self.hidden * self.n_experts + shared

    @property
    def moe_layers(self) -> int:
        return self.n_layers - self.dense_layers if self.is_moe else 0

    @cached_property
    def routed_params(self) -> int:
        """All routed experts' weights over all MoE layers: what a step reads in part (the experts its
        tokens touch), what memory holds whole."""
        return self.moe_layers * self.n_experts * self.expert_params

    @cached_property
    def active_params(self) -> int:
        """Matmul parameters one token runs through (embedding lookup excluded, lm_head included): a
        dense model's matmul_params; an MoE's always-run weights plus experts_per_token experts a layer."""
        if not self.is_moe:
            return self.matmul_params
        return self.matmul_params - self.routed_params + self.moe_layers * self.experts_per_token * self.expert_params

    @cached_property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    @cached_property
    def n_params(self) -> int:
        """Total parameters (embedding counted once when tied)."""
        out = 0 if self.tied_embeddings else self.embedding_params
        return self._layer_params + self.embedding_params + out

    @cached_property
    def matmul_params(self) -> int:
        """Parameters the matrix multiplies hold (embedding lookup excluded): what one decode step of a
        dense model reads; an MoE step reads only the experts its batch touches (simulate.moe)."""
        return self._layer_params + self.embedding_params  # lm_head reads vocab x hidden

    @cached_property
    def _layer_params(self) -> int:
        if not self.is_moe:
            return self.n_layers * self.params_per_layer
        return self.dense_layers * self.params_per_layer + self.moe_layers * self.moe_always_params + self.routed_params

    def kv_bytes_per_token(self, bits: float) -> float:
        """K and V for one token across all layers; under latent attention, its latent and rotary key."""
        if self.is_mla:
            return self.n_layers * (self.kv_lora_rank + self.qk_rope_head_dim) * bits / 8
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim * bits / 8

    @property
    def full_attention_share(self) -> float:
        """The share of the layers whose KV grows with the context (1 without sliding-window layers)."""
        return (self.n_layers - self.sliding_layers) / self.n_layers

    def kv_bytes_per_seq(self, bits: float, tokens: float) -> float:
        """KV of one sequence of `tokens` tokens: the full-attention layers' for every token, the
        sliding-window layers' for the last sliding_window tokens at most."""
        per_layer = self.kv_bytes_per_token(bits) / self.n_layers
        full = self.n_layers - self.sliding_layers
        return per_layer * (full * tokens + self.sliding_layers * min(float(tokens), float(self.sliding_window)))

    def unquantized_params(self, weights: str, matmul_only: bool = True) -> int:
        """Weights kept at 16 bits when served in `weights`: the parts native_16bit names where
        `weights` is the checkpoint's own format, else none. matmul_only: those a step reads (the
        embedding lookup is stored, not streamed)."""
        if not self.native_format or weights != self.native_format:
            return 0
        parts = {
            "attention": self.attn_params_per_layer * self.n_layers,
            "router": self.hidden * self.n_experts * self.moe_layers,
            "lm_head": self.vocab * self.hidden,
            "embedding": 0 if matmul_only or self.tied_embeddings else self.embedding_params,
        }
        return sum(parts[p] for p in self.native_16bit)

    def weight_bytes(self, weights: str, matmul_only: bool = True) -> float:
        """Bytes of weights one step streams (matmul_only) or the model stores, in `weights`' bits
        (scales included) with the parts the checkpoint keeps at 16 bits at 16."""
        n = self.matmul_params if matmul_only else self.n_params
        bits = self.bits_per_weight(weights)
        return (n * bits + self.unquantized_params(weights, matmul_only) * max(16.0 - bits, 0.0)) / 8


# The parts of a model a checkpoint's quantization may leave at 16 bits (ModelCard.native_16bit).
QUANT_PARTS = ("attention", "router", "embedding", "lm_head")


def _window_error(card: ModelCard) -> str:
    """'' where the sliding-window fields agree, else the first disagreement, naming the field."""
    w, n = card.sliding_window, card.sliding_layers
    for f, v in (("sliding_window", w), ("sliding_layers", n)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            return f"{f} = {v!r} must be an integer >= 0"
    if (w > 0) != (n > 0):
        return f"sliding_window = {w} and sliding_layers = {n}: both 0 (none) or both >= 1"
    if n >= card.n_layers:
        return f"sliding_layers = {n} must be < n_layers ({card.n_layers}): one layer at least attends in full"
    if n and card.is_mla:
        return "sliding_layers with latent attention: not modelled"
    return ""


def _native_error(card: ModelCard) -> str:
    from pareto_atlas.spec.knobs import BITS_PER_WEIGHT

    if card.native_format and card.native_format not in BITS_PER_WEIGHT:
        return f"native_format = {card.native_format!r}: not a weight format ({', '.join(BITS_PER_WEIGHT)})"
    bad = [p for p in card.native_16bit if p not in QUANT_PARTS]
    if bad:
        return f"native_16bit: {bad[0]!r} is not a part ({', '.join(QUANT_PARTS)})"
    if card.native_16bit and not card.native_format:
        return "native_16bit without native_format (the format whose checkpoint keeps them at 16 bits)"
    return ""


def moe_fields_error(card: ModelCard) -> str:
    """ "" where a card's expert fields agree, else the first disagreement, naming the field."""
    for f in (
        "n_experts",
        "experts_per_token",
        "expert_intermediate",
        "n_shared_experts",
        "shared_intermediate",
        "dense_layers",
    ):
        v = getattr(card, f)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            return f"{f} = {v!r} must be an integer >= 0"
    if card.n_experts < 2:
        return f"n_experts = {card.n_experts}: an MoE card needs >= 2 experts (all expert fields 0: dense)"
    if not 1 <= card.experts_per_token <= card.n_experts:
        return f"experts_per_token = {card.experts_per_token} must be in 1..n_experts ({card.n_experts})"
    if card.expert_intermediate < 1:
        return "expert_intermediate: an MoE card needs the experts' MLP width (>= 1)"
    if card.shared_intermediate and not card.n_shared_experts:
        return f"shared_intermediate = {card.shared_intermediate} without n_shared_experts"
    if card.dense_layers >= card.n_layers:
        return f"dense_layers = {card.dense_layers} must be < n_layers ({card.n_layers}): an MoE needs an MoE layer"
    return ""


@lru_cache(maxsize=None)
def _parsed_toml(name: str) -> dict:
    return tomllib.loads(resources.files("pareto_atlas.spec").joinpath(name).read_text())


def _load_toml(name: str) -> dict:
    # parsed once per process (the simulate stage asks thousands of times); each caller gets its own copy
    return copy.deepcopy(_parsed_toml(name))


def shipped_hardware() -> dict[str, HardwareCard]:
    raw = _load_toml("hardware.toml")
    return {name: HardwareCard(name=name, **vals) for name, vals in raw["hardware"].items()}


def shipped_models() -> dict[str, ModelCard]:
    raw = _load_toml("models.toml")
    return {name: ModelCard(name=name, **vals) for name, vals in raw["models"].items()}


def same_architecture_cards(card: ModelCard) -> list[str]:
    """The shipped cards of the same architecture as `card` (layers, widths, heads, head size): an
    instruct model and its base under other names, whose published rows and fits stand for it."""
    shape = lambda c: (
        c.n_layers,
        c.hidden,
        c.n_heads,
        c.n_kv_heads,
        c.head_dim,
        c.intermediate,  # noqa: E731
        c.n_experts,
        c.experts_per_token,
        c.expert_intermediate,
        c.kv_lora_rank,
    )
    return [n for n, c in shipped_models().items() if shape(c) == shape(card)]


def model_card_from_hf_config(path: str | Path, name: str | None = None, family: str = "") -> ModelCard:
    """A card from a Hugging Face `config.json` (or a directory holding one); spec.hf_config reads the
    fields (multimodal configs nest the language model under `text_config`: that part is read)."""
    fields, label, p = hf_card_fields(path)
    return ModelCard(name=name or label, source=f"config:{p}", family=family, **fields)


def resolve_model_card(ref: str, base: Path | None = None, name: str | None = None, family: str = "") -> ModelCard:
    """A card named by a study: a shipped card's name, a Hugging Face `config.json` (or a directory
    holding one), or a GGUF file (its header), a relative path read from `base`."""
    from dataclasses import replace

    cards = shipped_models()
    if ref in cards:
        card = cards[ref]
        return replace(card, name=name or card.name, family=family or card.family)
    p = Path(ref)
    if not p.is_absolute() and base is not None:
        p = base / p
    if p.suffix == ".gguf":
        if not p.is_file():
            raise CardError(f"model card {ref!r}: no such GGUF file")
        try:
            card = model_card_from_gguf(str(p), name)
        except CardError:
            raise
        except Exception as e:  # a damaged header: numpy/struct errors from the reader
            raise CardError(f"model card {ref!r}: not a readable GGUF header ({type(e).__name__})") from None
        return replace(card, family=family)
    if p.suffix == ".json" or p.is_dir():
        return model_card_from_hf_config(p, name, family)
    raise CardError(
        f"model card {ref!r}: unknown; give a shipped card ({', '.join(cards)}), a config.json path or a .gguf path"
    )


def inline_model_card(fields: dict, name: str = "inline") -> ModelCard:
    """A card from a study's inline fields ([model.card] n_layers = ..., hidden = ..., ...)."""
    from dataclasses import fields as dc_fields

    allowed = {f.name for f in dc_fields(ModelCard)} - {"name", "source", "file_bits"}
    bad = sorted(set(fields) - allowed)
    if bad:
        raise CardError(f"model card: {bad[0]!r} is not a card field; allowed: {', '.join(sorted(allowed))}")
    need = sorted({"n_layers", "hidden", "n_heads", "n_kv_heads", "head_dim", "intermediate", "vocab"} - set(fields))
    if need:
        raise CardError(f"model card: inline fields lack {', '.join(need)}")
    for k, v in fields.items():
        if k in _HF_BOUNDS and (
            isinstance(v, bool) or not isinstance(v, int) or not _HF_BOUNDS[k][0] <= v <= _HF_BOUNDS[k][1]
        ):
            raise CardError(f"model card: {k} = {v!r} must be an integer in {_HF_BOUNDS[k][0]}..{_HF_BOUNDS[k][1]}")
    return ModelCard(name=name, source="inline", **fields)


def model_card_from_gguf(path: str, name: str | None = None) -> ModelCard:
    """Read the architecture numbers from a GGUF file's metadata."""
    from pareto_atlas.spec.gguf_header import read_header

    header = read_header(path)  # the metadata without gguf-py's numpy view of the vocabulary
    val = header.metadata.get  # an array field's value is its length

    arch = val("general.architecture")
    if arch is None:
        raise ValueError(f"{path}: not a GGUF model (no general.architecture)")
    n_heads = int(val(f"{arch}.attention.head_count"))
    hidden = int(val(f"{arch}.embedding_length"))
    n_kv = val(f"{arch}.attention.head_count_kv")
    head_dim = val(f"{arch}.attention.key_length") or hidden // n_heads
    vocab = int(val("tokenizer.ggml.tokens") or 0) or int(val(f"{arch}.vocab_size") or 0)
    names = {t.name for t in header.tensors}
    extra = _gguf_moe_fields(val, arch, names)
    ffn = extra.pop("_dense_ffn", None) or val(f"{arch}.feed_forward_length")
    if extra.get("kv_lora_rank"):
        head_dim = extra["qk_nope_head_dim"] + extra["qk_rope_head_dim"]
    return ModelCard(
        **extra,
        name=name or str(val("general.name") or arch),
        n_layers=int(val(f"{arch}.block_count")),
        hidden=hidden,
        n_heads=n_heads,
        n_kv_heads=int(n_kv if n_kv is not None else n_heads),
        head_dim=int(head_dim),
        intermediate=int(ffn),
        vocab=int(vocab),
        tied_embeddings="output.weight" not in names,
        source=f"gguf:{path}",
    )


def _gguf_moe_fields(val, arch: str, names: set[str]) -> dict:
    """llama.cpp's expert and latent-attention keys (qwen3moe, qwen2moe, mixtral as "llama", olmoe,
    deepseek2, gpt-oss): the card's MoE fields, {} for a dense file. `_dense_ffn`: the dense layers'
    MLP width where the file's feed_forward_length names it and the experts have their own."""
    n = int(val(f"{arch}.expert_count") or 0)
    out: dict = {}
    if n:
        ffn = val(f"{arch}.feed_forward_length")
        expert_w = val(f"{arch}.expert_feed_forward_length") or ffn
        out = {
            "n_experts": n,
            "experts_per_token": int(val(f"{arch}.expert_used_count") or 0),
            "expert_intermediate": int(expert_w),
        }
        shared = int(val(f"{arch}.expert_shared_count") or 0)
        shared_w = int(val(f"{arch}.expert_shared_feed_forward_length") or 0)
        if shared or shared_w:
            out.update(n_shared_experts=shared or 1, shared_intermediate=0 if shared_w == expert_w else shared_w)
        # dense layers: deepseek2's leading ones, else any layer whose MLP is not routed
        lead = val(f"{arch}.leading_dense_block_count")
        blocks = int(val(f"{arch}.block_count"))
        routed = {i for i in range(blocks) if f"blk.{i}.ffn_gate_inp.weight" in names}
        dense = int(lead) if lead is not None else (blocks - len(routed) if routed else 0)
        out["dense_layers"] = dense
        if dense and ffn:
            out["_dense_ffn"] = int(ffn)
    rank = val(f"{arch}.attention.kv_lora_rank")
    if rank:
        rope = int(val(f"{arch}.rope.dimension_count") or 0)
        key = int(val(f"{arch}.attention.key_length") or 0)
        out.update(
            kv_lora_rank=int(rank),
            qk_rope_head_dim=rope,
            qk_nope_head_dim=key - rope,
            v_head_dim=int(val(f"{arch}.attention.value_length") or 0),
            q_lora_rank=int(val(f"{arch}.attention.q_lora_rank") or 0),
        )
    return out
