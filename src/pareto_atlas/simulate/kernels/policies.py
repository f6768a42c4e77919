"""One inlined helper per batching policy that needs one: the prefill token budget of a step (chunked,
SLO-aware) and the disaggregated prefill pool's routing and prefill (one request's, for loop.run_kernel and
pool.run_pool_kernel alike). Static, continuous and disagg prefill every pending prompt token of the running
batch in one step (loop.run_kernel)."""

from __future__ import annotations

from numba import njit

from pareto_atlas.simulate.kernels._cache import CACHE
from pareto_atlas.simulate.kernels.layout import CV, XFER
from pareto_atlas.simulate.kernels.rand import _noise
from pareto_atlas.simulate.kernels.step import _step_within, prefill_pairs, step_time


@njit(cache=CACHE, inline="always")
def _budget_chunked(budget_default, n_dec, q):
    # chunked: one token budget per step shared by the decodes and the prefill chunks (at least one
    # prompt token when nothing decodes, so a prompt always moves)
    return max(budget_default - int(n_dec * q), 0 if n_dec > 0 else 1)


@njit(cache=CACHE, inline="always")
def _budget_slo(c, nrun, s_pf, s_to_pf, pending, budget_default, n_dec, ctx_dec, tpot_target, upper):
    # slo: decode priority, the largest prefill chunk that keeps this step within the TPOT target
    # (the whole default budget when nothing decodes)
    if n_dec == 0:
        return budget_default
    before0 = 0.0
    for j in range(nrun):
        if s_to_pf[j] > 0:
            before0 = float(s_pf[j])
            break
    hi = min(pending, budget_default)
    lo = 0
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _step_within(
            c,
            float(n_dec),
            float(ctx_dec),
            float(mid),
            prefill_pairs(float(mid), before0),
            before0,
            float(n_dec + 1),
            tpot_target,
            upper,
        ):
            lo = mid
        else:
            hi = mid - 1
    return lo


@njit(cache=CACHE, inline="always")
def _least_loaded(free_at):
    # disagg: the prefill worker free first (the lowest index among equals, so one worker is the pair)
    w = 0
    for j in range(1, free_at.shape[0]):
        if free_at[j] < free_at[w]:
            w = j
    return w


@njit(cache=CACHE, inline="always")
def _prefill_alone(c, p, start):
    # disagg: when a prefill worker that starts a p-token prompt at `start` finishes it (one prompt
    # per step, with the step's jitter)
    return start + step_time(c, 0.0, 0.0, p, prefill_pairs(p, 0.0), 0.0, 1.0) * _noise(c[CV], 1.0)


@njit(cache=CACHE, inline="always")
def _prefill_one(c, c_pf, i, p, arrival, ready, prompt, first_t, pf_free):
    # disagg: request i prefills p tokens on the prefill worker free first (its first token leaves
    # from there); ready for a decode engine once its KV (c[XFER] per prompt token) has crossed the
    # link. One request, not the pool's loop: a shared loop (inlined or called) ran the disaggregated
    # kernels 20-60 % slower (numba), this one as fast as the two loops written out.
    w = _least_loaded(pf_free)
    end = _prefill_alone(c_pf, p, max(arrival[i], pf_free[w]))
    pf_free[w] = end
    first_t[i] = end
    ready[i] = end + c[XFER] * float(prompt[i])
