"""The sweep's compiled, parallel pass: one request-level simulation per configuration, summarized."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from pareto_atlas.simulate.kernels._cache import CACHE
from pareto_atlas.simulate.kernels.loop import run_kernel
from pareto_atlas.simulate.kernels.stats import summarize
from pareto_atlas.simulate.kernels.step import lone_prefill_s


@njit(parallel=True, cache=CACHE)
def run_batch(
    C,
    policy,
    slots,
    chunk,
    conc,
    rate,
    prompt,
    output,
    kv_cap,
    n_req,
    ttft_slo,
    tpot_slo,
    seed,
    out,
    peak,
    think,
    pauses,
    C_pf,
    prefill_workers,
):
    # think[j]: closed loops' mean pause (s; -1: one lone prefill of the configuration; 0: none);
    # pauses: n_req unit-mean exponential draws, scaled by it (the load generator's draws).
    # C_pf[j], prefill_workers[j]: a disaggregated row's prefill pool (C_pf[j] is C[j] where its
    # workers run the decode engine's parallelism, and on every other policy).
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
            mean = lone_prefill_s(C_pf[j], float(prompt[j]))
        th = pauses * mean if conc[j] >= 2 and mean > 0.0 else np.empty(0)
        _, pk, _ = run_kernel(
            C[j],
            arrival,
            p,
            o,
            policy[j],
            slots[j],
            chunk[j],
            tpot_slo,
            conc[j],
            kv_cap[j],
            seed + j,
            first_t,
            finish_t,
            th,
            C_pf[j],
            prefill_workers[j],
            np.empty(0, np.int64),
        )
        peak[j] = pk
        summarize(arrival, first_t, finish_t, o, ttft_slo, tpot_slo, out[j])
