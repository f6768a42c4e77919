"""Disaggregated serving with a pool of decode engines: prefill workers, then `decode_workers` decode
engines, each request to the least-loaded one, events in time order across the engines.

loop.run_kernel runs one decode engine and jumps over runs of decode steps; with several engines a
jump of one would pass events of the others, so this loop takes one step at a time. A decode engine
admits a request while its KV holds every admitted sequence at full length (prompt and output), so
it never preempts (TensorRT-LLM's GUARANTEED_NO_EVICT; vLLM's preemption is not modelled here).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from pareto_atlas.simulate.kernels._cache import CACHE
from pareto_atlas.simulate.kernels.layout import ACC, BURST_GAP_S, CV, DRAFT_P, K, O_REQ
from pareto_atlas.simulate.kernels.loop import _enqueue
from pareto_atlas.simulate.kernels.policies import _prefill_one
from pareto_atlas.simulate.kernels.rand import _accepted, _noise
from pareto_atlas.simulate.kernels.step import step_time


@njit(cache=CACHE)
def run_pool_kernel(
    c,
    arrival,
    prompt,
    output,
    slots,
    concurrency,
    kv_cap,
    seed,
    first_t,
    finish_t,
    think,
    c_pf,
    prefill_workers,
    decode_workers,
):
    """As loop.run_kernel with policy disagg, for `decode_workers` decode engines of `slots` sequences
    and `kv_cap` KV tokens each. Returns (steps, peak KV tokens over the pool, preemptions = 0)."""
    np.random.seed(seed)
    n = arrival.shape[0]
    o_req = c[O_REQ]
    if concurrency <= 0:
        for i in range(n):
            arrival[i] += o_req
    k = int(c[K])
    acc = c[ACC]
    p_draft = c[DRAFT_P]
    spec_on = k > 0 and p_draft > 0.0
    need_pf = prompt.copy()  # _enqueue keeps it in step with the requests it reorders
    ready = arrival.copy()
    thinks = think.shape[0] > 0
    if concurrency > 0:
        n_known = 0
        for i in range(min(concurrency, n)):
            t = i * BURST_GAP_S + (think[i] if thinks else 0.0) + o_req
            _enqueue(arrival, ready, prompt, output, need_pf, 0, n_known, t)
            n_known += 1
    else:
        n_known = n
    for i in range(n):
        first_t[i] = -1.0
        finish_t[i] = -1.0
    pf_free = np.zeros(max(prefill_workers, 1))
    pf_next = 0
    d_n = max(decode_workers, 1)
    # per decode engine: its running sequences (request, tokens left, KV held), queue of routed
    # requests (FIFO), KV reserved at full length and held, its clock, and whether a step is under way
    run = np.empty((d_n, slots), np.int64)
    s_left = np.empty((d_n, slots), np.int64)
    s_kv = np.empty((d_n, slots), np.int64)
    nrun = np.zeros(d_n, np.int64)
    queue = np.empty((d_n, n), np.int64)
    q_head = np.zeros(d_n, np.int64)
    q_tail = np.zeros(d_n, np.int64)
    reserved = np.zeros(d_n)
    held = np.zeros(d_n, np.int64)
    clock = np.zeros(d_n)
    stepping = np.zeros(d_n, np.bool_)
    emitted = np.ones(slots, np.int64)
    nxt = 0  # the next prefilled request to route
    now = 0.0
    done = 0
    steps = 0
    peak = 0
    while done < n:
        # The prefill pool (as in run_kernel): FCFS, each request to the worker free first.
        while pf_next < n_known:
            i = pf_next
            if thinks and arrival[i] > now:
                break
            _prefill_one(c, c_pf, i, float(prompt[i]), arrival, ready, prompt, first_t, pf_free)
            pf_next += 1
        # The earliest event: a request's KV arriving to be routed, or an engine's step boundary.
        t_route = ready[nxt] if nxt < pf_next else np.inf
        e = -1
        for w in range(d_n):
            if (stepping[w] or q_head[w] < q_tail[w]) and (e < 0 or clock[w] < clock[e]):
                e = w
        t_step = clock[e] if e >= 0 else np.inf
        if t_route <= t_step and t_route < np.inf:
            now = t_route
            i = nxt
            nxt += 1
            if output[i] <= 1:  # its one token came from the prefill worker
                finish_t[i] = first_t[i]
                done += 1
                if concurrency > 0 and n_known < n:
                    t = first_t[i] + (think[n_known] if thinks else 0.0) + o_req
                    _enqueue(arrival, ready, prompt, output, need_pf, pf_next, n_known, t)
                    n_known += 1
                continue
            # least loaded: fewest sequences running and waiting (the lowest index among equals)
            w = 0
            for v in range(1, d_n):
                if nrun[v] + q_tail[v] - q_head[v] < nrun[w] + q_tail[w] - q_head[w]:
                    w = v
            queue[w, q_tail[w]] = i
            q_tail[w] += 1
            if not stepping[w]:
                clock[w] = max(clock[w], now)
            continue
        if e < 0:
            if pf_next < n_known:  # a pausing client's request not yet sent
                now = arrival[pf_next]
                continue
            break
        now = clock[e]
        if stepping[e]:
            # The step that ends now: every running sequence emits its tokens; finished ones leave.
            m = nrun[e]
            if spec_on:
                _accepted(m, k, acc, p_draft, emitted)
            w_out = 0
            for j in range(m):
                cnt = min(emitted[j] if spec_on else 1, s_left[e, j])
                s_left[e, j] -= cnt
                s_kv[e, j] += cnt
                held[e] += cnt
                if s_left[e, j] <= 0:
                    i = run[e, j]
                    finish_t[i] = now
                    reserved[e] -= prompt[i] + output[i]
                    held[e] -= s_kv[e, j]
                    done += 1
                    if concurrency > 0 and n_known < n:
                        t = now + BURST_GAP_S + (think[n_known] if thinks else 0.0) + o_req
                        _enqueue(arrival, ready, prompt, output, need_pf, pf_next, n_known, t)
                        n_known += 1
                else:
                    run[e, w_out] = run[e, j]
                    s_left[e, w_out] = s_left[e, j]
                    s_kv[e, w_out] = s_kv[e, j]
                    w_out += 1
            nrun[e] = w_out
            stepping[e] = False
        # Admission at the step boundary: routed requests whose KV has arrived, in order.
        while nrun[e] < slots and q_head[e] < q_tail[e]:
            i = queue[e, q_head[e]]
            if ready[i] > now or (nrun[e] > 0 and reserved[e] + prompt[i] + output[i] > kv_cap):
                break
            q_head[e] += 1
            j = nrun[e]
            run[e, j] = i
            s_left[e, j] = output[i] - 1
            s_kv[e, j] = prompt[i]
            reserved[e] += prompt[i] + output[i]
            held[e] += prompt[i]
            nrun[e] += 1
        if nrun[e] == 0:
            if q_head[e] < q_tail[e]:
                clock[e] = ready[queue[e, q_head[e]]]  # idle until the next KV arrives
            continue
        pool_kv = 0
        for w in range(d_n):
            pool_kv += held[w]
        peak = max(peak, pool_kv)
        b = float(nrun[e])
        ctx = 0.0
        for j in range(nrun[e]):
            ctx += s_kv[e, j]
        clock[e] = now + step_time(c, b, ctx, 0.0, 0.0, 0.0, b) * _noise(c[CV], 1.0)
        stepping[e] = True
        steps += 1
    for i in range(n):
        arrival[i] -= o_req
    return steps, float(peak), 0
