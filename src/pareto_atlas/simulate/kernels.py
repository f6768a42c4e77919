"""All compiled code of the simulator: the step-time formula, the request-level simulation, summaries.

One file on purpose: numba's on-disk cache is keyed to the source file of each compiled function
only, so a kernel that calls a compiled function from another file can silently run a stale copy
after that file changes. Everything compiled lives (and is invalidated) together here.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

# Layout of the coefficient vector (seconds per unit unless said otherwise).
W_T, KVR, KVW, FL, AT, CTX_SCALE, O_STEP, O_SEQ, P = range(9)
Q, K, ACC, D_W, D_FL, D_KVR, D_O, XFER, CV = range(9, 18)
# FL is the per-token body compute on the GEMM path; FL_V the same on the small-batch GEMV path;
# FL_H the lm_head per logit row; TILE the GEMM column tile (0: every batch runs as GEMM);
# DRAFT_P the fraction of decode steps that actually draft (speculation).
FL_V, FL_H, TILE, DRAFT_P = range(18, 22)
N_COEFFS = 22
# Closed-loop clients never land in the same instant: an idle engine starts a step for the first
# request and the others wait for the next one (llama.cpp's slot loop, vLLM's scheduler alike);
# a request sent when another completes misses the step the engine starts at that moment.
BURST_GAP_S = 1e-6

POLICIES = ("static", "continuous", "chunked", "slo", "disagg")
STATIC, CONTINUOUS, CHUNKED, SLO, DISAGG = range(5)
DEFAULT_CHUNK = 512          # prefill token budget when chunked/slo policies leave it unset


@njit(cache=True)
def _smooth_max(a: float, b: float, p: float) -> float:
    # A hard max(memory, compute) overstates speed at the ridge, where neither the memory system
    # nor the ALUs run flat out; a p-norm rounds that corner (by 2^(1/p) at most), stays >= max
    # so the roofline is never beaten, and is smooth for least squares.
    if a <= 0.0:
        return b
    if b <= 0.0:
        return a
    m = max(a, b)
    return m * ((a / m) ** p + (b / m) ** p) ** (1.0 / p)


@njit(cache=True)
def step_time(c: np.ndarray, n_dec: float, ctx_dec: float, n_pf: float, pf_pairs: float, pf_ctx: float,
              n_seqs: float) -> float:
    """Seconds for one step: n_dec sequences decoding over ctx_dec total context tokens, plus
    n_pf prompt tokens whose attention covers pf_pairs (query, key) pairs and reads pf_ctx
    earlier KV tokens (chunked prefill). Without jitter; the simulation adds that."""
    q = c[Q]
    tokens = n_dec * q + n_pf
    if tokens <= 0.0:
        return 0.0
    ctx_eff = ctx_dec * c[CTX_SCALE]
    mem = c[W_T] + c[KVR] * (ctx_eff + pf_ctx) + c[KVW] * tokens
    # Logits: every decode (and verify) row, but only the last token of a prompt (n_seqs - n_dec
    # sequences are prefilling in this step).
    logits = n_dec * q + max(n_seqs - n_dec, 0.0)
    cmp = (c[FL] * _gemm_cols(tokens, c[TILE]) + c[FL_V] * (tokens - _gemm_cols(tokens, c[TILE]))
           + c[FL_H] * logits + c[AT] * (q * ctx_eff + pf_pairs))
    t = _smooth_max(mem, cmp, c[P]) + c[O_STEP] + c[O_SEQ] * n_seqs
    if c[K] > 0.0 and n_dec > 0.0 and c[DRAFT_P] > 0.0:
        # k sequential draft forwards on the steps that draft (prefill of the draft is folded
        # into its compute term below).
        dmem = c[D_W] + c[D_KVR] * ctx_dec
        dcmp = c[D_FL] * n_dec
        t += c[DRAFT_P] * c[K] * (_smooth_max(dmem, dcmp, c[P]) + c[D_O])
    if c[K] > 0.0 and n_pf > 0.0 and c[D_FL] > 0.0:
        t += c[D_FL] * n_pf
    return t


@njit(cache=True)
def _gemm_cols(tokens: float, tile: float) -> float:
    # Columns a tiled GEMM kernel takes; the remainder runs one GEMV per column (llama.cpp's CPU
    # repacked kernels: GEMM on ne11 - ne11 % 4 columns). tile 0: all of them.
    if tile <= 0.0:
        return tokens
    return tokens - np.fmod(tokens, tile)


@njit(cache=True)
def prefill_pairs(p: float, before: float) -> float:
    """Causal (query, key) pairs of a p-token chunk after `before` cached tokens."""
    return p * before + p * (p + 1) / 2.0


@njit(cache=True)
def _noise(cv: float, m: float) -> float:
    # Mean-one lognormal; averaged over m steps its spread shrinks as 1/sqrt(m).
    if cv <= 0.0:
        return 1.0
    s = cv / np.sqrt(m)
    return np.exp(s * np.random.normal() - 0.5 * s * s)


@njit(cache=True)
def _accepted(k: int, a: float) -> int:
    # Tokens emitted by one verify step: the accepted prefix of k drafts plus the bonus token.
    n = 1
    for _ in range(k):
        if np.random.random() < a:
            n += 1
        else:
            break
    return n


@njit(cache=True)
def run_kernel(c, arrival, prompt, output, policy, slots, chunk, tpot_target, concurrency, kv_cap, seed,
               first_t, finish_t):
    """Simulate all requests; fills first_t / finish_t (seconds). Closed loop when concurrency > 0:
    arrival[] is then written as requests complete. Returns (steps, peak KV tokens, preemptions)."""
    np.random.seed(seed)
    n = arrival.shape[0]
    q = c[Q]
    k = int(c[K])
    acc = c[ACC]
    p_draft = c[DRAFT_P]
    spec_on = k > 0 and p_draft > 0.0
    kv = np.zeros(n)
    pf_done = np.zeros(n, np.int64)
    need_pf = prompt.copy()
    gen = np.zeros(n, np.int64)
    take = np.zeros(slots, np.int64)
    run = np.empty(slots, np.int64)
    pre = np.empty(n, np.int64)
    ready = arrival.copy()
    nrun = 0
    npre = 0
    nxt = 0
    if concurrency > 0:
        n_known = min(concurrency, n)
        for i in range(n_known):
            arrival[i] = i * BURST_GAP_S
            ready[i] = i * BURST_GAP_S
    else:
        n_known = n
    for i in range(n):
        first_t[i] = -1.0
        finish_t[i] = -1.0
    pf_next = 0
    pf_free = 0.0
    now = 0.0
    done = 0
    steps = 0
    peak_kv = 0.0
    n_preempt = 0
    kv_used = 0.0
    kv_pending = 0.0
    static_b = 0
    budget_default = chunk if chunk > 0 else DEFAULT_CHUNK
    # Mean and variance of tokens per step: 1 + accepted prefix of k drafts on the steps that
    # draft (probability p_draft), 1 on the others.
    e_tok = 1.0
    v_tok = 0.0
    if spec_on:
        e2 = 1.0 - p_draft
        e_tok = 1.0 - p_draft
        for j in range(1, k + 2):
            pj = acc ** (j - 1) * (1.0 - acc) if j <= k else acc ** k
            e_tok += p_draft * j * pj
            e2 += p_draft * j * j * pj
        v_tok = e2 - e_tok * e_tok

    while done < n:
        if policy == DISAGG:
            # Prefill pool: FCFS, one prompt at a time; its first token leaves from there, the KV
            # follows over the link before the decode pool can take the request.
            while pf_next < n_known:
                i = pf_next
                p = float(prompt[i])
                t0 = max(arrival[i], pf_free)
                dt = step_time(c, 0.0, 0.0, p, prefill_pairs(p, 0.0), 0.0, 1.0) * _noise(c[CV], 1.0)
                pf_free = t0 + dt
                first_t[i] = pf_free
                ready[i] = pf_free + c[XFER] * p
                pf_done[i] = 0
                need_pf[i] = 0
                gen[i] = 1
                kv[i] = p
                pf_next += 1

        # Admission.
        if policy != STATIC or nrun == 0:
            while nrun < slots:
                if npre > 0:
                    i = pre[npre - 1]
                    from_pre = True
                elif nxt < n_known and ready[nxt] <= now:
                    i = nxt
                    from_pre = False
                else:
                    break
                need = need_pf[i] - pf_done[i] + kv[i]
                # Reserve one step's growth for every sequence, so admission never forces a preemption.
                if kv_used + kv_pending + need + (nrun + 1) * q > kv_cap and nrun > 0:
                    break
                if from_pre:
                    npre -= 1
                else:
                    nxt += 1
                if policy == DISAGG and output[i] <= 1:
                    finish_t[i] = first_t[i]
                    done += 1
                    if concurrency > 0 and n_known < n:
                        arrival[n_known] = first_t[i]
                        n_known += 1
                    continue
                run[nrun] = i
                nrun += 1
                kv_used += kv[i]
                kv_pending += need_pf[i] - pf_done[i]
            if policy == STATIC:
                static_b = nrun

        if nrun == 0:
            if nxt < n_known:
                now = max(now, ready[nxt])
                continue
            break

        # Decode-side composition and preemption (recompute) when KV would overflow.
        n_dec = 0
        ctx_dec = 0.0
        for j in range(nrun):
            i = run[j]
            if pf_done[i] >= need_pf[i]:
                n_dec += 1
                ctx_dec += kv[i]
        if kv_used + kv_pending + n_dec * q > kv_cap and nrun > 1:
            i = run[nrun - 1]
            nrun -= 1
            kv_used -= kv[i]
            kv_pending -= need_pf[i] - pf_done[i]
            need_pf[i] = prompt[i] + gen[i]
            pf_done[i] = 0
            kv[i] = 0.0
            pre[npre] = i
            npre += 1
            n_preempt += 1
            continue

        # Prefill token budget for this step.
        pending = 0
        before0 = 0.0
        for j in range(nrun):
            i = run[j]
            if pf_done[i] < need_pf[i]:
                if pending == 0:
                    before0 = float(pf_done[i])
                pending += need_pf[i] - pf_done[i]
        if pending == 0:
            budget = 0
        elif policy == CHUNKED:
            budget = max(budget_default - int(n_dec * q), 0 if n_dec > 0 else 1)
        elif policy == SLO and n_dec > 0:
            # Decode priority: the largest prefill chunk that keeps this step within the TPOT target.
            hi = min(pending, budget_default)
            lo = 0
            while lo < hi:
                mid = (lo + hi + 1) // 2
                t = step_time(c, float(n_dec), ctx_dec, float(mid), prefill_pairs(float(mid), before0), before0,
                              float(n_dec + 1))
                if t <= tpot_target:
                    lo = mid
                else:
                    hi = mid - 1
            budget = lo
        elif policy == SLO:
            budget = budget_default
        else:
            budget = pending

        n_pf = 0.0
        pf_pairs = 0.0
        pf_ctx = 0.0
        n_pf_seqs = 0
        left = budget
        for j in range(nrun):
            i = run[j]
            take[j] = 0
            if pf_done[i] < need_pf[i] and left > 0:
                t_j = min(need_pf[i] - pf_done[i], left)
                take[j] = t_j
                left -= t_j
                n_pf += t_j
                pf_pairs += prefill_pairs(float(t_j), float(pf_done[i]))
                pf_ctx += pf_done[i]
                n_pf_seqs += 1

        # Static batching pads finished sequences: the batch keeps its size until all are done.
        b_eff = float(static_b) if (policy == STATIC and n_dec > 0) else float(n_dec)
        # Fast-forward a run of pure decode steps up to the next completion (or arrival).
        m = 0
        if n_pf == 0.0 and pending == 0 and npre == 0 and n_dec == nrun:
            m = 1 << 30
            for j in range(nrun):
                i = run[j]
                m = min(m, int((output[i] - gen[i]) / e_tok))
            room = kv_cap - kv_used
            if room < m * nrun * q:
                m = int(room // (nrun * q))
            ramp = e_tok * n_dec
            if m >= 2:
                t1 = step_time(c, b_eff, ctx_dec + (m - 1) * ramp, 0.0, 0.0, 0.0, b_eff)
                # An arrival already waiting is blocked by KV until a completion; only a future
                # arrival that a free slot would take must cut the run short.
                can_admit = policy != STATIC and nrun < slots and nxt < n_known and ready[nxt] > now
                if can_admit:
                    m_t = int((ready[nxt] - now) // t1)
                    if m_t < m:
                        m = m_t
                        t1 = step_time(c, b_eff, ctx_dec + (m - 1) * ramp, 0.0, 0.0, 0.0, b_eff)
            if m >= 2:
                t0 = step_time(c, b_eff, ctx_dec, 0.0, 0.0, 0.0, b_eff)
                tm = step_time(c, b_eff, ctx_dec + 0.5 * (m - 1) * ramp, 0.0, 0.0, 0.0, b_eff)
                # Simpson's rule over a linear ramp of context: exact for quadratics, and the
                # step time is smooth and near-linear in context.
                now += m * (t0 + 4.0 * tm + t1) / 6.0 * _noise(c[CV], float(m))
                steps += m
                for j in range(nrun):
                    i = run[j]
                    cnt = m
                    if spec_on:
                        # Sum of m acceptance draws, by its normal approximation.
                        cnt = int(round(m * e_tok + np.sqrt(m * v_tok) * np.random.normal()))
                        cnt = min(max(cnt, m), m * (k + 1))
                    cnt = min(cnt, output[i] - gen[i])
                    gen[i] += cnt
                    kv[i] += cnt
                    kv_used += cnt
            else:
                m = 0
        if m == 0:
            dt = step_time(c, b_eff, ctx_dec, n_pf, pf_pairs, pf_ctx, b_eff + n_pf_seqs)
            now += dt * _noise(c[CV], 1.0)
            steps += 1
            for j in range(nrun):
                i = run[j]
                if take[j] > 0:
                    pf_done[i] += take[j]
                    kv[i] += take[j]
                    kv_used += take[j]
                    kv_pending -= take[j]
                    if pf_done[i] >= need_pf[i]:
                        gen[i] += 1
                        if first_t[i] < 0.0:
                            first_t[i] = now
                elif pf_done[i] >= need_pf[i]:
                    cnt = 1
                    if spec_on and (p_draft >= 1.0 or np.random.random() < p_draft):
                        cnt = _accepted(k, acc)
                    cnt = min(cnt, output[i] - gen[i])
                    gen[i] += cnt
                    kv[i] += cnt
                    kv_used += cnt
        if kv_used > peak_kv:
            peak_kv = kv_used

        # Retire finished sequences, keeping admission order.
        w = 0
        for j in range(nrun):
            i = run[j]
            if gen[i] >= output[i]:
                finish_t[i] = now
                kv_used -= kv[i]
                done += 1
                if concurrency > 0 and n_known < n:
                    # The client's next request lands just after the engine started its next step.
                    arrival[n_known] = now + BURST_GAP_S
                    ready[n_known] = now + BURST_GAP_S
                    n_known += 1
            else:
                run[w] = i
                w += 1
        nrun = w
    return steps, peak_kv, n_preempt


@njit(cache=True)
def _pct(sorted_x: np.ndarray, q: float) -> float:
    # Linear interpolation between closest ranks (numpy's default "linear" method).
    n = sorted_x.shape[0]
    if n == 0:
        return np.nan
    h = (n - 1) * q
    lo = int(np.floor(h))
    hi = min(lo + 1, n - 1)
    return sorted_x[lo] + (h - lo) * (sorted_x[hi] - sorted_x[lo])


SUMMARY = ("ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "e2e_p50_ms", "e2e_p99_ms",
           "throughput_tok_s", "goodput_rps")


@njit(cache=True)
def summarize(arrival, first_t, finish_t, output, ttft_slo, tpot_slo, out):
    """Fill out[8] with the SUMMARY metrics (ms, tok/s, req/s); goodput NaN when no SLO is set."""
    n = arrival.shape[0]
    ttft = np.empty(n)
    e2e = np.empty(n)
    tpot = np.empty(n)
    nt = 0
    good = 0
    t_start = np.inf
    t_end = 0.0
    toks = 0.0
    for i in range(n):
        ttft[i] = first_t[i] - arrival[i]
        e2e[i] = finish_t[i] - arrival[i]
        tp = np.nan
        if output[i] > 1:
            tp = (finish_t[i] - first_t[i]) / (output[i] - 1)
            tpot[nt] = tp
            nt += 1
        if ttft[i] <= ttft_slo and (np.isnan(tp) or tp <= tpot_slo):
            good += 1
        t_start = min(t_start, arrival[i])
        t_end = max(t_end, finish_t[i])
        toks += output[i]
    ttft.sort()
    e2e.sort()
    tp_s = np.sort(tpot[:nt])
    out[0] = 1e3 * _pct(ttft, 0.5)
    out[1] = 1e3 * _pct(ttft, 0.99)
    out[2] = 1e3 * _pct(tp_s, 0.5)
    out[3] = 1e3 * _pct(tp_s, 0.99)
    out[4] = 1e3 * _pct(e2e, 0.5)
    out[5] = 1e3 * _pct(e2e, 0.99)
    dur = t_end - t_start
    out[6] = toks / dur if dur > 0 else np.nan
    has_slo = np.isfinite(ttft_slo) or np.isfinite(tpot_slo)
    out[7] = good / dur if (has_slo and dur > 0) else np.nan


@njit(parallel=True, cache=True)
def run_batch(C, policy, slots, chunk, conc, rate, prompt, output, kv_cap, n_req, ttft_slo, tpot_slo, seed, out,
               peak):
    for j in prange(C.shape[0]):
        if not np.isfinite(kv_cap[j]):
            continue
        arrival = np.zeros(n_req)
        if conc[j] == 0:
            np.random.seed(seed + j)
            t = 0.0
            for i in range(1, n_req):
                t += np.random.exponential(1.0 / rate[j])
                arrival[i] = t
        p = np.full(n_req, prompt[j], np.int64)
        o = np.full(n_req, output[j], np.int64)
        first_t = np.empty(n_req)
        finish_t = np.empty(n_req)
        _, pk, _ = run_kernel(C[j], arrival, p, o, policy[j], slots[j], chunk[j], tpot_slo, conc[j], kv_cap[j],
                              seed + j, first_t, finish_t)
        peak[j] = pk
        summarize(arrival, first_t, finish_t, o, ttft_slo, tpot_slo, out[j])
