"""Sweeps produce the points-table columns over a compatible space."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from pareto_atlas.simulate.space import Load, Workload, compatible, default_space
from pareto_atlas.simulate.sweep import sweep
from pareto_atlas.spec.cards import HardwareCard, shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs

CPU = HardwareCard("this-cpu", "cpu", 20.0, {"fp32": 0.1}, 24.0, price_per_hour=0.05, price_date="2026-11")


def test_compatibility_rules():
    assert compatible(Knobs(weights="FP8"), CPU)
    assert not compatible(Knobs(weights="Q4_K_M", kv="q8_0"), CPU)
    assert compatible(Knobs(weights="Q4_0"), shipped_hardware()["H100-SXM"])
    assert compatible(Knobs(batching="disagg"), CPU)


def test_small_sweep_has_contract_columns_and_sane_values():
    m = shipped_models()["qwen2.5-0.5b"]
    sp = default_space(m, [CPU, shipped_hardware()["L4"]], [Workload("w", 128, 32)], [Load(concurrency=2)])
    sp = replace(sp, knobs=sp.knobs[::40])
    df = sweep(sp, n_requests=20)
    assert len(df) == sp.size() > 0
    for col in ("point_id", "label", "hardware", "workload", "concurrency", "rate_rps", "weights", "kv", "optimizations",
                "n_opts", "provenance", "ttft_p50_ms", "tpot_p99_ms", "e2e_p99_ms", "throughput_tok_s", "goodput_rps",
                "mem_gb", "lat_rel_err", "thr_rel_err", "feasible", "infeasible_reason", "cost_per_mtok"):
        assert col in df.columns, col
    ok = df[df.feasible]
    assert (ok.tpot_p99_ms >= ok.tpot_p50_ms).all() and (ok.throughput_tok_s > 0).all()
    assert df.point_id.is_unique
    assert not ((df.hardware == "this-cpu") & (df.weights == "FP8")).any()
    assert np.isfinite(ok.cost_per_mtok).all()
