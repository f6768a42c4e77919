"""Quality of KV eviction policies and top-k sparse attention on the real small model: retrieval,
GSM8K, and perplexity.

Produces the same `QualityRecord`s as the engine runner (so rescore, agreement and guards apply
unchanged) plus one `EvictionPoint` per policy and keep ratio, with the KV memory it keeps
(`kv_keep`, the simulator's knob; for topk the share of the cache each decode step reads, the
simulator's `sparse_budget`) and the perplexity of the same text under the same cache.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..records import QualityItem, QualityRecord
from ..scoring import score_output, summarize
from ..stats import Score
from .decode import generate, perplexity
from .policies import EvictionConfig


@dataclass(frozen=True)
class EvictionPoint:
    label: str
    policy: str
    keep: float  # nominal budget / prompt length (topk: keys read / keys cached)
    chunk: int
    kv_keep: float  # achieved: mean over items of cache kept / full cache, at the end of each answer
    # (topk: keys read / keys cached, mean over decode steps)
    peak_kv_tokens: int  # largest cache seen (budget + one prefill chunk while compressing; topk: full)
    kv_bytes_per_token: int  # fp16 K+V over all layers: what the kept fraction saves
    accuracy: Score | None  # strict, on the items given
    ppl: float | None  # perplexity of `ppl_text` under the same policy
    seconds: float
    records: tuple[QualityRecord, ...]


def kv_bytes_per_token(model: Any, bytes_per_value: int = 2) -> int:
    c = model.config
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    return 2 * c.num_hidden_layers * c.num_key_value_heads * head_dim * bytes_per_value


def item_prompt(tok: Any, item: QualityItem) -> str:
    if item.prompt is not None:
        return item.prompt
    msgs = [{"role": r, "content": c} for r, c in item.messages]
    if msgs and msgs[-1]["role"] == "assistant":  # a pre-filled answer start (RULER): continue it
        return tok.apply_chat_template(msgs, tokenize=False, continue_final_message=True)
    return tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)


def run_items_hf(
    model: Any,
    tok: Any,
    items: Sequence[QualityItem],
    cfg: EvictionConfig,
    progress: Callable[[int, int], None] | None = None,
) -> list[QualityRecord]:
    records = []
    for i, item in enumerate(items, 1):
        t0 = time.monotonic()
        g = generate(model, tok, item_prompt(tok, item), cfg, item.max_tokens, item.stop or ("\n\n\n",))
        strict, flexible, ok_s, ok_f = score_output(item.task, item.variant, g.text, item.target, item.stop)
        records.append(
            QualityRecord(
                item_id=item.item_id,
                task=item.task,
                variant=item.variant,
                prompt_sha256=item.prompt_sha256(),
                target=item.target,
                output=g.text,
                extracted_strict=strict,
                extracted_flexible=flexible,
                correct_strict=ok_s,
                correct_flexible=ok_f,
                latency_s=time.monotonic() - t0,
                stop=item.stop,
                token_ids=g.token_ids,
                prompt_tokens=g.n_prompt,
                completion_tokens=len(g.token_ids),
                meta={
                    **dict(item.meta),
                    "eviction": cfg.label(),
                    "kv_keep": g.kv_keep,
                    "peak_kv_tokens": g.peak_kv_tokens,
                    "sparse_steps": g.sparse_steps,
                    "engine": "transformers-dense-gguf",
                },
            )
        )
        if progress is not None:
            progress(i, len(items))
    return records


def achieved_keep(records: Sequence[QualityRecord]) -> float:
    """The point's kv_keep: the mean over items of what each kept; under top-k, the mean over all
    decode steps of the share of keys read (an answer given by the prefill alone has none)."""
    steps = sum(r.meta.get("sparse_steps", 0) for r in records)
    if steps:
        return sum(r.meta["kv_keep"] * r.meta.get("sparse_steps", 0) for r in records) / steps
    return sum(r.meta["kv_keep"] for r in records) / len(records)


def eviction_sweep(
    model: Any,
    tok: Any,
    items: Sequence[QualityItem],
    configs: Sequence[EvictionConfig],
    ppl_text: str | None = None,
    on_point: Callable[[EvictionPoint], None] | None = None,
) -> list[EvictionPoint]:
    """Every config on the same items (and the same perplexity text)."""
    points = []
    per_token = kv_bytes_per_token(model)
    for cfg in configs:
        t0 = time.monotonic()
        recs = run_items_hf(model, tok, items, cfg) if items else []
        p = perplexity(model, tok, ppl_text, cfg) if ppl_text else None
        point = EvictionPoint(
            label=cfg.label(),
            policy=cfg.policy,
            keep=1.0 if cfg.reference else cfg.keep,
            chunk=cfg.chunk,
            kv_keep=achieved_keep(recs) if recs else (p.kv_keep if p else 1.0),
            peak_kv_tokens=max([r.meta["peak_kv_tokens"] for r in recs] + ([p.peak_kv_tokens] if p else [])),
            kv_bytes_per_token=per_token,
            accuracy=summarize(recs).strict if recs else None,
            ppl=p.ppl if p else None,
            seconds=time.monotonic() - t0,
            records=tuple(recs),
        )
        points.append(point)
        if on_point is not None:
            on_point(point)
    return points


__all__ = ["EvictionPoint", "achieved_keep", "eviction_sweep", "kv_bytes_per_token", "run_items_hf"]
