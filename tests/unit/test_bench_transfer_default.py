"""benchmarks/bench_transfer.py on a default build's store, end to end without an engine: every anchor
'measured' by the simulator with a known truth, the real calibrate stage, then the benchmark's scoring.
A two-size calibration scores the 1.5B against its leave-one-model-out bar; a one-size one projects it."""

from __future__ import annotations

import io
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from pareto_atlas.calibrate.fit import TARGETS, _anchors, predict
from pareto_atlas.calibrate.stage import calibrate_study
from pareto_atlas.measure.campaign import anchor_row, finish_row, run_campaign
from pareto_atlas.measure.model_card import anchor_cards
from pareto_atlas.simulate.params import default_params
from pareto_atlas.spec.cards import HardwareCard
from pareto_atlas.spec.study import load_study
from pareto_atlas.store import Store

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
CPU = HardwareCard("this-cpu", "cpu", 16.0, {"fp32": 0.1}, 24.0, price_per_hour=0.05, price_date="2026-11")
KERNELS = ("Q4_0", "Q8_0", "F16", "Q4_K_M/legacy-rows", "Q4_K_M")
TRUTH = replace(
    default_params(CPU, "llamacpp"),
    eff_bw=0.9,
    overhead_step_s=8e-3,
    gemv_s_per_weight=dict(zip(KERNELS, (40e-12, 50e-12, 70e-12, 45e-12, 45e-12))),
    gemm_s_per_weight=dict(zip(KERNELS, (15e-12, 14e-12, 10e-12, 16e-12, 16e-12))),
)


def _simulated(seed: int = 0):
    rng = np.random.default_rng(seed)

    def measure(study, p, on_progress, bandwidth_gbs):
        row, wl = anchor_row(study, p), p.arm.workload(study.workload)
        df = pd.DataFrame(
            [
                dict(
                    weights=p.arm.weights,
                    kv=p.arm.kv,
                    slots=p.arm.slots,
                    concurrency=p.arm.concurrency,
                    prompt_tokens=wl.prompt_tokens,
                    output_tokens=wl.output_tokens,
                    n_requests=8,
                    spec=p.arm.spec,
                    model=study.model_for(p.arm).name,
                )
            ]
        )
        v = dict(zip(TARGETS, predict(_anchors(df), anchor_cards(study, df)[0], CPU, TRUTH)[0]))
        v = {k: x * float(np.exp(rng.normal(0, 0.02))) for k, x in v.items()}
        m = {
            "ttft": {"p50": v["ttft_p50_ms"], "p99": v["ttft_p99_ms"]},
            "tpot": {"p50": v["tpot_p50_ms"], "p99": v["tpot_p99_ms"]},
            "e2e": {"p50": 1.0, "p99": 1.0},
            "throughput_tok_s": v["throughput_tok_s"],
            "other_cpu_cores": 0.01,
            "contended": False,
        }
        row.update(status="ok", metrics_json=json.dumps(m), engine_version="b1")
        return finish_row(row, time.monotonic()), []

    return measure


@pytest.mark.slow
def test_bench_transfer_scores_the_default_calibration_or_says_the_points_are_projected(tmp_path, capsys):
    sys.path.insert(0, str(BENCH))
    import transfer_default

    study = load_study("default")
    # the arms the simulator measures alike (no speculation, open loop or random weights)
    study = study.model_copy(
        update={"arms": [a for a in study.arms if a.spec == "none" and not a.rate_rps and a.weights != "RANDOM"]}
    )
    path = tmp_path / "store.duckdb"
    with Store(path) as s:
        s.put_probe("p", "this-cpu", CPU.__dict__)
        run_campaign(study, s, measure_fn=_simulated())
        calibrate_study(study, s, Console(file=io.StringIO()))
        run_campaign(load_study(str(transfer_default.HELD_OUT)), s, measure_fn=_simulated(1))
    transfer_default.run(path, "default", False)
    two = capsys.readouterr().out
    # the kernel anchor (measure.random_kquant) is in the fit, and the 1.5B's real Q4_K rows take its cost
    assert "fitted on qwen2.5-0.5b, random-dense-q4km, smollm2-135m" in two and "(leave-one-model-out)" in two
    assert "q15-q4km 128/32 x1, kernels Q4_K_M fitted" in two
    assert "q05-f16-p256 256/64 x1, kernels F16 fitted" in two and "projected, not carried" not in two
    with Store(path) as s:  # the same build without its second size (the kernel anchor is not a size)
        s.con.execute("DELETE FROM calibrations")
        s.con.execute("DELETE FROM anchors WHERE model = 'smollm2-135m-instruct'")
        calibrate_study(study, s, Console(file=io.StringIO()))
    transfer_default.run(path, "default", False)
    one = capsys.readouterr().out
    assert "projected, not carried" in one and "pareto-atlas measure default --arm smol-q4_0" in one
