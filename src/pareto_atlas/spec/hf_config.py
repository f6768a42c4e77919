"""A model card from a Hugging Face `config.json`: the fields every decoder names (Llama, Qwen2, Mistral,
Gemma, Phi, GPT-NeoX style keys), and the experts and latent attention of the mixture-of-experts
families: Qwen3-MoE (and Qwen2-MoE), Mixtral, DeepSeek-V2/V3, gpt-oss and Llama-4.

Each family names one fact with its own key (the experts: num_experts, num_local_experts,
n_routed_experts); a config naming one fact twice with two values is an error naming both keys."""

from __future__ import annotations

import json
from pathlib import Path


class CardError(ValueError):
    """A model card cannot be read: a missing or malformed config.json / GGUF, or an unknown name."""


# Bounds a real decoder's config stays within: a typo (hidden = 40960000) is an error, not a card.
_HF_BOUNDS = {
    "n_layers": (1, 1024),
    "hidden": (16, 131072),
    "n_heads": (1, 1024),
    "n_kv_heads": (1, 1024),
    "head_dim": (8, 1024),
    "intermediate": (16, 1048576),
    "vocab": (16, 4_194_304),
}


# config.json keys per card field, first found wins.
_HF_KEYS = {
    "n_layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "hidden": ("hidden_size", "n_embd", "d_model"),
    "n_heads": ("num_attention_heads", "n_head"),
    "intermediate": ("intermediate_size", "n_inner", "ffn_dim"),
    "vocab": ("vocab_size",),
}
# One MoE fact, each family's key for it: every key present must agree.
_EXPERTS = ("num_experts", "num_local_experts", "n_routed_experts")
_PER_TOKEN = ("num_experts_per_tok", "experts_per_token")
_MLA = ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
# Every expert or MoE key this reader knows: the ones it reads, and the routing settings that leave
# the weights a step reads unchanged (loss coefficients, group-limited top-k, score scaling). Any
# other key naming experts or MoE is an error: it may place or size experts in a way not modelled
# (Jamba's expert_layer_period, say), and a card that silently ignored it would be wrong.
_KNOWN_MOE_KEYS = frozenset(
    {
        *_EXPERTS,
        *_PER_TOKEN,
        "moe_intermediate_size",
        "n_shared_experts",
        "shared_expert_intermediate_size",
        "first_k_dense_replace",
        "moe_layer_freq",
        "decoder_sparse_step",
        "mlp_only_layers",
        "interleave_moe_layer_step",
        "moe_layers",
        "ep_size",
        "norm_topk_prob",
        "router_aux_loss_coef",
        "output_router_logits",
        "router_jitter_noise",
        "router_z_loss_coef",
        "aux_loss_alpha",
        "seq_aux",
        "topk_method",
        "scoring_func",
        "routed_scaling_factor",
        "n_group",
        "topk_group",
    }
)
_BOUNDS = {
    **_HF_BOUNDS,
    "n_experts": (2, 4096),
    "experts_per_token": (1, 4096),
    "expert_intermediate": (16, 1048576),
    "n_shared_experts": (0, 64),
    "shared_intermediate": (0, 1048576),
    "layer_step": (1, 1024),
    "first_k_dense": (0, 1024),
    "rank": (1, 65536),
    "q_lora_rank": (0, 65536),
}


class _Config:
    """The decoder part of one config.json and its path, for errors that name the file and the key."""

    def __init__(self, path: Path, cfg: dict) -> None:
        self.path, self.cfg = path, cfg

    def error(self, msg: str) -> CardError:
        return CardError(f"model card {str(self.path)!r}: {msg}")

    def has(self, key: str) -> bool:
        return self.cfg.get(key) is not None

    def int(self, field: str, keys: tuple[str, ...], default: int | None = None, agree: bool = False) -> int:
        """The first of `keys` present (all present must be equal where `agree`), checked against the
        field's bounds; `default` where none is present (None: the field is required)."""
        found = [(k, self.cfg[k]) for k in keys if self.cfg.get(k) is not None]
        if not found:
            if default is None:
                raise self.error(f"config.json has none of {', '.join(keys)} (the {field})")
            return default
        key, v = found[0]
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.error(f"{key} = {v!r} must be an integer")
        if agree:
            for k2, v2 in found[1:]:
                if v2 != v:
                    raise self.error(f"{key} = {v!r} and {k2} = {v2!r} contradict each other (both are the {field})")
        lo, hi = _BOUNDS[field]
        if not lo <= v <= hi:
            raise self.error(f"{key} = {v} is outside {lo}..{hi}")
        return v


def _read(path: str | Path) -> tuple[Path, dict, dict]:
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    try:
        raw = json.loads(p.read_text())
    except FileNotFoundError:
        raise CardError(f"model card {str(path)!r}: no such config.json") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise CardError(
            f"model card {str(path)!r}: not a readable JSON config ({type(e).__name__}: {str(e).splitlines()[0][:120]})"
        ) from None
    if not isinstance(raw, dict):
        raise CardError(f"model card {str(path)!r}: config.json must hold a JSON object, not {type(raw).__name__}")
    # multimodal configs (Llama-4, Gemma-3) nest the language model under text_config
    cfg = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else raw
    return p, raw, cfg


def hf_card_fields(path: str | Path) -> tuple[dict, str, Path]:
    """(the card's fields, its name from the config, the config's path) of a Hugging Face
    `config.json` or a directory holding one; spec.cards makes the card."""
    p, raw, cfg = _read(path)
    c = _Config(p, cfg)
    vals = {f: c.int(f, keys) for f, keys in _HF_KEYS.items()}
    vals["n_kv_heads"] = c.int("n_kv_heads", ("num_key_value_heads", "num_kv_heads"), vals["n_heads"])
    vals["head_dim"] = c.int("head_dim", ("head_dim",), max(vals["hidden"] // vals["n_heads"], 8))
    if vals["n_heads"] % vals["n_kv_heads"]:
        raise c.error(f"{vals['n_heads']} attention heads are not a multiple of {vals['n_kv_heads']} KV heads")
    tied = cfg.get("tie_word_embeddings", raw.get("tie_word_embeddings", False))
    if not isinstance(tied, bool):
        raise c.error(f"tie_word_embeddings = {tied!r} must be true or false")
    vals.update(_latent_attention(c))
    if vals.get("kv_lora_rank"):
        # the query/key width a head attends with (the card's head_dim stands for it under MLA)
        vals["head_dim"] = vals["qk_nope_head_dim"] + vals["qk_rope_head_dim"]
    vals.update(_experts(c, vals["n_layers"], vals["intermediate"], str(cfg.get("model_type", ""))))
    vals.update(_sliding_window(c, vals["n_layers"]))
    vals.update(_native_quantization(c, raw))
    vals["tied_embeddings"] = tied
    return vals, str(raw.get("_name_or_path") or cfg.get("model_type") or p.parent.name), p


def _latent_attention(c: _Config) -> dict:
    """DeepSeek-V2/V3's MLA ranks, or {} where the config has none."""
    present = [k for k in _MLA if c.has(k)]
    if not present:
        if c.has("q_lora_rank"):
            raise c.error("q_lora_rank without kv_lora_rank: latent attention needs " + ", ".join(_MLA))
        return {}
    missing = [k for k in _MLA if k not in present]
    if missing:
        raise c.error(f"{present[0]} without {missing[0]}: latent attention needs {', '.join(_MLA)}")
    out = {k: c.int("rank", (k,)) for k in _MLA}
    out["q_lora_rank"] = c.int("q_lora_rank", ("q_lora_rank",), 0)
    return out


def _experts(c: _Config, n_layers: int, intermediate: int, model_type: str) -> dict:
    """The expert fields, or {} for a dense config. `intermediate` is the config's intermediate_size:
    the experts' width where no moe_intermediate_size names it (Mixtral, gpt-oss, Llama-4)."""
    for key, v in c.cfg.items():
        low = key.lower()
        if ("expert" in low or "moe" in low) and key not in _KNOWN_MOE_KEYS and v not in (None, False, 0, [], {}):
            raise c.error(
                f"{key} = {v!r}: an expert setting this reader does not model (it reads "
                f"{', '.join(sorted(_KNOWN_MOE_KEYS & set(c.cfg)) or _EXPERTS)})"
            )
    n = c.int("n_experts", _EXPERTS, 0, agree=True)
    if not n:
        for k in _PER_TOKEN + ("moe_intermediate_size", "n_shared_experts", "first_k_dense_replace"):
            if c.cfg.get(k):  # 0 or null: a dense config's placeholder
                raise c.error(f"{k} without a count of experts ({', '.join(_EXPERTS)})")
        return {}
    k = c.int("experts_per_token", _PER_TOKEN, agree=True)
    if k > n:
        raise c.error(f"experts per token ({k}) exceed the experts ({n})")
    expert_w = c.int("expert_intermediate", ("moe_intermediate_size",), intermediate)
    out = {"n_experts": n, "experts_per_token": k, "expert_intermediate": expert_w}
    # shared experts: DeepSeek's n_shared_experts of the experts' width; Qwen2-MoE's one of
    # shared_expert_intermediate_size; Llama-4's one of intermediate_size in every MoE layer
    if c.has("n_shared_experts"):
        out["n_shared_experts"] = c.int("n_shared_experts", ("n_shared_experts",))
    elif c.has("shared_expert_intermediate_size"):
        w = c.int("shared_intermediate", ("shared_expert_intermediate_size",))
        out.update(n_shared_experts=1 if w else 0, shared_intermediate=w)
    elif model_type.startswith("llama4"):
        out["n_shared_experts"] = 1
    moe = _moe_layer_count(c, n_layers)
    out["dense_layers"] = n_layers - moe
    if out["dense_layers"]:
        # the dense layers' MLP: Llama-4 names it intermediate_size_mlp; where moe_intermediate_size
        # names the experts, intermediate_size is the dense one
        if c.has("intermediate_size_mlp"):
            out["intermediate"] = c.int("intermediate", ("intermediate_size_mlp",))
        elif not c.has("moe_intermediate_size"):
            raise c.error(
                f"{out['dense_layers']} dense layers but no width for their MLP "
                f"(intermediate_size_mlp or moe_intermediate_size)"
            )
    return out


def _moe_layer_count(c: _Config, n_layers: int) -> int:
    """Layers that route to experts, by each family's rule (transformers' modeling code):
    DeepSeek: i >= first_k_dense_replace and i % moe_layer_freq == 0; Qwen-MoE: i not in
    mlp_only_layers and (i + 1) % decoder_sparse_step == 0; Llama-4: the moe_layers list, else
    (i + 1) % interleave_moe_layer_step == 0; Mixtral and gpt-oss: every layer."""
    schemes = [k for k in ("first_k_dense_replace", "decoder_sparse_step", "interleave_moe_layer_step") if c.has(k)]
    if len(schemes) > 1:
        raise c.error(f"{schemes[0]} and {schemes[1]} both place the MoE layers (two families' keys)")
    if c.has("first_k_dense_replace"):
        first = c.int("first_k_dense", ("first_k_dense_replace",))
        freq = c.int("layer_step", ("moe_layer_freq",), 1)
        layers = [i for i in range(n_layers) if i >= first and i % freq == 0]
    elif c.has("decoder_sparse_step") or c.has("mlp_only_layers"):
        step = c.int("layer_step", ("decoder_sparse_step",), 1)
        only = c.cfg.get("mlp_only_layers") or []
        if not isinstance(only, list) or any(
            isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n_layers for i in only
        ):
            raise c.error(f"mlp_only_layers = {only!r} must list layer indices in 0..{n_layers - 1}")
        layers = [i for i in range(n_layers) if i not in only and (i + 1) % step == 0]
    elif c.has("moe_layers"):
        given = c.cfg["moe_layers"]
        if not isinstance(given, list) or any(
            isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n_layers for i in given
        ):
            raise c.error(f"moe_layers = {given!r} must list layer indices in 0..{n_layers - 1}")
        layers = sorted(set(given))
    else:
        step = c.int("layer_step", ("interleave_moe_layer_step",), 1)
        layers = list(range(step - 1, n_layers, step))
    if not layers:
        raise c.error(
            "the experts' keys place no MoE layer (first_k_dense_replace / decoder_sparse_step / "
            "interleave_moe_layer_step)"
        )
    return len(layers)


def _sliding_window(c: _Config, n_layers: int) -> dict:
    """The sliding-window layers where layer_types names each layer's attention (gpt-oss, Gemma-3 in
    current transformers): {} where it names none. A sliding_window without layer_types is not read:
    families disagree on what it means then (Qwen's use_sliding_window false, Mistral's on every layer)."""
    types = c.cfg.get("layer_types")
    if types is None:
        return {}
    if not isinstance(types, list) or len(types) != n_layers or any(not isinstance(t, str) for t in types):
        raise c.error(f"layer_types must list one attention type per layer ({n_layers}), not {str(types)[:80]}")
    unknown = sorted(set(types) - {"full_attention", "sliding_attention"})
    if unknown:
        raise c.error(f"layer_types: {unknown[0]!r} is not modelled (full_attention, sliding_attention)")
    sliding = types.count("sliding_attention")
    if not sliding:
        return {}
    window = c.cfg.get("sliding_window")
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise c.error(f"sliding_window = {window!r}: layer_types names sliding layers, so it must be an integer >= 1")
    if sliding == n_layers:
        raise c.error("layer_types: every layer slides; one at least must attend in full")
    return {"sliding_window": window, "sliding_layers": sliding}


# quantization_config's quant_method -> the weight format its checkpoint ships, where the checkpoint
# keeps parts at 16 bits that the card must count so (modules_to_not_convert)
_NATIVE = {"mxfp4": "MXFP4"}
# a modules_to_not_convert pattern's last name -> the card's part (spec.cards.QUANT_PARTS)
_PART_NAMES = {
    "self_attn": "attention",
    "router": "router",
    "gate": "router",
    "embed_tokens": "embedding",
    "lm_head": "lm_head",
}


def _native_quantization(c: _Config, raw: dict) -> dict:
    """The checkpoint's own format and the parts it leaves at 16 bits, from quantization_config:
    {} where it has none or its method keeps no part apart (fp8 checkpoints are served as the
    study's weight knob says)."""
    q = raw.get("quantization_config") or c.cfg.get("quantization_config")
    if not isinstance(q, dict) or str(q.get("quant_method", "")).lower() not in _NATIVE:
        return {}
    keep = q.get("modules_to_not_convert") or []
    if not isinstance(keep, list) or any(not isinstance(m, str) for m in keep):
        raise c.error(f"quantization_config.modules_to_not_convert = {keep!r} must list module names")
    parts = []
    for m in keep:
        name = m.rstrip(".*").split(".")[-1]
        if name not in _PART_NAMES:
            raise c.error(
                f"quantization_config.modules_to_not_convert: {m!r} is not a part the card counts "
                f"({', '.join(sorted(_PART_NAMES))})"
            )
        if _PART_NAMES[name] not in parts:
            parts.append(_PART_NAMES[name])
    out: dict = {"native_format": _NATIVE[str(q["quant_method"]).lower()]}
    if parts:
        out["native_16bit"] = tuple(parts)
    return out
