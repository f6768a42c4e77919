"""KV-cache eviction policies llama.cpp lacks (StreamingLLM, H2O, SnapKV), run on the real small
model in HF transformers (optional extra `eviction`: torch, transformers, accelerate).

`policies` is numpy only; `model`, `decode` and `experiment` import torch lazily and raise one
clear ImportError naming the extra when it is missing.
"""

from __future__ import annotations

from .policies import POLICIES, EvictionConfig, select

__all__ = ["POLICIES", "EvictionConfig", "select"]
