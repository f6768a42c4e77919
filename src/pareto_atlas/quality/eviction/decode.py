"""Greedy decoding and perplexity with a KV cache pruned by an eviction policy, or read through
top-k sparse attention (torch).

A manual loop over HF's DynamicCache: the prompt is prefilled in chunks and the cache is cut to
the policy's budget after every chunk (so KV memory really stays bounded), then during decoding
(StreamingLLM, H2O) or not (SnapKV, PyramidKV). Each layer is cut to its own budget, which
PyramidKV makes differ between layers; transformers builds one attention mask for all layers from
layer 0's length, so such runs use our attention function (`sparse.py`), which fits the mask to
each layer's own cache. Kept keys carry the rotary phase of their original
positions, so new tokens get their true `position_ids`, while the shorter cache's length (not
the positions) builds the attention mask. Attention weights (eager attention) feed H2O's
accumulated scores and SnapKV's (and PyramidKV's) observation window; query heads are summed onto their shared KV head (GQA).
Top-k sparse attention (`sparse.py`) keeps the whole cache and sparsifies each decode step's
attention (and, for perplexity, every teacher-forced token's), never the prefill of a prompt.
"""

from __future__ import annotations

import math
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Sequence

from .model import require_torch
from .policies import EvictionConfig, select
from .sparse import TopK, sparse_attention


@dataclass(frozen=True)
class GenResult:
    text: str
    token_ids: tuple[int, ...]
    n_prompt: int
    peak_kv_tokens: int  # largest cache length per head during the run (mean over layers)
    kv_keep: float  # cache length (mean over layers) / tokens a full cache would hold, at the end;
    # topk: keys read / keys cached, averaged over the decode steps
    seconds: float
    sparse_steps: int = 0  # decode steps run under top-k attention (the first token comes from the prefill)


@dataclass(frozen=True)
class PplResult:
    nll: float  # mean negative log-likelihood per predicted token (nats)
    ppl: float
    n_tokens: int
    peak_kv_tokens: int
    kv_keep: float


class PrunedCache:
    """HF DynamicCache plus, per layer, each entry's position and scores ([kv_heads, L]), cut to
    each layer's budget (`EvictionConfig.budgets`; None: the full cache)."""

    def __init__(self, model: Any, cfg: EvictionConfig, budgets: Sequence[int] | None):
        torch = require_torch()
        from transformers import DynamicCache

        self.torch, self.cfg, self.budgets = torch, cfg, budgets
        self.cache = DynamicCache(config=model.config)
        c = model.config
        self.n_layers = c.num_hidden_layers
        self.kv_heads = c.num_key_value_heads
        self.group = c.num_attention_heads // c.num_key_value_heads
        self.pos: list[Any] = [None] * self.n_layers
        self.acc: list[Any] = [None] * self.n_layers
        self.peak = 0
        self.seen = 0  # tokens forwarded so far: what a full cache would hold

    def __len__(self) -> int:
        """Layer 0's cache length: what transformers builds the attention mask from."""
        return self.cache.get_seq_length()

    @property
    def ragged(self) -> bool:
        """Layers cut to different lengths: the attention mask must be fitted to each (PyramidKV)."""
        return self.budgets is not None and len(set(self.budgets)) > 1

    def lengths(self) -> list[int]:
        """Entries per head cached in each layer."""
        return [0 if p is None else int(p.shape[1]) for p in self.pos]

    def held(self) -> int:
        """Entries per head, averaged over the layers (rounded up): the KV memory held, in tokens."""
        return -(-sum(self.lengths()) // self.n_layers)

    def _grouped(self, attn: Any) -> Any:
        # [1, n_heads, q, kv] -> [kv_heads, q, kv]: sum the query heads sharing a KV head
        a = attn[0].float()
        return a.reshape(self.kv_heads, self.group, a.shape[1], a.shape[2]).sum(1)

    def after_forward(self, start: int, q: int, attentions: Sequence[Any] | None, compress: bool) -> None:
        torch = self.torch
        new_pos = torch.arange(start, start + q).expand(self.kv_heads, q)
        obs = [None] * self.n_layers
        for layer in range(self.n_layers):
            self.pos[layer] = new_pos.clone() if self.pos[layer] is None else torch.cat([self.pos[layer], new_pos], 1)
            if attentions is not None:
                a = self._grouped(attentions[layer])  # [kvh, q, kv]
                got = a.sum(1)  # attention received, [kvh, kv]
                prev = self.acc[layer]
                self.acc[layer] = got if prev is None else torch.cat([prev, torch.zeros(self.kv_heads, q)], 1) + got
                obs[layer] = a[:, -self.cfg.window :, :].sum(1)
        self.peak = max(self.peak, self.held())
        self.seen = max(self.seen, start + q)
        if compress and self.budgets is not None:
            self._compress(obs)

    def _compress(self, obs: list[Any]) -> None:
        torch = self.torch
        for layer, budget in enumerate(self.budgets):
            if self.pos[layer].shape[1] <= budget:
                continue
            acc = self.acc[layer].numpy() if self.acc[layer] is not None else None
            o = obs[layer].numpy() if obs[layer] is not None else None
            idx = torch.from_numpy(select(self.cfg, budget, self.pos[layer].numpy(), acc, o))  # [kvh, b]
            lay = self.cache.layers[layer]
            heads = torch.arange(self.kv_heads)[:, None]
            lay.keys = lay.keys[0][heads, idx].unsqueeze(0)  # [1, kvh, b, d]
            lay.values = lay.values[0][heads, idx].unsqueeze(0)
            self.pos[layer] = torch.gather(self.pos[layer], 1, idx)
            if self.acc[layer] is not None:
                self.acc[layer] = torch.gather(self.acc[layer], 1, idx)


def _chunks(n: int, chunk: int) -> list[tuple[int, int]]:
    """Chunk bounds with the remainder FIRST, so the last chunk (the question) is whole: SnapKV's
    observation window then sees the end of the prompt, as in the paper. chunk 0: one chunk."""
    if chunk == 0 or chunk >= n:
        return [(0, n)]
    first = n % chunk or min(n, chunk)
    bounds = [(0, first)]
    while bounds[-1][1] < n:
        s = bounds[-1][1]
        bounds.append((s, min(n, s + chunk)))
    return bounds


def _forward(model: Any, state: PrunedCache, ids: Any, start: int, compress: bool, topk: TopK | None = None) -> Any:
    torch = state.torch
    q = ids.shape[1]
    c = len(state)
    # transformers 5.24 takes `cache=` and derives the mask from the cache length (c) itself;
    # position_ids carry the true positions, which differ from c once entries are evicted.
    # `topk` reaches the attention function (sparse.topk_attention) through the forward's kwargs.
    extra = {} if topk is None else {"topk": topk}
    out = model(
        input_ids=ids,
        position_ids=torch.arange(start, start + q)[None],
        attention_mask=torch.ones(1, c + q, dtype=torch.long),
        cache=state.cache,
        use_cache=True,
        output_attentions=state.cfg.needs_attention,
        **extra,
    )
    state.after_forward(start, q, out.attentions if state.cfg.needs_attention else None, compress)
    return out.logits


def _attention(model: Any, state: PrunedCache) -> Any:
    """Our attention function where the run needs it (top-k reads, or layers of unequal length),
    the model's own eager attention otherwise."""
    return sparse_attention(model) if state.cfg.sparse or state.ragged else nullcontext()


def _state(model: Any, cfg: EvictionConfig, n_prompt: int) -> PrunedCache:
    return PrunedCache(model, cfg, cfg.budgets(n_prompt, model.config.num_hidden_layers))


def generate(
    model: Any, tok: Any, prompt: str, cfg: EvictionConfig, max_new_tokens: int = 16, stop: Sequence[str] = ("\n",)
) -> GenResult:
    """Greedy continuation of `prompt` under `cfg`. Under topk the prefill reads every key, so the
    first answer token is the full cache's; each later one comes from a sparse decode step."""
    torch = require_torch()
    t0 = time.monotonic()
    ids = tok(prompt, return_tensors="pt").input_ids
    n = ids.shape[1]
    state = _state(model, cfg, n)
    topk = TopK(cfg) if cfg.sparse else None
    out_ids: list[int] = []
    steps = 0
    with torch.no_grad(), _attention(model, state):
        for s, e in _chunks(n, cfg.chunk):
            logits = _forward(model, state, ids[:, s:e], s, compress=True)
        eos = tok.eos_token_id
        for step in range(max_new_tokens):
            nxt = int(logits[0, -1].argmax())
            if nxt == eos:
                break
            out_ids.append(nxt)
            text = tok.decode(out_ids, skip_special_tokens=True)
            if any(x and x in text for x in stop) or step == max_new_tokens - 1:
                break
            logits = _forward(
                model, state, torch.tensor([[nxt]]), n + step, compress=cfg.evicts_during_decode, topk=topk
            )
            steps += 1
    text = tok.decode(out_ids, skip_special_tokens=True)
    # Measured on the cache itself, not derived from the budget: SnapKV does not evict while
    # decoding, so its cache ends at budget + generated tokens, not at the budget.
    keep = min(1.0, state.held() / state.seen) if cfg.evicts else 1.0
    if topk is not None:
        keep = topk.fraction()
    return GenResult(
        text=text,
        token_ids=tuple(out_ids),
        n_prompt=n,
        peak_kv_tokens=state.peak,
        kv_keep=keep,
        seconds=time.monotonic() - t0,
        sparse_steps=steps if topk else 0,
    )


def perplexity(model: Any, tok: Any, text: str, cfg: EvictionConfig) -> PplResult:
    """Teacher-forced perplexity of `text` when each chunk attends to the pruned cache of the
    text before it plus itself: what eviction leaves for ordinary next-token prediction. Under topk
    every token's query reads its own top-k of the keys before it, as if it were being decoded."""
    torch = require_torch()
    ids = tok(text, return_tensors="pt").input_ids
    n = ids.shape[1]
    state = _state(model, cfg, n)
    topk = TopK(cfg) if cfg.sparse else None
    total, count = 0.0, 0
    with torch.no_grad(), _attention(model, state):
        for s, e in _chunks(n, cfg.chunk):
            logits = _forward(model, state, ids[:, s:e], s, compress=True, topk=topk)
            # logits at position t predict token t+1; the last one predicts the next chunk's first
            lp = torch.log_softmax(logits[0].float(), -1)
            tgt = ids[0, s + 1 : e + 1]
            total -= float(lp[: len(tgt)].gather(1, tgt[:, None]).sum())
            count += len(tgt)
    nll = total / max(1, count)
    keep = sum(state.budgets) / (state.n_layers * n) if cfg.evicts and state.budgets is not None else 1.0
    if topk is not None:
        keep = topk.fraction()
    return PplResult(nll=nll, ppl=math.exp(nll), n_tokens=count, peak_kv_tokens=state.peak, kv_keep=min(1.0, keep))
