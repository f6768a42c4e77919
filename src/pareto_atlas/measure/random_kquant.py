"""A random-weight dense model whose every weight row fits llama.cpp's K-quant blocks, in Q4_K_M: a
kernel anchor, so this CPU's fit has the cost of real Q4_K and Q6_K kernels.

Why: llama.cpp packs K-quants 256 weights a block along a tensor's rows and stores a tensor whose rows
are not a multiple of 256 long in a legacy type. The default study's two sizes (the 0.5B, hidden 896,
and SmolLM2-135M, hidden 576) so run a Q4_K_M file that is mostly Q5_0 (`Q4_K_M/legacy-rows`,
simulate.params.kernel_format), and no anchor ran the kernels a Q4_K_M model with 256-multiple rows
runs (the 1.5B, hidden 1536; a 7B): their cost was derived from the roofline, and the 1.5B's TPOT came
out +51 to +63 % slow. Decode and prefill speed do not depend on the weights' values, so random
weights of such a shape measure those kernels on any machine, with no checkpoint to ship.

How: the dense twin layout of measure.random_moe (llama.cpp's `qwen3`, the Qwen2.5 tokenizer copied)
written in F16 by gguf-py, then quantized by llama.cpp's own `llama-quantize` Q4_K_M (its per-tensor
mix: Q4_K, Q6_K for attn_v and ffn_down on some layers and for the tied output matrix), so the file
holds the same kernel mix a real Q4_K_M of a 256-multiple model does. gguf-py cannot write K-quants.

Why this shape (KERNEL_SHAPE): the fit has one cost per kernel format, so the anchor runs the mix a
served Q4_K_M model runs. llama-quantize's Q4_K_M stores the output matrix (here tied to the embedding,
over the 151,936-token vocabulary) in Q6_K, and on this CPU Q6_K's GEMV costs more per weight than
Q4_K's. A first shape (MLP 2816: 179 M body weights beside the 156 M of the output matrix, 46 % Q6_K
output) fitted a Q4_K_M cost that served models, whose output matrix is 8-15 % of what a step streams
(a 7B, a 1.5B), do not have. Hence a wide MLP: hidden 1024 and MLP 11264 (4 and 44 blocks of 256), 16
heads of 64 with 2 KV heads (Qwen2.5's attention), 16 layers: 592 M body weights, the output matrix
21 % of a step's. 0.75 B weights in all (~420 MB), one 128/32 anchor of 8 requests is about 30 s on
2 cores, the build (once) about 2 min. Not any shipped model's shape: a kernel anchor, not a size.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from dataclasses import asdict
from pathlib import Path

from pareto_atlas.measure.random_moe import MoeShape, build_random_gguf, tokenizer_source

QK_K = 256  # weights per K-quant block (llama.cpp's QK_K; simulate.params.QK_K, which measure cannot import)
NAME = "random-dense-q4km"  # its name as a model source (measure.weights.SOURCES) and in studies
QUANT = "Q4_K_M"  # the file's weight format: llama-quantize's type argument and the arm's `weights`
BUILDER_VERSION = 1  # bump when the file changes: the cache key changes with it
KERNEL_SHAPE = MoeShape(
    n_layers=16,
    hidden=1024,
    n_heads=16,
    n_kv_heads=2,
    head_dim=64,
    n_experts=0,
    experts_per_token=0,
    expert_ffn=0,
    dense_ffn=11264,
    weights="F16",
    seed=0,
)


def row_error(s: MoeShape) -> str:
    """ "" when every weight matrix's rows are whole K-quant blocks (then llama-quantize keeps every
    tensor in a K-quant), else the first width that is not a multiple of QK_K."""
    if s.is_moe:
        return "n_experts: a kernel anchor is dense (n_experts 0)"
    for name, width in (("hidden", s.hidden), ("n_heads x head_dim", s.n_heads * s.head_dim), ("dense_ffn", s.dense_ffn)):
        if width % QK_K:
            return f"{name} = {width} must be a multiple of {QK_K} (llama.cpp's K-quant block)"
    return ""


def card_fields(s: MoeShape = KERNEL_SHAPE, vocab: int = 151936) -> dict[str, int | bool]:
    """The model card of the file (spec.cards.ModelCard's fields, as a study's inline card gives them):
    what spec/default_study.toml's kernel arm names, so its card is known without building the file."""
    return {
        "n_layers": s.n_layers,
        "hidden": s.hidden,
        "n_heads": s.n_heads,
        "n_kv_heads": s.n_kv_heads,
        "head_dim": s.head_dim,
        "intermediate": s.dense_ffn,
        "vocab": vocab,
        "tied_embeddings": True,
    }


def quantize(src: Path, dst: Path, quant: str = QUANT, threads: int | None = None) -> None:
    """`src` quantized to `quant` by llama.cpp's llama-quantize (measure.weights.llama_tool)."""
    from pareto_atlas.measure.weights import ModelError, llama_quantize

    exe = llama_quantize()
    if exe is None:
        raise ModelError(
            f"model {NAME!r} is quantized by llama.cpp's llama-quantize, which is not built; build it once "
            f"with `make llama-tools` (scripts/build_llama_tools.sh) or set PARETO_ATLAS_LLAMA_QUANTIZE"
        )
    cmd = [str(exe), str(src), str(dst), quant, str(threads or os.cpu_count() or 1)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)  # its exit code is reported below
    if res.returncode != 0 or not dst.exists():
        dst.unlink(missing_ok=True)
        tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ModelError(f"llama-quantize {quant} failed (exit {res.returncode}): {tail[0]}")


def build_kquant_gguf(
    s: MoeShape = KERNEL_SHAPE, *, quant: str = QUANT, tokenizer: Path | None = None, out_dir: Path | None = None
) -> Path:
    """The shape's random-weight GGUF in `quant`, made once: cached under the project's cache by a key
    of the shape, the tokenizer file's sha256, the llama.cpp version that quantized it and
    BUILDER_VERSION. The F16 file it is quantized from is written to a temporary folder and removed."""
    from pareto_atlas.measure.weights import LLAMA_CPP_VERSION, cache_dir, sha256_file

    bad = row_error(s)
    if bad:
        raise ValueError(f"kernel shape: {bad}")
    if tokenizer is None:
        tokenizer, tok_sha = tokenizer_source()
    else:
        tok_sha = sha256_file(Path(tokenizer))
    key_src = [asdict(s), tok_sha, quant, LLAMA_CPP_VERSION, BUILDER_VERSION]
    key = hashlib.sha256(json.dumps(key_src, sort_keys=True).encode()).hexdigest()[:12]
    out = Path(out_dir) if out_dir is not None else cache_dir() / "random-kquant"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"random-{s.arch}-{key}.{quant}.gguf"
    if path.exists():
        return path
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        f16 = build_random_gguf(s, tokenizer=Path(tokenizer), out_dir=Path(tmp))
        part = Path(tmp) / path.name
        quantize(f16, part, quant)
        os.replace(part, path)
    return path
