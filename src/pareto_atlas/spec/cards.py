"""Model and hardware cards: the architecture and machine numbers the simulator derives from.

One source of truth per fact: a card lives here (shipped) or is read from a GGUF file / measured
on this machine at run time; nothing else in the code types these numbers.
"""

from __future__ import annotations

import copy
import tomllib
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path


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
    source: str = "shipped"       # "shipped", "gguf:<path>" or "config:<path>"
    # Models of one family (same pre-training, same tokenizer) carry quality evidence to each other
    # (store.quality: "carried"); "" where unknown: nothing is carried to or from it.
    family: str = ""
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


LINKS = ("nvlink", "pcie", "xgmi", "none")


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
    link_gbs: float = 0.0          # bandwidth between two devices of a node, GB/s per direction
    source: str = "spec-sheet"     # "spec-sheet" or "measured:<date>"
    # The node: how many devices one holds, what joins them, and the latency of one hop over it (a
    # tensor-parallel worker lives inside one node; replicas and disaggregated pools may span nodes).
    gpus_per_node: int = 1
    link: str = "none"             # "nvlink", "pcie", "xgmi" or "none"
    link_latency_us: float = 0.0   # one hop of a collective over the link, microseconds

    def __post_init__(self) -> None:
        if self.link not in LINKS:
            raise ValueError(f"hardware {self.name}.link: {self.link!r} is not one of {', '.join(LINKS)}")
        if isinstance(self.gpus_per_node, bool) or not isinstance(self.gpus_per_node, int) or self.gpus_per_node < 1:
            raise ValueError(f"hardware {self.name}.gpus_per_node: {self.gpus_per_node!r} must be an integer >= 1")
        if self.kind == "cpu" and self.gpus_per_node != 1:
            raise ValueError(f"hardware {self.name}.gpus_per_node: a CPU card is one device ({self.gpus_per_node} given)")
        if self.link_gbs < 0 or self.link_latency_us < 0:
            raise ValueError(f"hardware {self.name}.link_gbs / link_latency_us: must be >= 0")
        if self.gpus_per_node > 1 and (self.link == "none" or self.link_gbs <= 0):
            raise ValueError(f"hardware {self.name}.link: a node of {self.gpus_per_node} devices needs a link "
                             f"and link_gbs > 0")

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
    shape = lambda c: (c.n_layers, c.hidden, c.n_heads, c.n_kv_heads, c.head_dim, c.intermediate)  # noqa: E731
    return [n for n, c in shipped_models().items() if shape(c) == shape(card)]


class CardError(ValueError):
    """A model card cannot be read: a missing or malformed config.json / GGUF, or an unknown name."""


# Hugging Face config.json keys per card field, first found wins (Llama, Qwen2, Mistral, Gemma, Phi
# and GPT-NeoX style names).
_HF_KEYS = {
    "n_layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "hidden": ("hidden_size", "n_embd", "d_model"),
    "n_heads": ("num_attention_heads", "n_head"),
    "intermediate": ("intermediate_size", "n_inner", "ffn_dim"),
    "vocab": ("vocab_size",),
}
# Bounds a real decoder's config stays within: a typo (hidden = 40960000) is an error, not a card.
_HF_BOUNDS = {"n_layers": (1, 1024), "hidden": (16, 131072), "n_heads": (1, 1024), "n_kv_heads": (1, 1024),
              "head_dim": (8, 1024), "intermediate": (16, 1048576), "vocab": (16, 4_194_304)}


def model_card_from_hf_config(path: str | Path, name: str | None = None, family: str = "") -> ModelCard:
    """A card from a Hugging Face `config.json` (or a directory holding one). Multimodal configs
    nest the language model under `text_config`; that part is read."""
    import json

    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    try:
        raw = json.loads(p.read_text())
    except FileNotFoundError:
        raise CardError(f"model card {str(path)!r}: no such config.json") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise CardError(f"model card {str(path)!r}: not a readable JSON config ({type(e).__name__}: "
                        f"{str(e).splitlines()[0][:120]})") from None
    if not isinstance(raw, dict):
        raise CardError(f"model card {str(path)!r}: config.json must hold a JSON object, not {type(raw).__name__}")
    cfg = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else raw

    def get(field: str, keys: tuple[str, ...], default=None):
        for k in keys:
            if k in cfg and cfg[k] is not None:
                v = cfg[k]
                break
        else:
            if default is None:
                raise CardError(f"model card {str(path)!r}: config.json has none of {', '.join(keys)} (the {field})")
            v = default
        if isinstance(v, bool) or not isinstance(v, int):
            raise CardError(f"model card {str(path)!r}: {keys[0]} = {v!r} must be an integer")
        lo, hi = _HF_BOUNDS[field]
        if not lo <= v <= hi:
            raise CardError(f"model card {str(path)!r}: {keys[0]} = {v} is outside {lo}..{hi}")
        return v

    vals = {f: get(f, keys) for f, keys in _HF_KEYS.items()}
    vals["n_kv_heads"] = get("n_kv_heads", ("num_key_value_heads", "num_kv_heads"), vals["n_heads"])
    vals["head_dim"] = get("head_dim", ("head_dim",), max(vals["hidden"] // vals["n_heads"], 8))
    if vals["n_heads"] % vals["n_kv_heads"]:
        raise CardError(f"model card {str(path)!r}: {vals['n_heads']} attention heads are not a multiple of "
                        f"{vals['n_kv_heads']} KV heads")
    tied = cfg.get("tie_word_embeddings", raw.get("tie_word_embeddings", False))
    if not isinstance(tied, bool):
        raise CardError(f"model card {str(path)!r}: tie_word_embeddings = {tied!r} must be true or false")
    label = name or str(raw.get("_name_or_path") or cfg.get("model_type") or p.parent.name)
    return ModelCard(name=label, tied_embeddings=tied, source=f"config:{p}", family=family, **vals)


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
        except Exception as e:      # a damaged header: numpy/struct errors from the reader
            raise CardError(f"model card {ref!r}: not a readable GGUF header ({type(e).__name__})") from None
        return replace(card, family=family)
    if p.suffix == ".json" or p.is_dir():
        return model_card_from_hf_config(p, name, family)
    raise CardError(f"model card {ref!r}: unknown; give a shipped card ({', '.join(cards)}), "
                    f"a config.json path or a .gguf path")


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
        if k in _HF_BOUNDS and (isinstance(v, bool) or not isinstance(v, int) or not _HF_BOUNDS[k][0] <= v <= _HF_BOUNDS[k][1]):
            raise CardError(f"model card: {k} = {v!r} must be an integer in {_HF_BOUNDS[k][0]}..{_HF_BOUNDS[k][1]}")
    return ModelCard(name=name, source="inline", **fields)


def model_card_from_gguf(path: str, name: str | None = None) -> ModelCard:
    """Read the architecture numbers from a GGUF file's metadata."""
    from pareto_atlas.measure.gguf_header import read_header

    header = read_header(path)      # the metadata without gguf-py's numpy view of the vocabulary
    val = header.metadata.get       # an array field's value is its length

    arch = val("general.architecture")
    if arch is None:
        raise ValueError(f"{path}: not a GGUF model (no general.architecture)")
    n_heads = int(val(f"{arch}.attention.head_count"))
    hidden = int(val(f"{arch}.embedding_length"))
    n_kv = val(f"{arch}.attention.head_count_kv")
    head_dim = val(f"{arch}.attention.key_length") or hidden // n_heads
    vocab = int(val("tokenizer.ggml.tokens") or 0) or int(val(f"{arch}.vocab_size") or 0)
    names = {t.name for t in header.tensors}
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
