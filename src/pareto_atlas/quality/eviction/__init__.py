"""KV-cache eviction policies llama.cpp lacks (StreamingLLM, H2O, SnapKV, PyramidKV) and top-k
sparse attention (oracle), run on the real small model in HF transformers (optional extra
`eviction`: torch, transformers, accelerate).

`policies` is numpy only; `model`, `sparse`, `decode` and `experiment` import torch lazily and raise
one clear ImportError naming the extra when it is missing.
"""

from __future__ import annotations

from .policies import POLICIES, EvictionConfig, select, select_topk

__all__ = ["POLICIES", "EvictionConfig", "select", "select_topk"]
