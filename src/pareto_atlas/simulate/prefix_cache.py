"""The prefix cache: which prompt tokens of each request a block cache already holds when it arrives.

Engines keep the KV blocks of what they have computed after a request leaves (vLLM's automatic
prefix caching, SGLang's radix cache, llama.cpp's slot prompt cache) and a later request whose
prompt starts with the same blocks skips their prefill. Modelled here as a block-level LRU cache:

- capacity: the KV tokens the configuration's memory holds (simulate.memory: after the weights, at
  its KV dtype, so a quantized KV cache holds more blocks) less what a full running batch holds
  (slots x the workload's mean sequence), so more slots leave less room; never below zero;
- a request's hit: its leading prompt blocks present, in a chain (a block counts only after every
  block before it hit), at most its prompt less one token (the last one is always computed, for its
  logits); its blocks (prompt and answer) then enter the cache as the most recent, evicting the
  least recently used;
- KV eviction (kv_keep < 1) keeps a subset of each prefix's entries: not the prefix's KV, so not
  reusable exactly: no hits (the same model of memory, not a rule per pair).

llama.cpp's server is another cache (slot_cached_tokens): no pool of blocks, each slot reuses the last
sequence it served, to the token, and which slot a request gets depends on which are idle when it
arrives, so it needs the simulation's times: settle_slots runs the two in turn (the atlas's llama.cpp
points, simulate.des_points, and the held-out benchmark alike).

What the block LRU approximates: the cache is consulted in send order, before the engine runs, so a request
sees every block of the requests sent before it, even one still prefilling (vLLM shares such blocks
too; llama.cpp waits for nothing and may miss them); and running sequences' own blocks are
counted as the reserved batch, not tracked one by one.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pareto_atlas.simulate.des import DesResult
from pareto_atlas.simulate.kernels.layout import BURST_GAP_S, O_REQ
from pareto_atlas.simulate.kernels.slots import slot_reuse
from pareto_atlas.spec.sharing import BLOCK_TOKENS, Sharing, requests
from pareto_atlas.spec.trace import HASH_BLOCK_TOKENS


@dataclass(frozen=True)
class SharedLoad:
    """A sharing workload's requests in send order: lengths, block ids, the tokens one block holds."""

    prompt: np.ndarray  # int64
    output: np.ndarray  # int64
    blocks: tuple[tuple[int, ...], ...]
    block: int


def shared_load(
    share: Sharing | None,
    trace_blocks: tuple[tuple[int, ...], ...],
    prompt: int,
    output: int,
    n: int,
    width: int = 1,
    trace: tuple[tuple[float, int, int], ...] = (),
    block: int = BLOCK_TOKENS,
) -> SharedLoad:
    """The first n requests of a workload that shares: its trace's rows with their hash_ids (blocks
    of HASH_BLOCK_TOKENS), or its sharing pattern with `width` sessions side by side, in blocks of
    `block` tokens (1: token by token, as llama.cpp reuses)."""
    if trace_blocks:
        rows = trace[:n]
        return SharedLoad(
            np.array([p for _, p, _ in rows], np.int64),
            np.array([o for _, _, o in rows], np.int64),
            tuple(trace_blocks[:n]),
            HASH_BLOCK_TOKENS,
        )
    if share is None:
        raise ValueError("shared_load: the workload states no sharing (no share, no hash_ids)")
    r = requests(share, prompt, output, n, width, block)
    return SharedLoad(np.array(r.prompt, np.int64), np.array(r.output, np.int64), r.blocks, r.block)


def cache_tokens(kv_cap_tokens: float, slots: int, mean_seq_tokens: float) -> float:
    """KV tokens left for cached prefixes: the configuration's KV capacity less a full running batch."""
    if not np.isfinite(kv_cap_tokens):
        return 0.0
    return max(0.0, float(kv_cap_tokens) - slots * float(mean_seq_tokens))


def cached_tokens(load: SharedLoad, capacity_tokens: float) -> np.ndarray:
    """Per request (send order): prompt tokens served from an LRU cache of capacity_tokens."""
    cap = int(capacity_tokens // load.block)
    lru: OrderedDict[int, None] = OrderedDict()
    out = np.zeros(len(load.prompt), np.int64)
    for i, (p, blocks) in enumerate(zip(load.prompt.tolist(), load.blocks)):
        hit = 0
        for b in blocks:
            if b not in lru:
                break
            hit += 1
        out[i] = min(hit * load.block, p - 1)
        if cap <= 0:
            continue
        for b in blocks:
            if b in lru:
                lru.move_to_end(b)
            else:
                lru[b] = None
                if len(lru) > cap:
                    lru.popitem(last=False)
    return out


def slot_cached_tokens(
    load: SharedLoad, start: np.ndarray, finish: np.ndarray, slots: int, warmup: int = 0, similarity: float = 0.1
) -> np.ndarray:
    """Per request (send order) after the first `warmup`: prompt tokens llama.cpp's server reuses from
    its slots' own KV, with its prompt cache on and no host-RAM cache (cache_ram 0, as the campaign
    runs it). Each slot keeps the last sequence it served (prompt and answer); a request reuses the
    longest common prefix of that sequence and its prompt (to the block of `load`: 1 is token-exact),
    less its last token. Which slot it gets is llama.cpp's choice among the slots idle when it arrives
    (server_context::get_available_slot): the one whose sequence shares the largest part of its prompt,
    where that part exceeds `similarity` (slot_prompt_similarity, 0.1 by default), else the least
    recently used; with none idle it waits for the first one freed. So two groups on two slots miss
    whenever a request finds only the other group's slot free: what a shared pool of blocks never does.
    `start`, `finish`: each scored request's arrival and end (s, a simulation's: simulate.des); the
    warm-ups ran one at a time before them."""
    n = len(load.prompt)
    if len(start) != n - warmup or len(finish) != n - warmup or slots < 1:
        raise ValueError(
            f"slot_cached_tokens: {len(start)} starts and {len(finish)} ends for {n - warmup} scored requests, "
            f"slots {slots} >= 1"
        )
    tok, length = _rows(load.blocks)
    t0 = float(np.min(start)) if n > warmup else 0.0
    ahead = t0 - (warmup - np.arange(warmup, dtype=float))  # the warm-ups: one at a time, before
    arrive = np.concatenate([ahead, np.asarray(start, float)])
    end = np.concatenate([ahead + 0.5, np.asarray(finish, float)])
    out = np.zeros(n, np.int64)
    order = np.argsort(arrive, kind="stable")  # by arrival, ties in send order
    slot_reuse(tok, length, order, arrive, end, load.prompt.astype(np.int64), slots, similarity, load.block, out)
    return out[warmup:]


_ROWS: dict[int, tuple[tuple, np.ndarray, np.ndarray]] = {}  # id(blocks): (blocks, rows, lengths)


def _rows(blocks: tuple[tuple[int, ...], ...]) -> tuple[np.ndarray, np.ndarray]:
    """Every sequence as a row of block ids, padded with an id none has, and the lengths, with a last
    row for an empty slot: a slot's common prefix with a prompt is then its row's leading run of matches
    (kernels.slots). Kept for the last 32 `blocks` (64 MiB at most) by identity (spec.sharing.requests
    caches its requests, so a sweep's points of one workload pass the same tuple, pass after pass)."""
    hit = _ROWS.get(id(blocks))
    if hit is not None and hit[0] is blocks:
        return hit[1], hit[2]
    length = np.array([len(b) for b in blocks] + [0], np.int64)
    flat = np.fromiter((x for b in blocks for x in b), np.int64, int(length.sum()))
    tok = np.full((len(length), max(1, int(length.max()))), int(flat.min()) - 1 if len(flat) else -1, np.int64)
    tok[np.arange(len(length)).repeat(length), np.concatenate([np.arange(k) for k in length])] = flat
    while _ROWS and (len(_ROWS) >= 32 or sum(v[1].nbytes for v in _ROWS.values()) + tok.nbytes > 64 << 20):
        _ROWS.pop(next(iter(_ROWS)))  # the oldest: a sweep's points of one workload come together
    _ROWS[id(blocks)] = (blocks, tok, length)  # holding blocks keeps its id from being reused
    return tok, length


SLOT_PASSES = 4  # slot model and simulation in turn: they settle in one or two


def settle_slots(
    simulate: Callable[[np.ndarray], DesResult],
    res: DesResult,
    cached: np.ndarray,
    load: SharedLoad,
    slots: int,
    c: np.ndarray,
    conc: int,
    think: np.ndarray | None,
    warmup: int = 0,
) -> tuple[np.ndarray, DesResult]:
    """llama.cpp's slot cache on a simulation's times, until the two agree: `res` is `simulate(cached)`
    (a first guess, e.g. the block pool's), and each pass gives the slot model (slot_cached_tokens over
    `load`, warm-ups first) the times each request reached the engine (its send plus c[O_REQ]) and
    finished, then simulates again with the tokens it found cached, at most SLOT_PASSES times (they
    settle in one or two; a pass that changes nothing ends it). `conc`, `think`: the load's clients
    (0: an open loop) and pauses, as by_request pairs them. Returns (cached, its simulation)."""
    for _ in range(SLOT_PASSES):
        start, end = by_request(res, conc, think)
        again = slot_cached_tokens(load, start + c[O_REQ], end, slots, warmup)
        if np.array_equal(again, cached):
            break
        cached = again
        res = simulate(cached)
    return cached, res


def by_request(res: DesResult, conc: int, think: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(send, finish) of each request in the order it was handed out (a closed loop's clients take the
    next request as each finishes, then pause its think time), from a simulation that keeps requests
    in the order they arrive (simulate.kernels.loop: a later request with a shorter pause arrives first).
    An open loop's requests already arrive in their order."""
    n = len(res.arrival)
    if conc <= 0:
        return res.arrival, res.finish_t
    pause = np.zeros(n) if think is None else np.asarray(think, float)
    done = np.sort(res.finish_t)
    sent = np.array(
        [i * BURST_GAP_S + pause[i] if i < conc else done[i - conc] + BURST_GAP_S + pause[i] for i in range(n)]
    )
    where = np.empty(n, np.int64)
    where[np.argsort(sent, kind="stable")] = np.arange(n)  # request i arrived where-th
    if not np.allclose(res.arrival[where], sent, atol=1e-6):
        raise RuntimeError("by_request: the simulation's sends differ from its closed loop's; cannot pair them")
    return res.arrival[where], res.finish_t[where]


def hit_rate(cached: np.ndarray, prompt: np.ndarray) -> float:
    """Share of prompt tokens served from the cache."""
    return float(np.sum(cached) / max(1, np.sum(prompt)))


def measured_twin_cached(
    share: Sharing, prompt: int, output: int, n: int, warmup: int, width: int, kv_cap_tokens: float, slots: int
) -> np.ndarray:
    """Per measured request, the prompt tokens the block cache serves for an anchor that sent `warmup`
    requests of the pattern first (one at a time, unscored: they only fill the cache) and then n more,
    `width` sessions side by side, on a configuration of `slots` sequences and kv_cap_tokens of KV."""
    load = shared_load(share, (), prompt, output, warmup + n, width)
    room = cache_tokens(kv_cap_tokens, slots, float(np.mean(load.prompt) + np.mean(load.output)))
    return cached_tokens(load, room)[warmup:]
