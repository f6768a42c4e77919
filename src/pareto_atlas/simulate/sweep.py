"""Sweep a configuration space: one compiled, parallel pass of the request-level simulation per point."""

from __future__ import annotations

import hashlib
import math
from dataclasses import fields, replace

import numpy as np
import pandas as pd

from pareto_atlas.simulate.api import METRICS, PERCENTILE_METHOD, resolve_acceptance
from pareto_atlas.simulate.cost_model import N_COEFFS, coeffs
from pareto_atlas.simulate.kernels import POLICIES, run_batch
from pareto_atlas.simulate import moe_law
from pareto_atlas.simulate.memory import plan_memory
from pareto_atlas.simulate.parallel import replica_load
from pareto_atlas.simulate.params import CalibParams, default_params
from pareto_atlas.simulate.schedulers import resolve
from pareto_atlas.simulate.space import Space, compatible
from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.spec.think import SEED, think_times
from pareto_atlas.simulate.des_points import _shared, pools, _pooled, _utilization_rates, _replay


def _point_id(knobs_key: str, hw: str, workload: str, conc: int, rate: float, util: float = 0.0) -> str:
    # a utilization load is named by its fraction, not by the rate the configuration's capacity gave it
    load = f"{rate:g}" if not util > 0 else f"u{util:g}"
    return hashlib.sha256(f"{knobs_key}|{hw}|{workload}|{conc}|{load}".encode()).hexdigest()[:16]


def sweep(
    space: Space, params: dict[str, CalibParams] | None = None, n_requests: int = 200, seed: int = 0
) -> pd.DataFrame:
    """Simulate every compatible point of the space; one row per (knobs, hardware, workload, load).

    params: CalibParams by hardware name (uncalibrated defaults for the rest).
    """
    params = params or {}
    pairs = space.pairs()
    W, L = space.workloads, space.loads
    n = len(pairs) * len(W) * len(L)
    C = np.empty((n, N_COEFFS))
    C_pf = np.empty((n, N_COEFFS))  # disaggregated rows' prefill workers (the decode vector elsewhere)
    n_pf = np.ones(n, np.int64)  # and how many
    n_dw = np.ones(n, np.int64)  # decode engines (a pool of them runs outside the batch kernel)
    policy = np.empty(n, np.int64)
    slots = np.empty(n, np.int64)
    chunk = np.empty(n, np.int64)
    conc = np.empty(n, np.int64)
    rate = np.empty(n)
    think = np.empty(n)
    prompt = np.empty(n, np.int64)
    output = np.empty(n, np.int64)
    kv_cap = np.empty(n)
    replay = np.zeros(n, bool)  # the point replays its workload's trace
    shared = np.zeros(n, bool)  # its workload shares prefixes: requests of their own, outside the batch kernel
    slot_cache = np.zeros(n, bool)  # its prefix cache is llama.cpp's slots (a CPU card, llama.cpp), not blocks
    pair_idx = np.empty(n, np.int64)
    wl_idx = np.empty(n, np.int64)
    load_idx = np.empty(n, np.int64)
    weights_b = np.empty(n)
    kvb_tok = np.empty(n)
    reasons = [""] * n
    prior_src = [""] * n
    schedulers = []  # per pair: the policy it runs, in words
    busy = np.ones(n)  # replicas a row's load keeps busy: its throughput's multiple
    rate_total = np.empty(n)  # the load's rate over all replicas (what the row reports)
    r = 0
    for pi, (k, hw) in enumerate(pairs):
        p = params.get(hw.name) or default_params(hw)
        accept, prior = resolve_acceptance(k)
        c = coeffs(space.model, hw, k, p, accept=accept)  # one worker (decode pool's for disagg)
        # a GPU point's continuous batching is its engine's own scheduler (simulate.schedulers)
        batching, chunk_tokens, label = resolve(k.batching, k.chunk_tokens, hw, space.engine)
        schedulers.append(label)
        c_pf, workers, decoders = pools(space.model, hw, k, p, accept, c)
        for wi, wl in enumerate(W):
            plan = plan_memory(space.model, hw, k, *wl.longest, p)
            for li, ld in enumerate(L):
                if ld.trace and not wl.trace:
                    raise ValueError(f"load: trace=True replays the workload's trace; workload {wl.name!r} has none")
                replay[r] = ld.trace
                shared[r] = wl.shares and decoders == 1
                slot_cache[r] = hw.kind == "cpu" and space.engine == "llamacpp"
                C[r], C_pf[r], n_pf[r], n_dw[r] = c, c_pf, workers, decoders
                policy[r] = POLICIES.index(batching)
                slots[r], chunk[r] = k.slots, chunk_tokens
                # one replica is simulated under its share of the load (simulate.parallel.replica_load)
                conc[r], rate[r], busy[r] = replica_load(ld.concurrency, ld.rate_rps, k.replicas)
                rate_total[r], think[r] = ld.rate_rps, ld.think_code
                prompt[r], output[r] = wl.prompt_tokens, wl.output_tokens
                kv_cap[r] = plan.kv_cap_tokens if plan.feasible else np.inf
                weights_b[r], kvb_tok[r] = plan.weights_bytes, plan.kv_bytes_per_token
                pair_idx[r], wl_idx[r], load_idx[r] = pi, wi, li
                reasons[r], prior_src[r] = plan.reason, prior
                r += 1
    out = np.full((n, len(METRICS)), np.nan)
    peak = np.zeros(n)
    slo = space.slo or {}
    util = np.array([L[i].utilization for i in load_idx]) if n else np.zeros(0)
    if (util > 0).any():

        def shared_capacity(r: int, c_r: np.ndarray, c_pf_r: np.ndarray) -> np.ndarray:
            # a closed loop of as many clients as slots, no pauses, on the workload's own requests and cache
            k_r = pairs[pair_idx[r]][0]
            return _shared(
                c_r,
                c_pf_r,
                int(n_pf[r]),
                W[wl_idx[r]],
                k_r,
                int(policy[r]),
                kv_cap[r],
                int(slots[r]),
                0.0,
                0.0,
                False,
                int(n_requests),
                {},
                int(seed) + r,
                int(chunk[r]),
                bool(slot_cache[r]),
            )[0]

        # a fraction of one replica's capacity, per replica; the row reports it over all replicas
        rate[util > 0] = _utilization_rates(
            C,
            policy,
            slots,
            chunk,
            prompt,
            output,
            np.where(replay, np.inf, kv_cap),
            util,
            pair_idx * len(W) + wl_idx,
            int(n_requests),
            int(seed),
            C_pf,
            n_pf,
            n_dw,
            shared & ~replay,
            shared_capacity,
        )
        rate_total[util > 0] = rate[util > 0] * busy[util > 0]
    pooled = (n_dw > 1) & ~replay & np.isfinite(kv_cap)  # a pool of decode engines: outside the batch kernel
    hits = np.full(n, np.nan)
    # the batch kernel draws closed and Poisson loads itself and passes over infinite caps: traces and
    # workloads that share prefixes go below
    run_batch(
        C,
        policy,
        slots,
        chunk,
        conc,
        rate,
        prompt,
        output,
        np.where(replay | pooled | shared, np.inf, kv_cap),
        int(n_requests),
        slo.get("ttft_ms", math.inf) / 1e3,
        slo.get("tpot_ms", math.inf) / 1e3,
        int(seed),
        out,
        peak,
        think,
        think_times(1.0, int(n_requests), SEED),
        C_pf,
        n_pf,
    )
    for r in np.flatnonzero(pooled):
        out[r], peak[r] = _pooled(
            C[r],
            C_pf[r],
            int(n_pf[r]),
            int(n_dw[r]),
            int(slots[r]),
            kv_cap[r],
            int(conc[r]),
            rate[r],
            think[r],
            int(prompt[r]),
            int(output[r]),
            int(n_requests),
            slo,
            int(seed) + int(r),
        )
    for r in np.flatnonzero(shared & np.isfinite(kv_cap)):
        out[r], peak[r], hits[r] = _shared(
            C[r],
            C_pf[r],
            int(n_pf[r]),
            W[wl_idx[r]],
            pairs[pair_idx[r]][0],
            int(policy[r]),
            kv_cap[r],
            int(conc[r]),
            rate[r],
            think[r],
            bool(replay[r]),
            int(n_requests),
            slo,
            int(seed) + int(r),
            int(chunk[r]),
            bool(slot_cache[r]),
        )
    for r in np.flatnonzero(replay & ~shared & np.isfinite(kv_cap)):
        out[r], peak[r] = _replay(
            C[r],
            W[wl_idx[r]],
            int(policy[r]),
            int(slots[r]),
            int(chunk[r]),
            kv_cap[r],
            slo,
            int(seed) + int(r),
            C_pf[r],
            int(n_pf[r]),
            pairs[pair_idx[r]][0].replicas,
        )
    for m in ("throughput_tok_s", "goodput_rps"):  # replicas add up; latencies are one replica's
        out[:, METRICS.index(m)] *= busy
    df = _frame(
        space,
        pairs,
        params,
        pair_idx,
        wl_idx,
        load_idx,
        out,
        peak,
        weights_b,
        kvb_tok,
        kv_cap,
        reasons,
        prior_src,
        rate_total,
    )
    df["scheduler"] = np.array(schedulers, dtype=object)[pair_idx]
    # share of prompt tokens the prefix cache served (0 with it off); NaN where the workload shares nothing
    df["prefix_hit_rate"] = hits
    return df


def _frame(
    space, pairs, params, pair_idx, wl_idx, load_idx, out, peak, weights_b, kvb_tok, kv_cap, reasons, prior_src, rate
) -> pd.DataFrame:
    names = [f.name for f in fields(Knobs)]
    knob_rows = pd.DataFrame([[getattr(k, f) for f in names] for k, _ in pairs], columns=names)
    df = knob_rows.iloc[pair_idx].reset_index(drop=True)
    hw = [h for _, h in pairs]
    hp = [params.get(h.name) or default_params(h) for h in hw]
    labels = np.array([k.label() for k, _ in pairs], dtype=object)
    opts = [k.optimizations() for k, _ in pairs]
    keys = [k.key() for k, _ in pairs]
    df.insert(0, "label", labels[pair_idx])
    df.insert(1, "hardware", np.array([h.name for h in hw], dtype=object)[pair_idx])
    df.insert(2, "workload", np.array([w.name for w in space.workloads], dtype=object)[wl_idx])
    df["prompt_tokens"] = np.array([w.prompt_tokens for w in space.workloads])[wl_idx]
    df["output_tokens"] = np.array([w.output_tokens for w in space.workloads])[wl_idx]
    df["concurrency"] = np.array([ld.concurrency for ld in space.loads])[load_idx]
    df["rate_rps"] = np.where(rate > 0, rate, np.nan)
    df["utilization"] = np.array([ld.utilization if ld.utilization > 0 else np.nan for ld in space.loads])[load_idx]
    df["optimizations"] = np.array(["+".join(o) for o in opts], dtype=object)[pair_idx]
    df["n_opts"] = np.array([len(o) for o in opts])[pair_idx]
    prior_src = np.array(prior_src, dtype=object)
    df["provenance"] = np.where(prior_src != "", "prior", "simulated")
    df["prior_source"] = prior_src
    for i, m in enumerate(METRICS):
        df[m] = out[:, i]
    feasible = np.isfinite(kv_cap)
    df["mem_gb"] = (weights_b + np.where(feasible, peak, 0.0) * kvb_tok) / 1e9
    df["feasible"] = feasible
    df["infeasible_reason"] = reasons
    # a point on several GPUs carries its card's link fit's held-out bar, an MoE its MoE fit's, one GPU
    # its card's widened to its weight format's (CalibParams.point_bars)
    bars = [p.point_bars(k.gpus(), space.model.is_moe, k.weights, space.model) for (k, _), p in zip(pairs, hp)]
    df["lat_rel_err"] = np.array([b[0] for b in bars])[pair_idx]
    df["thr_rel_err"] = np.array([b[1] for b in bars])[pair_idx]
    # and an MoE point whose layers an operator law prices says which (simulate.moe_law)
    notes = [moe_law.point_note(space.model, h, k, p) for (k, h), p in zip(pairs, hp)]
    df["calib_provenance"] = np.array([b[2] + n for b, n in zip(bars, notes)], dtype=object)[pair_idx]
    # where the weight format's kernel cost came from on this card: fitted on its anchors, borrowed from
    # carried from a card of its generation, its family's, or derived from the roofline (no anchor of the
    # format or its family on the card or its generation: an extrapolation)
    df["weights_cost"] = np.array(
        [p.weight_cost(k.weights, "gemv", space.model)[1] for (k, _), p in zip(pairs, hp)], dtype=object
    )[pair_idx]
    # every GPU the configuration holds (replicas, stages, both pools): per-device throughput and cost count them
    n_dev = np.array([k.gpus() for k, _ in pairs])[pair_idx]
    df["gpus"] = n_dev
    df["n_devices"] = n_dev
    df["throughput_per_device_tok_s"] = df["throughput_tok_s"].to_numpy() / n_dev
    price = np.array([h.price_per_hour for h in hw])[pair_idx] * n_dev
    df["price_per_hour"] = price
    df["price_date"] = np.array([h.price_date for h in hw], dtype=object)[pair_idx]
    with np.errstate(divide="ignore", invalid="ignore"):
        df["cost_per_mtok"] = np.where(price > 0, price / (df["throughput_tok_s"].to_numpy() * 3600) * 1e6, np.nan)
    df["percentile_method"] = PERCENTILE_METHOD
    key_arr = np.array(keys, dtype=object)[pair_idx]
    df.insert(
        0,
        "point_id",
        [
            _point_id(k, h, w, c, r if r == r else 0.0, u if u == u else 0.0)
            for k, h, w, c, r, u in zip(
                key_arr, df["hardware"], df["workload"], df["concurrency"], df["rate_rps"], df["utilization"]
            )
        ],
    )
    return df


def sweep_knobs(space: Space, knobs: list[Knobs]) -> Space:
    """The same space over another knob list (e.g. the atlas's candidates)."""
    return replace(
        space,
        knobs=tuple(k for k in knobs if any(not compatible(k, h, space.engine, space.model) for h in space.hardware)),
    )
