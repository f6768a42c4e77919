"""The request-level simulation: one engine step at a time, with one inlined helper per batching policy.

It jumps over runs of identical decode steps in closed form, so a request costs O(1) events rather
than O(output tokens) loop turns. Policies (layout.POLICIES): static, continuous, chunked prefill,
SLO-aware, disaggregated (a prefill pool before the decode engine).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from pareto_atlas.simulate.kernels._cache import CACHE
from pareto_atlas.simulate.kernels.layout import (
    ACC,
    BURST_GAP_S,
    CHUNKED,
    CV,
    DEFAULT_CHUNK,
    DISAGG,
    DRAFT_P,
    K,
    MIXED,
    MIXED_OVERLAP,
    N_PLAIN,
    O_REQ,
    OVERLAID,
    Q,
    SGL_CLIP,
    SGL_DECAY,
    SGL_INIT_RATIO,
    SGL_MIN_RATIO,
    SGL_RETRACT_STEPS,
    SLO,
    STATIC,
    UNMIXED,
    WHOLE,
)
from pareto_atlas.simulate.kernels.policies import _budget_chunked, _budget_slo, _prefill_one
from pareto_atlas.simulate.kernels.rand import _accepted, _noise, _normal, _tokens_per_step
from pareto_atlas.simulate.kernels.step import _step_time, _upper_bound, prefill_pairs, step_time


@njit(cache=CACHE, inline="always")
def _enqueue(arrival, ready, prompt, output, need_pf, lo, at, t):
    # A closed-loop client's request, arriving at t, into slot `at`, keeping the requests not yet
    # taken (slots lo..at) in arrival order: with think times a later request can arrive first,
    # and the engine takes requests in the order they arrive. Without think times t is never
    # earlier than the queue's last, and this is a plain append.
    j = at
    while j > lo and arrival[j - 1] > t:
        arrival[j] = arrival[j - 1]
        ready[j] = ready[j - 1]
        prompt[j], prompt[j - 1] = prompt[j - 1], prompt[j]
        output[j], output[j - 1] = output[j - 1], output[j]
        need_pf[j], need_pf[j - 1] = need_pf[j - 1], need_pf[j]
        j -= 1
    arrival[j] = t
    ready[j] = t


@njit(cache=CACHE)
def run_kernel(
    c,
    arrival,
    prompt,
    output,
    policy,
    slots,
    chunk,
    tpot_target,
    concurrency,
    kv_cap,
    seed,
    first_t,
    finish_t,
    think,
    c_pf,
    prefill_workers,
    cached,
):
    """Simulate all requests; fills first_t / finish_t (seconds). Closed loop when concurrency > 0:
    arrival[] is then written as requests complete, each client sending its next request think[i]
    seconds after its last one finished (its first at think[i] from the start; think may be empty:
    no think time). A request reaches the engine c[O_REQ] seconds after its send: arrival[] holds the
    engine's times while it runs, and the sends again when it returns. Returns (steps, peak KV
    tokens, preemptions).

    Disaggregated (policy DISAGG): a pool of `prefill_workers` prefill workers, each running the
    coefficient vector c_pf (its own parallelism), one prompt at a time; a request goes to the worker
    free first (the least loaded), its first token leaves from there and its KV follows over the link
    (c[XFER] per prompt token) before the decode engine (vector c) can take it.

    cached[i] (empty: none): prompt tokens of request i whose KV a prefix cache holds when it arrives
    (simulate.prefix_cache): its prefill starts after them, attending to them, and its context
    holds them; a preempted request recomputes its whole prompt (its blocks may be gone by then)."""
    np.random.seed(seed)
    # An overlap scheduler forms a step's batch when the step before it starts: a request is
    # admitted only if it was there by then (sched_t), unless the engine was idle.
    overlap = policy >= N_PLAIN and policy != MIXED
    if overlap:
        policy = MIXED if policy == MIXED_OVERLAP else OVERLAID[policy - N_PLAIN]
    n = arrival.shape[0]
    o_req = c[O_REQ]
    if concurrency <= 0:
        for i in range(n):
            arrival[i] += o_req
    q = c[Q]
    k = int(c[K])
    acc = c[ACC]
    p_draft = c[DRAFT_P]
    spec_on = k > 0 and p_draft > 0.0
    # A request waiting for a slot (new, preempted, or out of the disaggregated prefill pool):
    # the prompt tokens it will prefill, the KV it brings, the tokens it has generated.
    need_pf = prompt.copy()
    if cached.shape[0] > 0:
        for i in range(n):
            need_pf[i] -= cached[i]
    kv = np.zeros(n, np.int64)
    gen = np.zeros(n, np.int64)
    # The running batch, slot by slot in admission order: request, tokens left to generate, KV
    # held, prompt tokens prefilled and still to prefill; this step's prefill chunk, and the tokens
    # the decoding sequences emit (in their order). Token counts are integers, so the running
    # totals below stay equal to sums over the batch, whatever the order of updates.
    run = np.empty(slots, np.int64)
    s_left = np.empty(slots, np.int64)
    s_kv = np.empty(slots, np.int64)
    s_pf = np.empty(slots, np.int64)
    s_to_pf = np.empty(slots, np.int64)
    take = np.zeros(slots, np.int64)
    emitted = np.ones(slots, np.int64)
    pre = np.empty(n, np.int64)
    ready = arrival.copy()
    nrun = 0
    npre = 0
    nxt = 0
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
    pf_next = 0  # the next request the prefill pool takes
    pf_free = np.zeros(max(prefill_workers, 1))  # when each prefill worker is free
    now = 0.0
    sched_t = 0.0  # when the batch of the step starting at `now` was formed
    done = 0
    steps = 0
    peak_kv = 0
    n_preempt = 0
    kv_used = 0  # KV tokens held by the running sequences
    pending = 0  # prompt tokens they still have to prefill
    n_dec = 0  # running sequences past their prefill
    ctx_dec = 0  # and the KV tokens those hold
    min_left = 1 << 62  # fewest tokens a running sequence has left to generate
    n_finished = 0  # running sequences with none left (retired at the end of the step)
    static_b = 0
    budget_default = chunk if chunk > 0 else DEFAULT_CHUNK
    upper = _upper_bound(c)
    # SGLang's admission reserves KV for the outputs to come (layout.SGL_*): new_token_ratio
    sgl = policy == UNMIXED or policy == MIXED
    ratio = SGL_INIT_RATIO
    e_tok, v_tok = _tokens_per_step(spec_on, k, acc, p_draft)

    while done < n:
        if policy == DISAGG:
            # The prefill pool, FCFS: every request sent by now goes to the worker free first.
            while pf_next < n_known:
                i = pf_next
                if thinks and arrival[i] > now:
                    # Not yet sent: a client that pauses may still send an earlier request.
                    break
                _prefill_one(c, c_pf, i, float(need_pf[i]), arrival, ready, prompt, first_t, pf_free)
                need_pf[i] = 0
                gen[i] = 1
                kv[i] = prompt[i]
                pf_next += 1

        # Admission.
        if policy != STATIC or nrun == 0:
            while nrun < slots:
                if npre > 0:
                    i = pre[npre - 1]
                    from_pre = True
                elif nxt < n_known and ready[nxt] <= sched_t:
                    i = nxt
                    from_pre = False
                else:
                    break
                # A new request's cached prefix: prompt tokens it need not prefill (a preempted one
                # recomputes prompt and output, need_pf >= prompt; a disaggregated one brings its KV).
                hit = prompt[i] - need_pf[i] if kv[i] == 0 and need_pf[i] < prompt[i] else 0
                # Reserve one step's growth for every sequence, so admission never forces a preemption.
                if float(kv_used + pending + need_pf[i] + kv[i] + hit) + (nrun + 1) * q > kv_cap and nrun > 0:
                    break
                if sgl and nrun > 0:
                    # SGLang: the new request's clipped output whole, the running ones' at the ratio
                    # (those still prefilling were admitted in a prefill batch: whole)
                    reserve = float(min(output[i] - gen[i], SGL_CLIP))
                    for j in range(nrun):
                        r_j = float(min(s_left[j], SGL_CLIP))
                        reserve += r_j * ratio if s_to_pf[j] == 0 else r_j
                    if float(kv_used + pending + need_pf[i] + kv[i] + hit) + reserve >= kv_cap:
                        break
                if from_pre:
                    npre -= 1
                else:
                    nxt += 1
                if policy == DISAGG and output[i] <= 1:
                    finish_t[i] = first_t[i]
                    done += 1
                    if concurrency > 0 and n_known < n:
                        t = first_t[i] + (think[n_known] if thinks else 0.0) + o_req
                        _enqueue(arrival, ready, prompt, output, need_pf, max(nxt, pf_next), n_known, t)
                        n_known += 1
                    continue
                run[nrun] = i
                s_left[nrun] = output[i] - gen[i]
                s_kv[nrun] = kv[i] + hit
                s_pf[nrun] = hit
                s_to_pf[nrun] = need_pf[i]
                min_left = min(min_left, s_left[nrun])
                kv_used += kv[i] + hit
                pending += need_pf[i]
                if need_pf[i] == 0:
                    n_dec += 1
                    ctx_dec += kv[i]
                nrun += 1
            if policy == STATIC:
                static_b = nrun

        if nrun == 0:
            if nxt < n_known:
                # Idle: the engine forms its next batch when a request is there (SGLang resets
                # new_token_ratio when it has no batch to run: scheduler self_check_during_idle).
                now = max(now, ready[nxt])
                sched_t = now
                ratio = SGL_INIT_RATIO
                continue
            break

        # Preemption (recompute) of the latest admitted sequence when KV would overflow.
        if float(kv_used + pending) + n_dec * q > kv_cap and nrun > 1:
            nrun -= 1
            i = run[nrun]
            kv_used -= s_kv[nrun]
            pending -= s_to_pf[nrun]
            if s_to_pf[nrun] == 0:
                n_dec -= 1
                ctx_dec -= s_kv[nrun]
            gen[i] = output[i] - s_left[nrun]
            need_pf[i] = prompt[i] + gen[i]
            kv[i] = 0
            pre[npre] = i
            npre += 1
            n_preempt += 1
            if sgl:
                # SGLang's retract_decode: the ratio from what the batch has decoded, plus 20 steps
                # a request, over what it may decode
                decoded = 0.0
                max_new = 0.0
                for j in range(nrun):
                    decoded += float(output[run[j]] - s_left[j])
                    max_new += float(output[run[j]])
                if max_new > 0.0:
                    ratio = min(1.0, (decoded + SGL_RETRACT_STEPS * nrun) / max_new)
            # min_left may now be stale (too low): no fast-forward can use it before the next
            # step recomputes it, since the preempted sequence still waits or prefills.
            continue

        # Prefill token budget for this step, and its split over the prefilling sequences in
        # admission order.
        budget = 0
        if pending > 0:
            if policy == CHUNKED or policy == WHOLE or policy == MIXED:
                budget = _budget_chunked(budget_default, n_dec, q)
            elif policy == UNMIXED:
                budget = budget_default
            elif policy == SLO:
                budget = _budget_slo(
                    c, nrun, s_pf, s_to_pf, pending, budget_default, n_dec, ctx_dec, tpot_target, upper
                )
            else:  # static, continuous, disagg: every pending prompt token in this step
                budget = pending
        n_pf = 0
        pf_pairs = 0.0
        pf_ctx = 0
        n_pf_seqs = 0
        if pending > 0:
            left = budget
            for j in range(nrun):
                if s_to_pf[j] > 0:
                    t_j = min(s_to_pf[j], left)
                    if policy == WHOLE and t_j < s_to_pf[j]:
                        # Whole prompts only: this one waits (and those behind it), unless the
                        # step would otherwise run nothing.
                        t_j = s_to_pf[j] if (n_pf == 0 and n_dec == 0) else 0
                        left = 0
                    elif policy == MIXED and n_pf_seqs > 0 and s_to_pf[j] >= left:
                        # Past the first prompt, whole prompts under what is left only: this one
                        # waits, and those behind it.
                        t_j = 0
                        left = 0
                    take[j] = t_j
                    if t_j > 0:
                        left -= t_j
                        n_pf += t_j
                        pf_pairs += prefill_pairs(float(t_j), float(s_pf[j]))
                        pf_ctx += s_pf[j]
                        n_pf_seqs += 1

        # Static batching pads finished sequences: the batch keeps its size until all are done.
        b_eff = float(static_b) if (policy == STATIC and n_dec > 0) else float(n_dec)
        # Fast-forward a run of pure decode steps up to the next completion (or arrival): every
        # running sequence decoding, or the prompts waiting blocked (whole prompts that do not fit
        # beside the decodes, or a budget the decodes fill), which stay so until a decode finishes.
        m = 0
        blocked = pending > 0 and n_pf == 0 and n_dec > 0 and (policy == WHOLE or policy == CHUNKED)
        # (a preempted request waiting for KV stays out until a decode finishes: the decodes only grow)
        if (npre == 0 and pending == 0 and n_dec == nrun) or blocked:
            dec_left = min_left
            if blocked:
                dec_left = 1 << 62
                for j in range(nrun):
                    if s_to_pf[j] == 0 and s_left[j] < dec_left:
                        dec_left = s_left[j]
            m = min(1 << 30, int(dec_left / e_tok))
            # the KV the waiting prompts hold in reserve (pending) is not the decodes' to grow into
            room = kv_cap - kv_used - pending
            if room < m * n_dec * q:
                m = int(room // (n_dec * q))
            ramp = e_tok * n_dec
            if sgl and nrun < slots and nxt < n_known and ready[nxt] <= sched_t:
                # SGLang: a request held back by the reservation may fit at any step (the ratio
                # falls, the running ones' outputs to come shrink): one step at a time
                m = 0
            if m >= 2:
                # An arrival already waiting is blocked by KV until a completion; only a future
                # arrival that a free slot would take must cut the run short.
                can_admit = policy != STATIC and nrun < slots and nxt < n_known and ready[nxt] > sched_t
                gap = max(ready[nxt] - now, 0.0) if can_admit else np.inf
                if gap < 2.0 * _step_time(c, b_eff, ctx_dec + (m - 1) * ramp, 0.0, 0.0, 0.0, b_eff, 1.0):
                    m = 0  # the arrival cuts it to under two steps, even at a lower bound of their time
                else:
                    t1 = step_time(c, b_eff, ctx_dec + (m - 1) * ramp, 0.0, 0.0, 0.0, b_eff)
                    m_t = int(gap // t1) if can_admit else m
                    if m_t < m:
                        m = m_t
                        if m >= 2:
                            t1 = step_time(c, b_eff, ctx_dec + (m - 1) * ramp, 0.0, 0.0, 0.0, b_eff)
            if m >= 2:
                t0 = step_time(c, b_eff, float(ctx_dec), 0.0, 0.0, 0.0, b_eff)
                tm = step_time(c, b_eff, ctx_dec + 0.5 * (m - 1) * ramp, 0.0, 0.0, 0.0, b_eff)
                # Simpson's rule over a linear ramp of context: exact for quadratics, and the
                # step time is smooth and near-linear in context.
                run_t = m * (t0 + 4.0 * tm + t1) / 6.0 * _noise(c[CV], float(m))
                now += run_t
                sched_t = now - run_t / m if overlap else now
                steps += m
                if sgl:
                    ratio = max(ratio - m * SGL_DECAY, SGL_MIN_RATIO)
                spread = np.sqrt(m * v_tok)
                grown = 0
                min_left = 1 << 62
                for j in range(nrun):
                    if s_to_pf[j] > 0:  # a blocked prompt: it waits
                        min_left = min(min_left, s_left[j])
                        continue
                    cnt = m
                    if spec_on:
                        # Sum of m acceptance draws, by its normal approximation.
                        cnt = int(round(m * e_tok + spread * _normal(0.0, 1.0)))
                        cnt = min(max(cnt, m), m * (k + 1))
                    cnt = min(cnt, s_left[j])
                    s_left[j] -= cnt
                    s_kv[j] += cnt
                    grown += cnt
                    if s_left[j] > 0:
                        min_left = min(min_left, s_left[j])
                    else:
                        n_finished += 1
                kv_used += grown
                ctx_dec += grown
            else:
                m = 0
        if m == 0:
            # An unmixed prefill step runs without the decodes: they emit nothing this step.
            dec_off = policy == UNMIXED and n_pf > 0
            if dec_off:
                dt = step_time(c, 0.0, 0.0, float(n_pf), pf_pairs, float(pf_ctx), float(n_pf_seqs))
            else:
                dt = step_time(c, b_eff, float(ctx_dec), float(n_pf), pf_pairs, float(pf_ctx), b_eff + n_pf_seqs)
            step_t = dt * _noise(c[CV], 1.0)
            now += step_t
            sched_t = now - step_t if overlap else now
            steps += 1
            if sgl and n_pf == 0:
                # a decode batch (SGLang's update_running_batch) lowers the ratio
                ratio = max(ratio - SGL_DECAY, SGL_MIN_RATIO)
            if spec_on:
                _accepted(n_dec, k, acc, p_draft, emitted)
            d = 0
            grown = 0
            min_left = 1 << 62
            for j in range(nrun):
                if s_to_pf[j] > 0:
                    t_j = take[j]
                    if t_j > 0:
                        s_pf[j] += t_j
                        s_to_pf[j] -= t_j
                        s_kv[j] += t_j
                        if s_to_pf[j] == 0:
                            # Prefill done: its last position yields the first token.
                            s_left[j] -= 1
                            n_dec += 1
                            ctx_dec += s_kv[j]
                            if first_t[run[j]] < 0.0:
                                first_t[run[j]] = now
                else:
                    cnt = 0 if dec_off else min(emitted[d], s_left[j])  # the d-th decoding sequence
                    d += 1
                    s_left[j] -= cnt
                    s_kv[j] += cnt
                    grown += cnt
                if s_left[j] > 0:
                    min_left = min(min_left, s_left[j])
                else:
                    n_finished += 1
            kv_used += grown + n_pf
            pending -= n_pf
            ctx_dec += grown
        if kv_used > peak_kv:
            peak_kv = kv_used

        if n_finished > 0:
            # Retire finished sequences, keeping admission order.
            w = 0
            for j in range(nrun):
                if s_left[j] <= 0:
                    i = run[j]
                    finish_t[i] = now
                    kv_used -= s_kv[j]
                    n_dec -= 1
                    ctx_dec -= s_kv[j]
                    done += 1
                    if concurrency > 0 and n_known < n:
                        # The client's next request lands just after the engine started its next
                        # step, or after the client's think time.
                        t = now + BURST_GAP_S + (think[n_known] if thinks else 0.0) + o_req
                        _enqueue(arrival, ready, prompt, output, need_pf, max(nxt, pf_next), n_known, t)
                        n_known += 1
                else:
                    if w < j:
                        run[w] = run[j]
                        s_left[w] = s_left[j]
                        s_kv[w] = s_kv[j]
                        s_pf[w] = s_pf[j]
                        s_to_pf[w] = s_to_pf[j]
                    w += 1
            nrun = w
            n_finished = 0
    for i in range(n):
        arrival[i] -= o_req
    return steps, float(peak_kv), n_preempt
