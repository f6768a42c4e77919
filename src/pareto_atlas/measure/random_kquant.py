"""A random-weight dense model whose every weight row fits llama.cpp's K-quant blocks, in Q4_K_M: a
kernel anchor, so this CPU's fit has the cost of real Q4_K and Q6_K kernels.

Why: llama.cpp packs K-quants 256 weights a block along a tensor's rows and stores a tensor whose rows
are not a multiple of 256 long in a legacy type. The default study's two sizes (the 0.5B, hidden 896,
and SmolLM2-135M, hidden 576) so run a Q4_K_M file that is mostly Q5_0 (`Q4_K_M/legacy-rows`,
simulate.params.kernel_format), and no anchor ran the kernels a Q4_K_M model with 256-multiple rows
runs (the 1.5B, hidden 1536; a 7B): their cost was derived from the roofline, and the 1.5B's TPOT came
out +51 to +63 % slow. Decode and prefill speed do not depend on the weights' values, so random
weights of such a shape measure those kernels on any machine, with no checkpoint to ship.

How: the dense layout of measure.random_moe's dense twin (llama.cpp's `qwen3`, the Qwen2.5 tokenizer
copied), written by the writer that module uses (measure.random_gguf), in F16, then quantized by
llama.cpp's own `llama-quantize` Q4_K_M (its per-tensor mix: Q4_K, Q6_K for attn_v and ffn_down on some
layers and for the tied output matrix), so the file holds the kernel mix a real Q4_K_M of a 256-multiple
model does. gguf-py cannot write K-quants. This module imports nothing of the measure package but
that leaf writer: measure.weights, which names it as a model source, hands it the tokenizer, the
quantizer and the cache (random_moe imports weights, so importing random_moe would close a circle).

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
from dataclasses import asdict, dataclass
from pathlib import Path

from pareto_atlas.measure import random_gguf

QK_K = 256  # weights per K-quant block (llama.cpp's QK_K; simulate.params.QK_K, which measure cannot import)
NAME = "random-dense-q4km"  # its name as a model source (measure.weights.SOURCES) and in studies
QUANT = "Q4_K_M"  # the file's weight format: llama-quantize's type argument and the arm's `weights`
BUILDER_VERSION = 1  # bump when the file changes: the cache key changes with it
ARCH = "qwen3"


@dataclass(frozen=True)
class DenseShape:
    """A dense Qwen3 layout (random_moe.MoeShape's dense twin, the same fields where they meet)."""

    n_layers: int = 16
    hidden: int = 1024
    n_heads: int = 16
    n_kv_heads: int = 2
    head_dim: int = 64
    ffn: int = 11264
    seed: int = 0

    def label(self) -> str:
        return f"{ARCH} L{self.n_layers} h{self.hidden} ffn{self.ffn} F16"

    def layout(self) -> random_gguf.Layout:
        """What the file holds (measure.random_gguf's writer), in F16: llama-quantize's input."""
        return random_gguf.Layout(
            n_layers=self.n_layers,
            hidden=self.hidden,
            n_heads=self.n_heads,
            n_kv_heads=self.n_kv_heads,
            head_dim=self.head_dim,
            ffn=self.ffn,
            weights="F16",
            seed=self.seed,
        )

    def shape_json(self) -> str:
        # the metadata random_moe writes for its dense twin (the same bytes for the same shape)
        d = asdict(self)
        keys = ("n_layers", "hidden", "n_heads", "n_kv_heads", "head_dim")
        full = {k: d[k] for k in keys} | {"n_experts": 0, "experts_per_token": 0, "expert_ffn": 0}
        full |= {"dense_ffn": self.ffn, "weights": "F16", "seed": self.seed}
        return json.dumps(full, sort_keys=True)


KERNEL_SHAPE = DenseShape()


def row_error(s: DenseShape) -> str:
    """ "" when every weight matrix's rows are whole K-quant blocks (then llama-quantize keeps every
    tensor in a K-quant), else the first width that is not a multiple of QK_K."""
    for name, width in (("hidden", s.hidden), ("n_heads x head_dim", s.n_heads * s.head_dim), ("ffn", s.ffn)):
        if width <= 0 or width % QK_K:
            return f"{name} = {width} must be a positive multiple of {QK_K} (llama.cpp's K-quant block)"
    if s.n_layers < 1 or s.n_kv_heads < 1 or s.n_heads % s.n_kv_heads:
        return f"n_layers = {s.n_layers}, n_kv_heads = {s.n_kv_heads}: >= 1, and n_kv_heads must divide n_heads"
    return ""


def card_fields(s: DenseShape = KERNEL_SHAPE, vocab: int = 151936) -> dict[str, int | bool]:
    """The model card of the file (spec.cards.ModelCard's fields, as a study's inline card gives them):
    what spec/default_study.toml's kernel arm names, so its card is known without building the file."""
    return {
        "n_layers": s.n_layers,
        "hidden": s.hidden,
        "n_heads": s.n_heads,
        "n_kv_heads": s.n_kv_heads,
        "head_dim": s.head_dim,
        "intermediate": s.ffn,
        "vocab": vocab,
        "tied_embeddings": True,
    }


def tensor_shapes(s: DenseShape, vocab: int) -> dict[str, tuple[int, ...]]:
    """Every tensor's numpy shape, in file order; the output matrix is tied to the embedding."""
    return random_gguf.tensor_shapes(s.layout(), vocab)


def write_f16(s: DenseShape, dst: Path, tokenizer: Path) -> None:
    """Write the shape's random-weight F16 GGUF to `dst`, with `tokenizer`'s tokenizer fields."""
    random_gguf.write_gguf(s.layout(), dst, tokenizer, label=s.label(), shape_json=s.shape_json())


def quantize(quantizer: Path, src: Path, dst: Path, quant: str = QUANT, threads: int | None = None) -> None:
    """`src` quantized to `quant` by llama.cpp's llama-quantize at `quantizer`."""
    cmd = [str(quantizer), str(src), str(dst), quant, str(threads or os.cpu_count() or 1)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)  # its exit code is reported below
    if res.returncode != 0 or not dst.exists():
        dst.unlink(missing_ok=True)
        tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"llama-quantize {quant} failed (exit {res.returncode}): {tail[0]}")


def build_kquant_gguf(
    s: DenseShape = KERNEL_SHAPE,
    *,
    tokenizer: Path,
    tokenizer_sha: str,
    quantizer: Path,
    out_dir: Path,
    version: str,
    quant: str = QUANT,
) -> Path:
    """The shape's random-weight GGUF in `quant`, made once in `out_dir`: cached by a key of the shape,
    the tokenizer file's sha256, the llama.cpp `version` whose `quantizer` made it and BUILDER_VERSION.
    The F16 file it is quantized from is written to a temporary folder there and removed."""
    bad = row_error(s)
    if bad:
        raise ValueError(f"kernel shape: {bad}")
    key_src = [asdict(s), tokenizer_sha, quant, version, BUILDER_VERSION]
    key = hashlib.sha256(json.dumps(key_src, sort_keys=True).encode()).hexdigest()[:12]
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"random-{ARCH}-{key}.{quant}.gguf"
    if path.exists():
        return path
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        f16 = Path(tmp) / "f16.gguf"
        write_f16(s, f16, tokenizer)
        part = Path(tmp) / path.name
        quantize(quantizer, f16, part, quant)
        os.replace(part, path)
    return path
