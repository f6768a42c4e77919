"""The GGUF writer of the random-weight models (measure.random_moe's MoE and dense twin,
measure.random_kquant's K-quant kernel shape): a Qwen3 layout, seeded weights, a donor GGUF's
tokenizer fields, written by gguf-py.

A leaf: it imports nothing of the measure package, because measure.weights names random_kquant as a
model source and random_moe imports weights (either module reusing the other would close a circle).
One writer, so the two modules write the same bytes for the same dense shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

FORMATS = {"F32": np.float32, "F16": np.float16}
CONTEXT = 4096  # the context length the files declare (the engine's n_ctx decides what it allocates)


@dataclass(frozen=True)
class Layout:
    """What the file holds: a Qwen3 layout whose MLP is `ffn` wide (each expert's width where
    n_experts > 0, llama.cpp's `qwen3moe`; the dense MLP's where 0, `qwen3`), matrices in `weights`."""

    n_layers: int
    hidden: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn: int
    n_experts: int = 0
    experts_per_token: int = 0
    weights: str = "F32"
    seed: int = 0

    @property
    def arch(self) -> str:
        return "qwen3moe" if self.n_experts else "qwen3"


def tensor_shapes(lay: Layout, vocab: int) -> dict[str, tuple[int, ...]]:
    """Every tensor's numpy shape (GGUF's dimensions reversed), in file order. The output matrix is
    tied to the embedding (no output.weight), as in Qwen3's small models."""
    h, q, kv, f = lay.hidden, lay.n_heads * lay.head_dim, lay.n_kv_heads * lay.head_dim, lay.ffn
    out: dict[str, tuple[int, ...]] = {"token_embd.weight": (vocab, h), "output_norm.weight": (h,)}
    for i in range(lay.n_layers):
        b = f"blk.{i}."
        out |= {
            b + "attn_norm.weight": (h,),
            b + "attn_q.weight": (q, h),
            b + "attn_k.weight": (kv, h),
            b + "attn_v.weight": (kv, h),
            b + "attn_output.weight": (h, q),
            b + "attn_q_norm.weight": (lay.head_dim,),
            b + "attn_k_norm.weight": (lay.head_dim,),
            b + "ffn_norm.weight": (h,),
        }
        if lay.n_experts:
            e = lay.n_experts
            out |= {
                b + "ffn_gate_inp.weight": (e, h),
                b + "ffn_gate_exps.weight": (e, f, h),
                b + "ffn_up_exps.weight": (e, f, h),
                b + "ffn_down_exps.weight": (e, h, f),
            }
        else:
            out |= {b + "ffn_gate.weight": (f, h), b + "ffn_up.weight": (f, h), b + "ffn_down.weight": (h, f)}
    return out


@lru_cache(maxsize=4)
def tokenizer_fields(path: Path) -> list[tuple[str, object, object, object]]:
    """(key, value, type, array element type) of each `tokenizer.*` field of a GGUF file (gguf-py's
    reader takes ~20 s over Qwen2.5's vocabulary here: read once per process)."""
    import gguf

    reader = gguf.GGUFReader(str(path))
    out = []
    for f in reader.fields.values():
        if f.name.startswith("tokenizer."):
            vtype = f.types[0]
            sub = f.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
            out.append((f.name, f.contents(), vtype, sub))
    if not any(name == "tokenizer.ggml.tokens" for name, *_ in out):
        raise ValueError(f"tokenizer: {path} has no tokenizer.ggml.tokens field")
    return out


def seeded_tensor(shape: tuple[int, ...], lay: Layout, index: int) -> np.ndarray:
    """The `index`-th tensor's values. Norm weights are ones (a random norm scale only rescales);
    matrices N(0, 0.02), each from its own seeded stream so a tensor's values do not depend on the
    order others are drawn in."""
    if len(shape) == 1:
        return np.ones(shape, dtype=np.float32)
    rng = np.random.default_rng([lay.seed, index])
    return (rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)).astype(FORMATS[lay.weights], copy=False)


def write_gguf(lay: Layout, dst: Path, tokenizer: Path, *, label: str, shape_json: str) -> None:
    """Write the layout's random-weight GGUF to `dst`, with `tokenizer`'s tokenizer fields; `label`
    names it (general.name "random <label>"), `shape_json` is kept as pareto_atlas.random_shape."""
    import gguf

    tok = tokenizer_fields(tokenizer)
    vocab = next(len(v) for k, v, *_ in tok if k == "tokenizer.ggml.tokens")
    w = gguf.GGUFWriter(str(dst), arch=lay.arch)
    w.add_name(f"random {label}")
    w.add_context_length(CONTEXT)
    w.add_embedding_length(lay.hidden)
    w.add_block_count(lay.n_layers)
    w.add_feed_forward_length(lay.ffn)
    w.add_head_count(lay.n_heads)
    w.add_head_count_kv(lay.n_kv_heads)
    w.add_key_length(lay.head_dim)
    w.add_value_length(lay.head_dim)
    w.add_rope_freq_base(1e6)
    w.add_layer_norm_rms_eps(1e-6)
    if lay.n_experts:
        w.add_expert_count(lay.n_experts)
        w.add_expert_used_count(lay.experts_per_token)
        w.add_expert_feed_forward_length(lay.ffn)
    w.add_file_type(gguf.LlamaFileType.ALL_F32 if lay.weights == "F32" else gguf.LlamaFileType.MOSTLY_F16)
    w.add_string("pareto_atlas.random_shape", shape_json)
    for key, value, vtype, sub in tok:
        w.add_key_value(key, value, vtype, sub_type=sub)
    shapes = tensor_shapes(lay, vocab)
    for name, shp in shapes.items():
        dtype = np.dtype(np.float32 if len(shp) == 1 else FORMATS[lay.weights])
        w.add_tensor_info(name, shp, dtype, int(np.prod(shp)) * dtype.itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for i, shp in enumerate(shapes.values()):
        w.write_tensor_data(seeded_tensor(shp, lay, i))
    w.close()
