"""The compiled simulator's outputs, bit for bit, against a digest saved before its refactors.

tests/data/kernels_digest.json was computed by `digests()` below on the code before kernels.py was
split into a package (issue 36) and before the disaggregated pools (issue 31): a refactor of the
kernels must leave every simulated figure identical. Regenerate it only for a change that means to
move the figures:  PYTHONPATH=src python tests/unit/test_simulate_kernels_identity.py --write
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from pareto_atlas.simulate import des
from pareto_atlas.simulate.cost_model import coeffs
from pareto_atlas.simulate.params import default_params
from pareto_atlas.simulate.space import Load, Workload, default_space
from pareto_atlas.simulate.sweep import sweep
from pareto_atlas.spec.cards import HardwareCard, shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs

try:  # the parallel knobs (issue 31)
    from pareto_atlas.spec.knobs import PARALLEL_DEFAULTS
except ImportError:  # the code the digest was computed on
    PARALLEL_DEFAULTS = {}

SAVED = Path(__file__).parents[1] / "data" / "kernels_digest.json"
CPU = HardwareCard("this-cpu", "cpu", 20.0, {"fp32": 0.1}, 24.0, price_per_hour=0.05, price_date="2026-11")


def _h(*arrays) -> str:
    d = hashlib.sha256()
    for a in arrays:
        d.update(np.ascontiguousarray(a).tobytes())
    return d.hexdigest()[:24]


def _des_cases() -> dict[str, str]:
    m, gpu = shipped_models()["qwen2.5-7b"], shipped_hardware()["H100-PCIe"]
    out = {}
    for hw in (gpu, CPU):
        p = default_params(hw)
        for batching in ("static", "continuous", "chunked", "slo", "disagg"):
            if batching == "disagg" and hw.kind == "cpu":
                continue
            for spec in ("none", "draft"):
                k = Knobs(
                    batching=batching,
                    slots=8,
                    chunk_tokens=256,
                    spec=spec,
                    spec_k=4 if spec != "none" else 0,
                    spec_accept=0.6 if spec != "none" else 0.0,
                )
                c = coeffs(m, hw, k, p)
                loads = {
                    "closed": des.closed_loop(8, 300, 512, 128),
                    "think": des.closed_loop(8, 300, 512, 64, np.random.default_rng(1).exponential(0.05, 300)),
                    "poisson": des.poisson(4.0, 300, 512, 128, 3),
                    "trace": des.trace(
                        np.arange(60) * 0.05, 100 + 37 * np.arange(60) % 900, 1 + 11 * np.arange(60) % 200
                    ),
                }
                for name, a in loads.items():
                    r = des.run(c, a, batching, 8, 256, kv_cap_tokens=20_000, slo={"tpot_ms": 40.0}, seed=7)
                    out[f"{hw.name}/{batching}/{spec}/{name}"] = _h(
                        r.arrival, r.first_t, r.finish_t, r.output, np.array([r.steps, r.peak_kv_tokens, r.preemptions])
                    )
    return out


def _sweep_cases() -> dict[str, str]:
    m = shipped_models()["qwen2.5-0.5b"]
    gpu = shipped_hardware()["L4"]
    space = default_space(
        m,
        [CPU, gpu],
        [Workload("w", 384, 96)],
        [Load(concurrency=1), Load(concurrency=16, think="auto"), Load(rate_rps=3.0), Load(utilization=0.5)],
    )
    # every policy on both kinds; "continuous" on a GPU is the engine's own scheduler since issue 31,
    # so the GPU rows here are the other policies (the CPU's continuous rows stay)
    # one-GPU layouts only (the grid searches parallel ones since issue 31; the digest predates them)
    one_gpu = [k for k in space.knobs if all(getattr(k, f, d) == d for f, d in PARALLEL_DEFAULTS.items())]
    knobs = tuple(k for k in one_gpu[::7] if k.batching != "continuous" or k.weights in ("Q8_0", "Q4_0"))
    df = sweep(replace(space, knobs=knobs), n_requests=60, seed=3)
    cols = [
        "ttft_p50_ms",
        "ttft_p99_ms",
        "tpot_p50_ms",
        "tpot_p99_ms",
        "e2e_p50_ms",
        "e2e_p99_ms",
        "throughput_tok_s",
        "goodput_rps",
        "mem_gb",
        "rate_rps",
    ]
    df = df.sort_values("point_id").reset_index(drop=True)
    return {
        "sweep/rows": str(len(df)),
        "sweep/ids": _h(df.point_id.to_numpy().astype("U16")),
        "sweep/metrics": _h(df[cols].to_numpy(float)),
    }


def digests() -> dict[str, str]:
    return {**_des_cases(), **_sweep_cases()}


def test_outputs_identical_to_saved_digest():
    saved = json.loads(SAVED.read_text())
    now = digests()
    assert now.keys() == saved.keys()
    moved = sorted(k for k in saved if saved[k] != now[k])
    assert not moved, f"simulated outputs moved for {len(moved)} cases, e.g. {moved[:5]}"


def test_kernel_cache_stamped_by_the_whole_package():
    # numba keys a cached function to its own file; the kernels inline each other across files, so
    # each is stamped by all of them (kernels._cache) or compiled afresh where that is unavailable
    from pareto_atlas.simulate.kernels import _cache, run_kernel, step_time

    if not _cache.CACHE:
        return
    for f in (run_kernel, step_time):
        loc = f._cache._impl._locator
        assert isinstance(loc, _cache.PackageLocator)
        assert loc.get_source_stamp() == _cache.package_stamp()


if __name__ == "__main__" and "--write" in sys.argv:
    SAVED.write_text(json.dumps(digests(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {SAVED}")
