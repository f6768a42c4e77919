"""One simulated point: cost model + memory plan + request-level simulation -> points-table columns."""

from __future__ import annotations

import math

import numpy as np

from pareto_atlas.measure.metrics import PERCENTILE_METHOD  # one statement of the method, measured or simulated
from pareto_atlas.simulate import des as arr
from pareto_atlas.simulate import moe_law
from pareto_atlas.simulate.cost_model import coeffs, prefill_coeffs
from pareto_atlas.simulate.kernels import lone_prefill_s
from pareto_atlas.simulate.memory import plan_memory
from pareto_atlas.simulate.parallel import check_layout, replica_load
from pareto_atlas.simulate.params import CalibParams, default_params
from pareto_atlas.simulate.schedulers import resolve
from pareto_atlas.simulate.space import Load
from pareto_atlas.spec.cards import HardwareCard, ModelCard
from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.spec.priors import acceptance_from_tokens_per_step, get_prior
from pareto_atlas.spec.think import think_times

METRICS = (
    "ttft_p50_ms",
    "ttft_p99_ms",
    "tpot_p50_ms",
    "tpot_p99_ms",
    "e2e_p50_ms",
    "e2e_p99_ms",
    "throughput_tok_s",
    "goodput_rps",
)
EAGLE_PRIOR = "eagle_tokens_per_step"
DRAFT_PRIOR = "specdec_latency"  # a same-family draft model's batch-1 latency speedup (leviathan2022fast)


def resolve_acceptance(knobs: Knobs) -> tuple[float, str]:
    """Acceptance per drafted token and where it came from: the knobs (measured or chosen) or a prior."""
    if knobs.spec == "none" or knobs.spec_k <= 0:
        return 0.0, ""
    if knobs.spec_accept > 0:
        return knobs.spec_accept, ""
    if knobs.spec in ("eagle", "draft"):
        prior = get_prior(EAGLE_PRIOR if knobs.spec == "eagle" else DRAFT_PRIOR)
        # The lower end of the published range: a batch-1 latency speedup bounds tokens per verify
        # step from below. A point resting on it is a prior ("projected"), never a verdict.
        return acceptance_from_tokens_per_step(prior.lo, knobs.spec_k), prior.label
    return 0.0, ""


def simulate_point(
    model: ModelCard,
    hw: HardwareCard,
    knobs: Knobs,
    prompt_tokens: int,
    output_tokens: int,
    concurrency: int | None = None,
    rate_rps: float | None = None,
    n_requests: int = 200,
    params: CalibParams | None = None,
    slo: dict | None = None,
    *,
    draft: ModelCard | None = None,
    seed: int = 0,
    think: float | str = 0.0,
) -> dict:
    """Simulate one configuration under closed-loop `concurrency` or Poisson `rate_rps` (exactly one).

    think: at concurrency >= 2, each client's mean pause before a request (s), or "auto" (one lone
    prefill), with the load generator's draws (spec.think).

    slo: {"ttft_ms": .., "tpot_ms": ..}: goodput counts requests meeting both; batching="slo"
    uses tpot_ms as its target. Returns the points-table columns the simulator owns.
    """
    if (concurrency is None) == (rate_rps is None):
        raise ValueError("simulate_point: give exactly one of concurrency (closed loop) or rate_rps (Poisson)")
    if prompt_tokens < 1 or output_tokens < 1:
        raise ValueError(
            f"simulate_point: prompt_tokens {prompt_tokens} and output_tokens {output_tokens} must be >= 1"
        )
    params = params or default_params(hw)
    if why := check_layout(model, hw, knobs):
        raise ValueError(why)
    accept, prior_label = resolve_acceptance(knobs)
    plan = plan_memory(model, hw, knobs, prompt_tokens, output_tokens, params, draft)
    lat_err, thr_err, calib = params.point_bars(knobs.gpus(), model.is_moe, knobs.weights, model)
    calib += moe_law.point_note(model, hw, knobs, params)  # its MoE layers priced by an operator law
    row = {
        "hardware": hw.name,
        "concurrency": int(concurrency or 0),
        "rate_rps": float(rate_rps) if rate_rps is not None else math.nan,
        "provenance": "prior" if prior_label else "simulated",
        "prior_source": prior_label,
        "calib_provenance": calib,
        "percentile_method": PERCENTILE_METHOD,
        "n_devices": knobs.gpus(),
        "gpus": knobs.gpus(),
        "lat_rel_err": lat_err,
        "thr_rel_err": thr_err,
        "feasible": plan.feasible,
        "infeasible_reason": plan.reason,
    }
    if not plan.feasible:
        row.update({m: math.nan for m in METRICS}, mem_gb=plan.mem_gb(0.0))
        return row
    c = coeffs(model, hw, knobs, params, accept=accept, draft=draft)  # one worker (decode pool's for disagg)
    # one replica, under its share of the load; replicas add throughput (simulate.parallel.replica_load)
    conc, rate, busy = replica_load(int(concurrency or 0), float(rate_rps or 0.0), knobs.replicas)
    if concurrency is not None:
        pauses = None
        mean = Load(concurrency=int(conc), think=think).think_code
        if mean < 0:
            mean = lone_prefill_s(c, float(prompt_tokens))
        if mean > 0:
            pauses = think_times(mean, n_requests)
        a = arr.closed_loop(int(conc), n_requests, prompt_tokens, output_tokens, pauses)
    else:
        a = arr.poisson(float(rate), n_requests, prompt_tokens, output_tokens, seed)
    batching, chunk, row["scheduler"] = resolve(knobs.batching, knobs.chunk_tokens, hw)
    pools = {}
    if batching == "disagg":  # the prefill pool's workers and the decode engines (simulate.des.run)
        pools = {
            "prefill_c": prefill_coeffs(model, hw, knobs, params, accept=accept, draft=draft),
            "prefill_workers": knobs.prefill_workers,
            "decode_workers": knobs.decode_workers,
        }
    res = arr.run(c, a, batching, knobs.slots, chunk, plan.kv_cap_tokens, slo, seed, **pools)
    row.update(res.summary)
    for m in ("throughput_tok_s", "goodput_rps"):
        if m in row:
            row[m] *= busy
    row["mem_gb"] = plan.mem_gb(res.peak_kv_tokens)
    row["preemptions"] = res.preemptions
    return row


def simulate_trace(
    model: ModelCard,
    hw: HardwareCard,
    knobs: Knobs,
    times: np.ndarray,
    prompts: np.ndarray,
    outputs: np.ndarray,
    params: CalibParams | None = None,
    slo: dict | None = None,
    seed: int = 0,
) -> arr.DesResult:
    """Replay a trace (arrival seconds, prompt and output lengths) and return per-request results."""
    params = params or default_params(hw)
    if why := check_layout(model, hw, knobs):
        raise ValueError(why)
    if knobs.replicas > 1:
        raise ValueError(
            f"simulate_trace: knobs.replicas {knobs.replicas}: a trace replays on one replica; "
            f"split it across replicas first"
        )
    accept, _ = resolve_acceptance(knobs)
    plan = plan_memory(model, hw, knobs, int(np.max(prompts)), int(np.max(outputs)), params)
    if not plan.feasible:
        raise ValueError(f"simulate_trace: infeasible on {hw.name}: {plan.reason}")
    c = coeffs(model, hw, knobs, params, accept=accept)
    batching, chunk, _ = resolve(knobs.batching, knobs.chunk_tokens, hw)
    return arr.run(c, arr.trace(times, prompts, outputs), batching, knobs.slots, chunk, plan.kv_cap_tokens, slo, seed)
