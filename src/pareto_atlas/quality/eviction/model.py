"""The real small model, dense, in HF transformers: a dequantized GGUF (optional extra `eviction`).

Dequantizing a GGUF is slow (about a minute for 135M params on 2 busy cores), so the dense model
is saved once with `save_pretrained` under the cache directory and reloaded from there.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

INSTALL_HINT = "pip install 'pareto-atlas[eviction]' (torch==2.13.0, transformers==5.24.0, accelerate==1.15.0)"


def require_torch() -> Any:
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as e:
        raise ImportError(f"KV eviction needs torch and transformers ({e.name} is missing): {INSTALL_HINT}") from None
    return torch


def dense_cache_dir(gguf: Path) -> Path:
    from pareto_atlas.measure.weights import cache_root

    return cache_root() / "hf-dense" / f"{gguf.stem}-{gguf.stat().st_size}"


def load_dense(gguf: str | Path, cache: bool = True) -> tuple[Any, Any]:
    """(model, tokenizer) in float32 with eager attention (needed for attention weights)."""
    # a weight-loading bar would break the stage's one line per point; the GGUF converter's own
    # tqdm bar ignores transformers' switch and obeys only tqdm's environment (read at its import)
    os.environ.setdefault("TQDM_DISABLE", "1")
    torch = require_torch()
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    gguf = Path(gguf)
    if not gguf.exists():
        raise FileNotFoundError(f"eviction model: GGUF file {gguf} does not exist")
    cached = dense_cache_dir(gguf)
    kw = dict(attn_implementation="eager", dtype=torch.float32)
    if cache and (cached / "config.json").exists():
        model = AutoModelForCausalLM.from_pretrained(cached, **kw)
        tok = AutoTokenizer.from_pretrained(cached)
    else:
        model = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, quantization_config=GgufConfig(dequantize=True), **kw
        )
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        if cache:
            cached.mkdir(parents=True, exist_ok=True)
            model.save_pretrained(cached)
            tok.save_pretrained(cached)
    model.eval()
    return model, tok
