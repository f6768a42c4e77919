"""Top-k sparse attention inside the transformers model (torch): an attention function registered in
transformers' `AttentionInterface`, plus the count of keys it actually read.

The function is eager attention, except that a forward call given `topk=TopK(...)` lets each query
row of each query head read only the keys `policies.select_topk` picks from its scores q·k. Calls
without it (the prefill) are plain eager attention, as in SparQ and Quest, which sparsify decoding
only. The selection is the exact top-k: an oracle, an upper bound on the quality of approximate
methods at the same budget.

The same function runs PyramidKV, whose layers cache different numbers of entries: transformers
builds one mask, as long as layer 0's cache plus the new tokens, and each layer here reads its last
columns, those of its own cache (every cached entry precedes the new tokens, so the causal part
is the mask's last q columns in every layer).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .model import require_torch
from .policies import EvictionConfig, select_topk

NAME = "pareto_topk"


class TopK:
    """The budget of one run, and what its top-k attention read: keys read / keys visible, averaged
    over every query row it sparsified (decode steps; teacher-forced tokens for perplexity)."""

    def __init__(self, cfg: EvictionConfig):
        self.keep, self.min_budget = cfg.keep, cfg.min_budget
        self.rows = 0  # query rows sparsified, counted once per layer
        self.ratio_sum = 0.0  # per row: keys read / keys visible (the same in every layer and head)

    def record(self, read: Any, visible: Any) -> None:
        # read, visible: [rows] of the first head; every head and layer reads the same count
        self.ratio_sum += float((read / visible).sum())
        self.rows += int(read.shape[0])

    def fraction(self) -> float:
        """Mean attended fraction; 1.0 when nothing was sparsified (an answer given by the prefill alone)."""
        return self.ratio_sum / self.rows if self.rows else 1.0


def topk_attention(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    scaling: float,
    dropout: float = 0.0,
    topk: TopK | None = None,
    **kwargs: Any,
) -> tuple[Any, Any]:
    """Eager attention (query [b, heads, q, d], key/value [b, kv_heads, L, d], additive mask
    [b, 1, q, >= L], its last L columns read), restricted to each row's top-k keys when `topk` is given."""
    torch = require_torch()
    from transformers.integrations.sdpa_attention import repeat_kv

    keys = repeat_kv(key, module.num_key_value_groups)
    values = repeat_kv(value, module.num_key_value_groups)
    weights = torch.matmul(query, keys.transpose(2, 3)) * scaling  # [b, heads, q, L]
    if attention_mask is not None:
        attention_mask = attention_mask[..., -weights.shape[-1] :]  # this layer's cache
        weights = weights + attention_mask
    if topk is not None:
        q, length = weights.shape[-2:]
        if attention_mask is not None:
            visible = attention_mask == 0  # [b, 1, q, L]
        else:  # no mask given: causal over a cache that holds every earlier token
            visible = torch.ones(q, length, dtype=torch.bool).tril(length - q)[None, None]
        chosen = select_topk(weights.detach().float().numpy(), visible.numpy(), topk.keep, topk.min_budget)
        chosen = torch.from_numpy(chosen)
        topk.record(chosen[0, 0].sum(-1), visible.expand(chosen.shape)[0, 0].sum(-1))
        # the mask's own value: where every visible key is read, only masked entries are filled, with
        # what they already hold (w + min == min in float32), so budget 1 is eager attention bit for bit
        weights = weights.masked_fill(~chosen, torch.finfo(weights.dtype).min)
    weights = torch.nn.functional.softmax(weights, dim=-1, dtype=torch.float32).to(query.dtype)
    out = torch.matmul(weights, values).transpose(1, 2).contiguous()
    return out, weights


def register() -> None:
    """Make `NAME` an attention implementation, with eager's additive float mask (idempotent)."""
    require_torch()
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import eager_mask

    AttentionInterface.register(NAME, topk_attention)
    AttentionMaskInterface.register(NAME, eager_mask)


@contextmanager
def sparse_attention(model: Any) -> Iterator[None]:
    """The model runs `topk_attention` inside the block (top-k reads; PyramidKV's per-layer caches),
    its own implementation again after."""
    register()
    before = model.config._attn_implementation
    model.set_attn_implementation(NAME)
    if model.config._attn_implementation != NAME:
        # transformers only warns when a model cannot switch; the `topk` argument would then be
        # ignored by its own attention, and a dense run recorded as a sparse one
        raise RuntimeError(f"eviction attention: {type(model).__name__} cannot switch its attention to {NAME!r}")
    try:
        yield
    finally:
        model.set_attn_implementation(before)
