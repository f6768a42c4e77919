"""The sweep's points that the batch kernel does not run, each simulated event by event (simulate.des): a shared
prefix, a pool of decode engines (and a disaggregated configuration's pools), a utilization load's rate, and a
trace replayed."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from pareto_atlas.simulate.api import METRICS
from pareto_atlas.simulate.cost_model import prefill_coeffs
from pareto_atlas.simulate.kernels import CV, POLICIES, lone_prefill_s, run_batch
from pareto_atlas.simulate.params import CalibParams
from pareto_atlas.simulate import des
from pareto_atlas.simulate.space import Workload
from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.spec.think import SEED, think_times


def _shared(
    c,
    c_pf,
    n_pf: int,
    wl: Workload,
    k: Knobs,
    policy: int,
    kv_cap: float,
    conc: int,
    rate: float,
    think: float,
    replay: bool,
    n_requests: int,
    slo: dict,
    seed: int,
    chunk: int,
    slot_cache: bool = False,
) -> tuple[np.ndarray, float, float]:
    """One point of a workload that shares prefixes: its requests (simulate.prefix_cache.shared_load),
    the tokens its prefix cache serves where the knobs turn one on, and one run of the DES under the
    row's load (one replica's share of a trace). Returns METRICS, peak KV tokens and the hit rate.

    The cache is a pool of blocks (vLLM, SGLang, TensorRT-LLM), or with slot_cache llama.cpp's slots,
    each reusing its own last sequence to the token (prefix_cache.slot_cached_tokens): which slot a
    request finds idle depends on the simulated times, so the two run in turn from the pool's guess
    until they agree (prefix_cache.settle_slots, as the held-out benchmark predicts llama.cpp's anchors)."""
    from pareto_atlas.simulate.prefix_cache import cache_tokens, cached_tokens, hit_rate, settle_slots, shared_load

    pauses = None
    width = max(conc, k.slots)
    if replay:
        idx = np.arange(0, len(wl.trace), k.replicas)
        trace = tuple(wl.trace[i] for i in idx)
        blocks = tuple(wl.trace_blocks[i] for i in idx) if wl.trace_blocks else ()
        load = shared_load(wl.share, blocks, wl.prompt_tokens, wl.output_tokens, len(trace), 1, trace)
        arrivals = des.trace(np.array([t for t, _, _ in trace]), load.prompt, load.output)
    else:
        load = shared_load(wl.share, (), wl.prompt_tokens, wl.output_tokens, n_requests, width)
        if conc > 0:
            mean = lone_prefill_s(c_pf, float(wl.prompt_tokens)) if think < 0 else think
            pauses = think_times(1.0, n_requests, SEED) * mean if conc >= 2 and mean > 0 else None
            arrivals = des.Arrivals(np.zeros(n_requests), load.prompt, load.output, conc, pauses)
        else:
            gaps = np.random.default_rng(seed).exponential(1.0 / rate, n_requests)
            arrivals = des.Arrivals(np.cumsum(gaps) - gaps[0], load.prompt, load.output)

    def simulate(hits: np.ndarray | None) -> des.DesResult:
        return des.run(
            c,
            arrivals,
            POLICIES[policy],
            k.slots,
            chunk,
            kv_cap,
            slo,
            seed,
            prefill_c=c_pf,
            prefill_workers=n_pf,
            cached=hits,
        )

    cached = None
    if k.prefix_cache and k.eviction == "none" and k.kv_keep == 1.0:
        room = cache_tokens(kv_cap, k.slots, float(np.mean(load.prompt) + np.mean(load.output)))
        cached = cached_tokens(load, room)
    res = simulate(cached)
    if cached is not None and slot_cache:
        # a sharing pattern's requests token by token (llama.cpp reuses to the token); a trace's in its hash blocks
        if replay:
            slot = load
        else:
            slot = shared_load(wl.share, (), wl.prompt_tokens, wl.output_tokens, n_requests, width, block=1)
        cached, res = settle_slots(simulate, res, cached, slot, k.slots, c, 0 if replay else conc, pauses)
    rate_hit = hit_rate(cached, load.prompt) if cached is not None else 0.0
    return np.array([res.summary[m] for m in METRICS]), res.peak_kv_tokens, rate_hit


def pools(model, hw, k: Knobs, p: CalibParams, accept: float, c: np.ndarray) -> tuple[np.ndarray, int, int]:
    """A disaggregated configuration's pools: (its prefill workers' coefficient vector, how many, how
    many decode engines); the decode vector, one and one for every other policy."""
    if k.batching != "disagg":
        return c, 1, 1
    return prefill_coeffs(model, hw, k, p, accept=accept), k.prefill_workers, k.decode_workers


def _pooled(
    c,
    c_pf,
    n_pf: int,
    n_dw: int,
    slots: int,
    kv_cap: float,
    conc: int,
    rate: float,
    think: float,
    prompt: int,
    output: int,
    n_requests: int,
    slo: dict,
    seed: int,
) -> tuple[np.ndarray, float]:
    """One point with a pool of decode engines (kernels.pool, outside the batch kernel): its METRICS and
    peak KV tokens, under the load the batch kernel would have drawn (closed loop with its pauses, or Poisson)."""
    if conc > 0:
        mean = lone_prefill_s(c_pf, float(prompt)) if think < 0 else think
        pauses = think_times(1.0, n_requests, SEED) * mean if conc >= 2 and mean > 0 else None
        a = des.closed_loop(conc, n_requests, prompt, output, pauses)
    else:
        a = des.poisson(rate, n_requests, prompt, output, seed)
    res = des.run(
        c, a, "disagg", slots, 0, kv_cap, slo, seed, prefill_c=c_pf, prefill_workers=n_pf, decode_workers=n_dw
    )
    return np.array([res.summary[m] for m in METRICS]), res.peak_kv_tokens


def _utilization_rates(
    C,
    policy,
    slots,
    chunk,
    prompt,
    output,
    kv_cap,
    util,
    shape,
    n_requests,
    seed,
    C_pf,
    n_pf,
    n_dw,
    shared: np.ndarray | None = None,
    shared_run: Callable[[int, np.ndarray, np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    """Per row with a utilization load: that fraction of its configuration's capacity, in requests per
    second: the completion rate of a closed loop of as many clients as it has slots (no pauses).
    Simulated once per configuration and workload (`shape`: their index; the first such row runs it),
    without step jitter, each run at its row's own seed as the sweep's are, so a sharded sweep (whose
    shards keep a configuration's rows together) gets the same rates.

    A row whose workload shares prefixes (`shared`) has its capacity from `shared_run(row, c, c_pf)`: the
    METRICS of that closed loop on the workload's own requests with the prefix cache its knobs turn on
    (_shared: the block pool, or llama.cpp's slots), as its closed-loop points are simulated; the batch
    kernel's flat prompts and no cache would put it at a share of another configuration's capacity."""
    u = np.flatnonzero(util > 0)
    first: dict[int, int] = {}
    for r in u:
        first.setdefault(int(shape[r]), int(r))
    runs = np.array(sorted(first.values()), np.int64)
    c = C.copy()
    c[:, CV] = 0.0
    c_pf = C_pf.copy()
    c_pf[:, CV] = 0.0
    out = np.full((len(C), len(METRICS)), np.nan)
    cap_kv = np.full(len(C), np.inf)
    shared = np.zeros(len(C), bool) if shared is None else shared
    alone = (n_dw[runs] > 1) | (shared[runs] & np.isfinite(kv_cap[runs]))  # run outside the batch kernel
    cap_kv[runs] = np.where(alone, np.inf, kv_cap[runs])  # the kernel passes over infinite caps
    run_batch(
        c,
        policy,
        slots,
        chunk,
        slots.copy(),
        np.zeros(len(C)),
        prompt,
        output,
        cap_kv,
        n_requests,
        math.inf,
        math.inf,
        seed,
        out,
        np.zeros(len(C)),
        np.zeros(len(C)),
        think_times(1.0, n_requests, SEED),
        c_pf,
        n_pf,
    )
    for r in runs[n_dw[runs] > 1]:  # a pool of decode engines: as many clients as the pool has slots
        out[r], _ = _pooled(
            c[r],
            c_pf[r],
            int(n_pf[r]),
            int(n_dw[r]),
            int(slots[r]),
            kv_cap[r],
            int(slots[r] * n_dw[r]),
            0.0,
            0.0,
            int(prompt[r]),
            int(output[r]),
            n_requests,
            {},
            seed + int(r),
        )
    for r in runs[shared[runs] & np.isfinite(kv_cap[runs]) & (n_dw[runs] == 1)]:
        out[r] = shared_run(int(r), c[r], c_pf[r])
    capacity = out[:, METRICS.index("throughput_tok_s")] / output
    return util[u] * capacity[[first[int(shape[r])] for r in u]]


def _replay(
    c: np.ndarray,
    wl: Workload,
    policy: int,
    slots: int,
    chunk: int,
    kv_cap: float,
    slo: dict,
    seed: int,
    c_pf: np.ndarray,
    n_pf: int,
    replicas: int = 1,
) -> tuple[np.ndarray, float]:
    """One point replaying its workload's trace: its METRICS (one replica's, taking every replicas-th
    request in turn; the sweep multiplies throughput back) and peak KV tokens."""
    t, p, o = (np.array(col)[::replicas] for col in zip(*wl.trace))
    res = des.run(
        c, des.trace(t, p, o), POLICIES[policy], slots, chunk, kv_cap, slo, seed, prefill_c=c_pf, prefill_workers=n_pf
    )
    return np.array([res.summary[m] for m in METRICS]), res.peak_kv_tokens
