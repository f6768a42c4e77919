"""All compiled code of the simulator: the step-time formula, the request-level simulation, summaries.

One file on purpose: numba's on-disk cache is keyed to the source file of each compiled function
only, so a kernel that calls a compiled function from another file can silently run a stale copy
after that file changes. Everything compiled lives (and is invalidated) together here.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange, types
from numba.core.extending import intrinsic
from numba.core.typing import signature

try:    # numba internals (see _uniform below); a numba without them runs the plain calls instead
    from numba.cpython.randomimpl import GuassArgs, _gauss_impl, get_next_double, get_state_ptr
except ImportError:     # pragma: no cover - depends on the installed numba
    get_next_double = None

# Layout of the coefficient vector (seconds per unit unless said otherwise).
W_T, KVR, KVW, FL, AT, CTX_SCALE, O_STEP, O_SEQ, P = range(9)
Q, K, ACC, D_W, D_FL, D_KVR, D_O, XFER, CV = range(9, 18)
# FL is the per-token body compute on the GEMM path; FL_V the same on the small-batch GEMV path;
# FL_H the lm_head per logit row; TILE the GEMM column tile (0: every batch runs as GEMM);
# DRAFT_P the fraction of decode steps that actually draft (speculation).
FL_V, FL_H, TILE, DRAFT_P = range(18, 22)
# KV_PAD: cells each decoding sequence attends beyond its context, in expectation (the engine pads
# the attended cache; see CalibParams.kv_pad).
KV_PAD = 22
# O_REQ: seconds between a client's send and the engine seeing the request (HTTP, tokenization, the
# API server's hop to the engine): in every TTFT and E2E, and in a closed loop's gap between a
# completion and the client's next request, but never in an engine step.
O_REQ = 23
# COMM_STEP, COMM_TOK: a tensor/pipeline-parallel worker's collectives and stage sends over the node's
# link, per step and per token of the step, serial with the kernels (simulate.parallel); 0 on one device.
COMM_STEP, COMM_TOK = 24, 25
# PP_STAGES: a pipeline-parallel worker's stages (0 or 1: none). A step is one pipeline round; its
# sequences fill min(stages, sequences) micro-batches, and compute, KV traffic and the link's bytes
# divide over those (one prompt alone crosses the stages one after the other: no gain).
PP_STAGES = 26
N_COEFFS = 27
# Closed-loop clients never land in the same instant: an idle engine starts a step for the first
# request and the others wait for the next one (llama.cpp's slot loop, vLLM's scheduler alike);
# a request sent when another completes misses the step the engine starts at that moment.
BURST_GAP_S = 1e-6

POLICIES = ("static", "continuous", "chunked", "slo", "disagg")
STATIC, CONTINUOUS, CHUNKED, SLO, DISAGG = range(5)
DEFAULT_CHUNK = 512          # prefill token budget when chunked/slo policies leave it unset


@njit(cache=True)
def _smooth_max(a: float, b: float, p: float, bound: float) -> float:
    # A hard max(memory, compute) overstates speed at the ridge, where neither the memory system
    # nor the ALUs run flat out; a p-norm rounds that corner (by 2^(1/p) at most), stays >= max
    # so the roofline is never beaten, and is smooth for least squares.
    if a <= 0.0:
        return b
    if b <= 0.0:
        return a
    m = max(a, b)
    if bound > 0.0:
        # A bound of the p-norm instead, without its pow calls: see _step_time.
        return m * bound
    # The larger side's ratio is exactly 1, and so is its power (no pow call needed).
    return m * (1.0 + (min(a, b) / m) ** p) ** (1.0 / p)


@njit(cache=True)
def _smooth_max2(a: float, b: float, da: float, db: float, p: float, bound: float) -> tuple[float, float]:
    # _smooth_max of two pairs, their pow calls interleaved: each smooth max is a chain of two
    # pow calls, and their latency rather than their throughput bounds the simulation, so two
    # chains side by side cost little more than one.
    if bound > 0.0 or min(min(a, b), min(da, db)) <= 0.0:
        return _smooth_max(a, b, p, bound), _smooth_max(da, db, p, bound)
    m, dm = max(a, b), max(da, db)
    x, dx = (min(a, b) / m) ** p, (min(da, db) / dm) ** p
    return m * (1.0 + x) ** (1.0 / p), dm * (1.0 + dx) ** (1.0 / p)


@njit(cache=True)
def step_time(c: np.ndarray, n_dec: float, ctx_dec: float, n_pf: float, pf_pairs: float, pf_ctx: float,
              n_seqs: float) -> float:
    """Seconds for one step: n_dec sequences decoding over ctx_dec total context tokens, plus
    n_pf prompt tokens whose attention covers pf_pairs (query, key) pairs and reads pf_ctx
    earlier KV tokens (chunked prefill). Without jitter; the simulation adds that."""
    return _step_time(c, n_dec, ctx_dec, n_pf, pf_pairs, pf_ctx, n_seqs, 0.0)


@njit(cache=True, inline="always")
def _step_time(c: np.ndarray, n_dec: float, ctx_dec: float, n_pf: float, pf_pairs: float, pf_ctx: float,
               n_seqs: float, bound: float) -> float:
    # step_time with bound 0. With bound 1, a lower bound of it; with bound >= 2^(1/p) (1 + 1e-12)
    # (_upper_bound), an upper bound: each smooth max lies within [max, 2^(1/p) max], also in
    # floating point (pow is faithfully rounded, the margin covers the rest), and the step time
    # is non-decreasing in both. Bounds cost no pow call and settle most comparisons exactly.
    q = c[Q]
    tokens = n_dec * q + n_pf
    if tokens <= 0.0:
        return 0.0
    ctx_eff = ctx_dec * c[CTX_SCALE] + n_dec * c[KV_PAD]
    # Two rooflines, one per kind of kernel, run one after the other: the linear layers stream
    # the weights and multiply every token by them; attention reads (and appends to) the KV cache
    # and multiplies each query by what it reads. A step is never both kinds at once, so a long
    # context's attention adds to a weight-bound step instead of hiding under it.
    mem = c[W_T]
    # Logits: every decode (and verify) row, but only the last token of a prompt (n_seqs - n_dec
    # sequences are prefilling in this step).
    logits = n_dec * q + max(n_seqs - n_dec, 0.0)
    gemm = _gemm_cols(tokens, c[TILE])
    cmp = c[FL] * gemm + c[FL_V] * (tokens - gemm) + c[FL_H] * logits
    a_mem = c[KVR] * (ctx_eff + pf_ctx) + c[KVW] * tokens
    a_cmp = c[AT] * (q * ctx_eff + pf_pairs)
    comm_tok = c[COMM_TOK]
    if c[PP_STAGES] > 1.0:
        m = min(c[PP_STAGES], max(n_seqs, 1.0))
        cmp, a_mem, a_cmp, comm_tok = cmp / m, a_mem / m, a_cmp / m, comm_tok / m
    # k sequential draft forwards on the steps that draft (prefill of the draft is folded into
    # its compute term below).
    drafting = c[K] > 0.0 and n_dec > 0.0 and c[DRAFT_P] > 0.0
    if drafting:
        fwd, draft_fwd = _smooth_max2(mem, cmp, c[D_W] + c[D_KVR] * ctx_dec, c[D_FL] * n_dec, c[P], bound)
        fwd += _smooth_max(a_mem, a_cmp, c[P], bound)
    else:
        # the two rooflines' pow chains side by side (see _smooth_max2)
        fwd, attn = _smooth_max2(mem, cmp, a_mem, a_cmp, c[P], bound)
        fwd, draft_fwd = fwd + attn, 0.0
    t = fwd + c[O_STEP] + c[O_SEQ] * n_seqs + c[COMM_STEP] + comm_tok * tokens
    if drafting:
        t += c[DRAFT_P] * c[K] * (draft_fwd + c[D_O])
    if c[K] > 0.0 and n_pf > 0.0 and c[D_FL] > 0.0:
        t += c[D_FL] * n_pf
    return t


@njit(cache=True)
def lone_prefill_s(c: np.ndarray, prompt: float) -> float:
    """Seconds of one prompt's TTFT on an idle engine (its prefill and the request's overhead, without
    jitter): the mean pause of "auto" think times, as the load generator takes the warm-up's TTFT."""
    return step_time(c, 0.0, 0.0, prompt, prefill_pairs(prompt, 0.0), 0.0, 1.0) + c[O_REQ]


@njit(cache=True)
def _upper_bound(c: np.ndarray) -> float:
    # The bound argument of _step_time for an upper bound (inf where p < 1 leaves none useful).
    return 2.0 ** (1.0 / c[P]) * (1.0 + 1e-12) if c[P] >= 1.0 else np.inf


@njit(cache=True)
def _step_within(c: np.ndarray, n_dec: float, ctx_dec: float, n_pf: float, pf_pairs: float, pf_ctx: float,
                 n_seqs: float, target: float, upper: float) -> bool:
    # step_time(...) <= target, from its bounds where they settle it (upper = _upper_bound(c)).
    if _step_time(c, n_dec, ctx_dec, n_pf, pf_pairs, pf_ctx, n_seqs, 1.0) > target:
        return False
    if _step_time(c, n_dec, ctx_dec, n_pf, pf_pairs, pf_ctx, n_seqs, upper) <= target:
        return True
    return _step_time(c, n_dec, ctx_dec, n_pf, pf_pairs, pf_ctx, n_seqs, 0.0) <= target


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


# np.random.random() and np.random.normal(), inlined: numba compiles those calls out of line, with
# a thread-local state lookup on every draw, and a speculative decode step makes one to k draws
# per sequence. Built from the helpers numba's own np.random is built from (same state, same
# Mersenne Twister step, same polar method with its cached second normal): the same stream.
# These helpers are not numba's public API: if a release drops them, the import above fails and the
# plain calls below give the same stream, about a third slower on speculative cases.
if get_next_double is not None:
    @intrinsic
    def _uniform(typingcontext):
        def codegen(context, builder, sig, args):
            return get_next_double(context, builder, get_state_ptr(context, builder, "np"))
        return signature(types.float64), codegen

    @intrinsic
    def _normal(typingcontext, loc, scale):
        def as_is(builder, value):
            return value
        sig = signature(types.float64, types.float64, types.float64)
        return sig, _gauss_impl(GuassArgs("np", _uniform), as_is, as_is)
else:     # pragma: no cover
    @njit(cache=True)
    def _uniform() -> float:
        return np.random.random()

    @njit(cache=True)
    def _normal(loc: float, scale: float) -> float:
        return np.random.normal(loc, scale)


@njit(cache=True)
def _noise(cv: float, m: float) -> float:
    # Mean-one lognormal; averaged over m steps its spread shrinks as 1/sqrt(m).
    if cv <= 0.0:
        return 1.0
    s = cv / np.sqrt(m)
    return np.exp(s * _normal(0.0, 1.0) - 0.5 * s * s)


@njit(cache=True, inline="always")
def _accepted(n: int, k: int, a: float, p_draft: float, out: np.ndarray) -> None:
    # Tokens each of n decoding sequences emits in one step, in turn: 1 where it does not draft
    # (probability 1 - p_draft, one draw decides, none when p_draft >= 1), else the accepted
    # prefix of k drafts plus the bonus token. Branch-free per draw, one stream of uniforms for
    # the whole batch: a draw's outcome is unpredictable, and a mispredicted branch per sequence
    # costs more than its draws.
    always = p_draft >= 1.0
    drafting = always
    hits = 0
    j = 0
    while j < n:
        hit = _uniform() < (a if drafting else p_draft)
        hits += hit & drafting
        done = (not hit) | (drafting & (hits == k))
        out[j] = 1 + hits
        j += done
        hits = 0 if done else hits
        drafting = always if done else True


@njit(cache=True, inline="always")
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


@njit(cache=True)
def run_kernel(c, arrival, prompt, output, policy, slots, chunk, tpot_target, concurrency, kv_cap, seed,
               first_t, finish_t, think):
    """Simulate all requests; fills first_t / finish_t (seconds). Closed loop when concurrency > 0:
    arrival[] is then written as requests complete, each client sending its next request think[i]
    seconds after its last one finished (its first at think[i] from the start; think may be empty:
    no think time). A request reaches the engine c[O_REQ] seconds after its send: arrival[] holds the
    engine's times while it runs, and the sends again when it returns. Returns (steps, peak KV
    tokens, preemptions)."""
    np.random.seed(seed)
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
    pf_next = 0
    pf_free = 0.0
    now = 0.0
    done = 0
    steps = 0
    peak_kv = 0
    n_preempt = 0
    kv_used = 0          # KV tokens held by the running sequences
    pending = 0          # prompt tokens they still have to prefill
    n_dec = 0            # running sequences past their prefill
    ctx_dec = 0          # and the KV tokens those hold
    min_left = 1 << 62   # fewest tokens a running sequence has left to generate
    n_finished = 0       # running sequences with none left (retired at the end of the step)
    static_b = 0
    budget_default = chunk if chunk > 0 else DEFAULT_CHUNK
    upper = _upper_bound(c)
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
                if thinks and arrival[i] > now:
                    # Not yet sent: a client that pauses may still send an earlier request.
                    break
                p = float(prompt[i])
                t0 = max(arrival[i], pf_free)
                dt = step_time(c, 0.0, 0.0, p, prefill_pairs(p, 0.0), 0.0, 1.0) * _noise(c[CV], 1.0)
                pf_free = t0 + dt
                first_t[i] = pf_free
                ready[i] = pf_free + c[XFER] * p
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
                elif nxt < n_known and ready[nxt] <= now:
                    i = nxt
                    from_pre = False
                else:
                    break
                # Reserve one step's growth for every sequence, so admission never forces a preemption.
                if float(kv_used + pending + need_pf[i] + kv[i]) + (nrun + 1) * q > kv_cap and nrun > 0:
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
                s_kv[nrun] = kv[i]
                s_pf[nrun] = 0
                s_to_pf[nrun] = need_pf[i]
                min_left = min(min_left, s_left[nrun])
                kv_used += kv[i]
                pending += need_pf[i]
                if need_pf[i] == 0:
                    n_dec += 1
                    ctx_dec += kv[i]
                nrun += 1
            if policy == STATIC:
                static_b = nrun

        if nrun == 0:
            if nxt < n_known:
                now = max(now, ready[nxt])
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
            # min_left may now be stale (too low): no fast-forward can use it before the next
            # step recomputes it, since the preempted sequence still waits or prefills.
            continue

        # Prefill token budget for this step, and its split over the prefilling sequences in
        # admission order.
        budget = 0
        if pending > 0:
            if policy == CHUNKED:
                budget = max(budget_default - int(n_dec * q), 0 if n_dec > 0 else 1)
            elif policy == SLO and n_dec > 0:
                # Decode priority: the largest prefill chunk that keeps this step within the TPOT target.
                before0 = 0.0
                for j in range(nrun):
                    if s_to_pf[j] > 0:
                        before0 = float(s_pf[j])
                        break
                hi = min(pending, budget_default)
                lo = 0
                while lo < hi:
                    mid = (lo + hi + 1) // 2
                    if _step_within(c, float(n_dec), float(ctx_dec), float(mid), prefill_pairs(float(mid), before0),
                                    before0, float(n_dec + 1), tpot_target, upper):
                        lo = mid
                    else:
                        hi = mid - 1
                budget = lo
            elif policy == SLO:
                budget = budget_default
            else:
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
                    take[j] = t_j
                    if t_j > 0:
                        left -= t_j
                        n_pf += t_j
                        pf_pairs += prefill_pairs(float(t_j), float(s_pf[j]))
                        pf_ctx += s_pf[j]
                        n_pf_seqs += 1

        # Static batching pads finished sequences: the batch keeps its size until all are done.
        b_eff = float(static_b) if (policy == STATIC and n_dec > 0) else float(n_dec)
        # Fast-forward a run of pure decode steps up to the next completion (or arrival).
        m = 0
        if pending == 0 and npre == 0 and n_dec == nrun:
            m = min(1 << 30, int(min_left / e_tok))
            room = kv_cap - kv_used
            if room < m * nrun * q:
                m = int(room // (nrun * q))
            ramp = e_tok * n_dec
            if m >= 2:
                # An arrival already waiting is blocked by KV until a completion; only a future
                # arrival that a free slot would take must cut the run short.
                can_admit = policy != STATIC and nrun < slots and nxt < n_known and ready[nxt] > now
                gap = ready[nxt] - now if can_admit else np.inf
                if gap < 2.0 * _step_time(c, b_eff, ctx_dec + (m - 1) * ramp, 0.0, 0.0, 0.0, b_eff, 1.0):
                    m = 0   # the arrival cuts it to under two steps, even at a lower bound of their time
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
                now += m * (t0 + 4.0 * tm + t1) / 6.0 * _noise(c[CV], float(m))
                steps += m
                spread = np.sqrt(m * v_tok)
                grown = 0
                min_left = 1 << 62
                for j in range(nrun):
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
            dt = step_time(c, b_eff, float(ctx_dec), float(n_pf), pf_pairs, float(pf_ctx), b_eff + n_pf_seqs)
            now += dt * _noise(c[CV], 1.0)
            steps += 1
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
                    cnt = min(emitted[d], s_left[j])   # the d-th decoding sequence
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


@njit(cache=True)
def _ranks(n: int, q: float) -> tuple[float, int, int]:
    # Numpy's default ("linear") percentile: interpolate at h between the closest ranks lo, hi.
    h = (n - 1) * q
    lo = int(np.floor(h))
    return h, lo, min(lo + 1, n - 1)


@njit(cache=True)
def _percentiles(x: np.ndarray, q1: float, q2: float) -> tuple[float, float]:
    # Two percentiles of x from the four order statistics they need, where a full sort was most
    # of the summary's time on long runs.
    n = x.shape[0]
    if n == 0:
        return np.nan, np.nan
    h1, lo1, hi1 = _ranks(n, q1)
    h2, lo2, hi2 = _ranks(n, q2)
    v = _order_stats(x, np.array([lo1, hi1, lo2, hi2]))
    return v[0] + (h1 - lo1) * (v[1] - v[0]), v[2] + (h2 - lo2) * (v[3] - v[2])


@njit(cache=True)
def _order_stats(x: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    # The values a sort of x would put at these ranks. One pass counts x into buckets
    # of equal width, which are in value order, to find the bucket holding each rank; only that
    # bucket's values are then sorted. Sorting all of x was most of the summary's time.
    lo, hi = np.min(x), np.max(x)
    n_b = x.shape[0] // 8 + 1
    span = hi - lo
    # No finite, nonzero bucket width with NaN, infinities, all values equal, or a subnormal span.
    if not (span > 0.0 and np.isfinite(span) and np.isfinite(n_b / span)):
        return np.sort(x)[ranks]
    scale = n_b / span
    count = np.zeros(n_b + 1, np.int64)
    for v in x:
        count[int((v - lo) * scale)] += 1
    out = np.empty(ranks.shape[0])
    b = 0
    below = 0                       # values in the buckets before b
    held_b = -1
    held = np.empty(0)
    for j in range(ranks.shape[0]):
        if ranks[j] < below:        # ranks out of order: walk the buckets from the start
            b = 0
            below = 0
        while below + count[b] <= ranks[j]:
            below += count[b]
            b += 1
        if b != held_b:
            held = np.empty(count[b])
            m = 0
            for v in x:
                if int((v - lo) * scale) == b:
                    held[m] = v
                    m += 1
            held.sort()
            held_b = b
        out[j] = held[ranks[j] - below]
    return out


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
    for j, x in enumerate((ttft, tpot[:nt], e2e)):
        p50, p99 = _percentiles(x, 0.5, 0.99)
        out[2 * j] = 1e3 * p50
        out[2 * j + 1] = 1e3 * p99
    dur = t_end - t_start
    out[6] = toks / dur if dur > 0 else np.nan
    has_slo = np.isfinite(ttft_slo) or np.isfinite(tpot_slo)
    out[7] = good / dur if (has_slo and dur > 0) else np.nan


@njit(parallel=True, cache=True)
def run_batch(C, policy, slots, chunk, conc, rate, prompt, output, kv_cap, n_req, ttft_slo, tpot_slo, seed, out,
               peak, think, pauses):
    # think[j]: closed loops' mean pause (s; -1: one lone prefill of the configuration; 0: none);
    # pauses: n_req unit-mean exponential draws, scaled by it (the load generator's draws).
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
        mean = think[j]
        if mean < 0.0:
            mean = lone_prefill_s(C[j], float(prompt[j]))
        th = pauses * mean if conc[j] >= 2 and mean > 0.0 else np.empty(0)
        _, pk, _ = run_kernel(C[j], arrival, p, o, policy[j], slots[j], chunk[j], tpot_slo, conc[j], kv_cap[j],
                              seed + j, first_t, finish_t, th)
        peak[j] = pk
        summarize(arrival, first_t, finish_t, o, ttft_slo, tpot_slo, out[j])
