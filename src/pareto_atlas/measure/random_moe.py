"""A random-weight mixture of experts (llama.cpp's `qwen3moe`) and its dense twin (`qwen3`) written
with gguf-py from a shape: seeded, cached, served by llama.cpp like any GGUF.

Decode speed does not depend on the weights' values, so random weights measure how an MoE's step
time follows the experts its batch touches (simulate.moe) on a machine with no MoE checkpoint. The
tokenizer is the Qwen2.5 GGUF's (its `tokenizer.*` fields copied, as the broken RANDOM arm of
measure.weights keeps them), so the server counts prompts as the token contract needs.

Why the default shape (MoeShape()): on a CPU a step's time is the weights it streams. The output
matrix over the 151,936-token vocabulary is read every step whatever the batch, so the hidden size
is small (256: 156 MB in F32) and the experts large (16 of 6144 wide, 2 per token, over 4 layers:
1.21 GB), so the experts a batch touches are most of what a step reads (about half at one slot,
five sixths at eight). Every matrix is F32: 4 bytes per weight against the same multiply-adds as F16
keeps a step memory-bound even where eight tokens share the experts they touch, and one format for
all weights is what the simulator's card describes (one bits-per-weight for always-run and routed).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import numpy as np

from pareto_atlas.measure import random_gguf
from pareto_atlas.measure.random_gguf import FORMATS

BUILDER_VERSION = 1  # bump when the file layout changes: the cache key changes with it
TOKENIZER_MODEL = "qwen2.5-coder-0.5b-instruct"  # its GGUF's tokenizer fields are copied


@dataclass(frozen=True)
class MoeShape:
    """A Qwen3-MoE layout; n_experts 0 (and experts_per_token 0) is its dense twin (qwen3), whose MLP
    is dense_ffn wide."""

    n_layers: int = 4
    hidden: int = 256
    n_heads: int = 4
    n_kv_heads: int = 2
    head_dim: int = 64
    n_experts: int = 16
    experts_per_token: int = 2
    expert_ffn: int = 6144
    dense_ffn: int = 0
    weights: str = "F32"
    seed: int = 0

    def __post_init__(self) -> None:
        bad = shape_error(self)
        if bad:
            raise ValueError(f"moe shape: {bad}")

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    @property
    def arch(self) -> str:
        return "qwen3moe" if self.is_moe else "qwen3"

    def dense_twin(self) -> MoeShape:
        """The dense model of the same active size: each layer's MLP as wide as the experts one token
        runs (experts_per_token x expert_ffn), everything else the same."""
        if not self.is_moe:
            return self
        return replace(
            self, n_experts=0, experts_per_token=0, expert_ffn=0, dense_ffn=self.experts_per_token * self.expert_ffn
        )

    def layout(self) -> random_gguf.Layout:
        """What the file holds (measure.random_gguf's writer)."""
        return random_gguf.Layout(
            n_layers=self.n_layers,
            hidden=self.hidden,
            n_heads=self.n_heads,
            n_kv_heads=self.n_kv_heads,
            head_dim=self.head_dim,
            ffn=self.expert_ffn if self.is_moe else self.dense_ffn,
            n_experts=self.n_experts,
            experts_per_token=self.experts_per_token,
            weights=self.weights,
            seed=self.seed,
        )

    def label(self) -> str:
        if self.is_moe:
            return (
                f"{self.arch} L{self.n_layers} h{self.hidden} E{self.n_experts}k{self.experts_per_token} "
                f"ffn{self.expert_ffn} {self.weights}"
            )
        return f"{self.arch} L{self.n_layers} h{self.hidden} ffn{self.dense_ffn} {self.weights}"

    @classmethod
    def from_dict(cls, d: dict) -> MoeShape:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"moe shape: unknown field {unknown[0]!r}; known: {', '.join(sorted(known))}")
        return cls(**d)


def shape_error(s: MoeShape) -> str:
    """ "" for a shape llama.cpp can load, else the first bad field and what is allowed."""
    for f in fields(s):
        v = getattr(s, f.name)
        if f.name == "weights":
            if v not in FORMATS:
                return f"weights = {v!r}; allowed: {', '.join(FORMATS)}"
        elif isinstance(v, bool) or not isinstance(v, int) or v < 0:
            return f"{f.name} = {v!r} must be an integer >= 0"
    for name in ("n_layers", "hidden", "n_heads", "n_kv_heads", "head_dim"):
        if getattr(s, name) < 1:
            return f"{name} = {getattr(s, name)} must be >= 1"
    if s.n_heads % s.n_kv_heads:
        return f"n_kv_heads = {s.n_kv_heads} must divide n_heads ({s.n_heads})"
    if s.head_dim % 2:
        return f"head_dim = {s.head_dim} must be even (rotary pairs)"
    if s.n_experts:
        if s.n_experts < 2:
            return f"n_experts = {s.n_experts}: an MoE needs >= 2 experts (0: the dense twin)"
        if not 1 <= s.experts_per_token <= s.n_experts:
            return f"experts_per_token = {s.experts_per_token} must be in 1..n_experts ({s.n_experts})"
        if s.expert_ffn < 1:
            return f"expert_ffn = {s.expert_ffn} must be >= 1 for an MoE"
        if s.dense_ffn:
            return f"dense_ffn = {s.dense_ffn} must be 0 for an MoE (its MLPs are the experts)"
    else:
        if s.experts_per_token or s.expert_ffn:
            return f"experts_per_token/expert_ffn = {s.experts_per_token}/{s.expert_ffn} must be 0 without experts"
        if s.dense_ffn < 1:
            return f"dense_ffn = {s.dense_ffn} must be >= 1 for a dense model (n_experts 0)"
    return ""


def tensor_shapes(s: MoeShape, vocab: int) -> dict[str, tuple[int, ...]]:
    """Every tensor's numpy shape (GGUF's dimensions reversed), in file order. The output matrix is
    tied to the embedding (no output.weight), as in Qwen3's small models."""
    return random_gguf.tensor_shapes(s.layout(), vocab)


def file_bytes(s: MoeShape, vocab: int) -> int:
    """Bytes of the tensors (norms in F32, matrices in the shape's format): the file less its header."""
    size = np.dtype(FORMATS[s.weights]).itemsize
    return sum(int(np.prod(shp)) * (4 if len(shp) == 1 else size) for shp in tensor_shapes(s, vocab).values())


def write_gguf(s: MoeShape, dst: Path, tokenizer: Path) -> None:
    """Write the shape's random-weight GGUF to `dst`, with `tokenizer`'s tokenizer fields."""
    random_gguf.write_gguf(
        s.layout(), dst, tokenizer, label=s.label(), shape_json=json.dumps(asdict(s), sort_keys=True)
    )


def tokenizer_source() -> tuple[Path, str]:
    """The Qwen2.5 0.5B GGUF the tokenizer comes from, verified against its pinned sha256: assembled
    from its part packages (measure.weights.source_file), or the copy assembled earlier into the cache
    where those packages are gone (the copy is checked against the same pin)."""
    from pareto_atlas.measure.weights import SOURCES, ModelError, _verified, cache_dir, source_file

    try:
        return source_file(TOKENIZER_MODEL)
    except ModelError as e:
        src = SOURCES[TOKENIZER_MODEL]
        cached = cache_dir() / f"{TOKENIZER_MODEL}.{src.source_type}.gguf"
        if not cached.is_file():
            raise ModelError(f"tokenizer: {e}") from None
        return cached, _verified(cached, src.sha256)


def build_random_gguf(s: MoeShape, *, tokenizer: Path | None = None, out_dir: Path | None = None) -> Path:
    """The shape's GGUF, made once: cached under the project's cache (measure.weights.cache_dir) by
    a key of the shape, the tokenizer file's sha256 and BUILDER_VERSION. `tokenizer`: a GGUF whose
    tokenizer fields are copied (default: the Qwen2.5 0.5B GGUF, measure.weights' source)."""
    from pareto_atlas.measure.weights import cache_dir, sha256_file

    if tokenizer is None:
        tokenizer, tok_sha = tokenizer_source()
    else:
        tok_sha = sha256_file(Path(tokenizer))
    key = hashlib.sha256(json.dumps([asdict(s), tok_sha, BUILDER_VERSION], sort_keys=True).encode()).hexdigest()[:12]
    out = Path(out_dir) if out_dir is not None else cache_dir() / "random-moe"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"random-{s.arch}-{key}.gguf"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        try:
            write_gguf(s, tmp, Path(tokenizer))
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, path)
    return path
