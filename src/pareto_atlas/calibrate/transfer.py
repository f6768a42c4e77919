"""vLLM's per-step overheads, measured on this CPU, carried to GPU cards (with a wider error bar).

What carries: the fixed time of a step (`overhead_step_s`) and per sequence in it (`overhead_seq_s`)
are host-side Python: vLLM's scheduler, input preparation, sampling bookkeeping, detokenization and
the hop between its API server and engine core. On a GPU host the same code runs on the host's
CPU, so it carries, divided by how much faster that host runs it: HOST_SPEEDUP, an assumption, not
a measurement (a server core with nothing else to do against one of two vCPUs shared with the
model's own OpenMP threads here; torch's eager per-op dispatch, part of the CPU figure, shrinks
further under CUDA graphs; vLLM's asynchronous scheduling hides some of it behind the GPU step).

What does not carry: every efficiency (bandwidth, FLOP/s, attention). Those measure oneDNN and AVX2
kernels on this CPU, nothing like CUDA kernels; GPU cards keep their defaults (or a GPU calibration).

The error bar: a batch-1 decode step recomputed with the overheads at both ends of the speed-up's
range; the larger relative change is added in quadrature to the card's error bar.
"""

from __future__ import annotations

import math
from dataclasses import replace

from pareto_atlas.simulate.cost_model import coeffs, decode_tokens_per_s
from pareto_atlas.simulate.params import CalibParams
from pareto_atlas.spec.cards import HardwareCard, ModelCard
from pareto_atlas.spec.knobs import Knobs

HOST_SPEEDUP = 2.0  # central: a GPU host runs vLLM's Python this much faster
HOST_SPEEDUP_RANGE = (1.0, 4.0)  # what the error bar allows
CARRIED = ("overhead_step_s", "overhead_seq_s")


def _step_s(model: ModelCard, hw: HardwareCard, p: CalibParams, ctx: int) -> float:
    """One decode step of one sequence at context `ctx` on `hw` (16-bit weights, vLLM's default)."""
    return 1.0 / decode_tokens_per_s(coeffs(model, hw, Knobs(weights="F16"), p), 1, float(ctx))


def _scaled(p: CalibParams, cpu: CalibParams, speedup: float) -> CalibParams:
    return replace(p, **{k: getattr(cpu, k) / speedup for k in CARRIED})


def carry_overheads(
    gpu: CalibParams, cpu_vllm: CalibParams, model: ModelCard, hw: HardwareCard, ctx: int = 160
) -> CalibParams:
    """`gpu` (a GPU card's vLLM parameters) with vLLM's overheads from its CPU calibration, its error
    bars widened by what the host speed-up's range does to a decode step, and a provenance saying so."""
    central = _scaled(gpu, cpu_vllm, HOST_SPEEDUP)
    t = _step_s(model, hw, central, ctx)
    spread = max(abs(_step_s(model, hw, _scaled(gpu, cpu_vllm, s), ctx) / t - 1.0) for s in HOST_SPEEDUP_RANGE)
    lat = math.hypot(gpu.lat_rel_err, spread)
    thr = math.hypot(gpu.thr_rel_err, spread)
    lo, hi = HOST_SPEEDUP_RANGE
    prov = (
        f"{gpu.provenance}; vLLM per-step overheads from its calibration on this CPU "
        f"({cpu_vllm.overhead_step_s * 1e3:.1f} ms/step, {cpu_vllm.overhead_seq_s * 1e3:.2f} ms/seq) / host "
        f"speed-up {HOST_SPEEDUP:g} (assumed {lo:g}-{hi:g}): {central.overhead_step_s * 1e3:.1f} ms/step, "
        f"{central.overhead_step_s / t:.0%} of a batch-1 decode step; kernel efficiencies not carried "
        f"(CPU kernels); error bar widened by ±{spread:.0%} for the speed-up's range"
    )
    return replace(central, engine="vllm", lat_rel_err=lat, thr_rel_err=thr, provenance=prov)
