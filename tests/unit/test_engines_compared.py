"""Two engines on one machine: calibrations kept apart by engine, vLLM's CPU overheads carried to GPU
cards with a wider error bar, vLLM's CPU grid, and rows labelled by engine."""

from __future__ import annotations

import pandas as pd

from pareto_atlas.calibrate.stage import engines_of
from pareto_atlas.calibrate.transfer import carry_overheads
from pareto_atlas.simulate.params import CalibParams, default_params
from pareto_atlas.simulate.space import compatible, default_knobs
from pareto_atlas.simulate.stage import latest_params
from pareto_atlas.spec.cards import HardwareCard, shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.spec.study import load_study
from pareto_atlas.store import Store
from pareto_atlas.store.compare import companion, engine_label, quality_study
from pareto_atlas.store.db import dumps
from pareto_atlas.store.points import point_id

CPU = HardwareCard("this-cpu", "cpu", 20.0, {"fp32": 0.1}, 24.0, price_per_hour=0.05, price_date="2026-11")
H200 = shipped_hardware()["H200"]
QWEN05 = shipped_models()["qwen2.5-0.5b"]


def test_vllm_overheads_carry_to_a_gpu_and_widen_its_error_bar():
    gpu = default_params(H200, "vllm")
    cpu = CalibParams(hardware="this-cpu", engine="vllm", overhead_step_s=0.030, overhead_seq_s=0.002)
    p = carry_overheads(gpu, cpu, QWEN05, H200)
    assert p.overhead_step_s == 0.015 and p.overhead_seq_s == 0.001  # halved: the assumed host speed-up
    assert p.eff_bw == gpu.eff_bw and p.eff_flops == gpu.eff_flops  # kernels do not carry
    assert p.lat_rel_err > gpu.lat_rel_err and p.thr_rel_err > gpu.thr_rel_err
    assert "30.0 ms/step" in p.provenance and "kernel efficiencies not carried" in p.provenance
    # a smaller overhead leaves less to be unsure about
    small = carry_overheads(gpu, CalibParams(engine="vllm", overhead_step_s=0.001, overhead_seq_s=1e-5), QWEN05, H200)
    assert small.lat_rel_err < p.lat_rel_err


def test_vllm_cpu_grid_is_what_vllm_serves_on_a_cpu():
    grid = default_knobs("cpu", "vllm")
    assert grid and all(not compatible(k, CPU, "vllm") for k in grid)
    assert {k.weights for k in grid} == {"F32", "BF16"} and {k.eviction for k in grid} == {"none"}
    assert compatible(Knobs(weights="Q4_K_M"), CPU, "vllm")  # GGUF is llama.cpp's
    assert compatible(Knobs(weights="F32"), CPU)  # and float32 is vLLM's here
    assert not compatible(Knobs(weights="Q4_K_M"), CPU)


def test_calibrations_are_read_back_for_the_studys_own_engine(tmp_path):
    study = load_study("vllm-cpu")
    with Store(tmp_path / "s.duckdb") as store:
        for engine, step in (("vllm", 0.03), ("llamacpp", 0.001)):
            p = CalibParams(hardware="this-cpu", engine=engine, overhead_step_s=step)
            store.put_calibration(
                {
                    "calib_id": engine,
                    "study": study.name,
                    "hardware": "this-cpu",
                    "engine": engine,
                    "engine_version": None,
                    "params_json": dumps(p.to_dict()),
                    "fidelity_json": "{}",
                    "n_anchors": 2,
                }
            )
        params, calib_id = latest_params(study, store)
    assert params["this-cpu"].engine == "vllm" and calib_id == "vllm"


def test_engines_are_fitted_apart_llamacpp_first():
    anchors = pd.DataFrame({"engine": ["llamacpp", "vllm", None, "vllm"]})
    assert engines_of(anchors, "vllm") == ["llamacpp", "vllm"]  # the bandwidth reference first


def test_the_comparing_study_shares_quality_and_labels_its_engine():
    study = load_study("vllm-cpu")
    assert companion(study).name == "default-cpu"
    assert companion(load_study("default")) is None
    k = Knobs(weights="F32", batching="chunked", chunk_tokens=2048)
    assert engine_label(k, "vllm") == "vllm:F32+chunked+x1" and engine_label(k, "llamacpp") == k.label()
    # llama.cpp's point ids are the ones measured before engines mixed; vLLM's differ from them
    assert point_id(k, "this-cpu", "w", 1, None, "llamacpp") == point_id(k, "this-cpu", "w", 1, None)
    assert point_id(k, "this-cpu", "w", 1, None, "vllm") != point_id(k, "this-cpu", "w", 1, None)


def test_quality_comes_from_the_own_baseline_once_scored_else_from_the_compared_study(tmp_path):
    study = load_study("vllm-cpu")
    with Store(tmp_path / "s.duckdb") as store:
        assert quality_study(study, store).name == "default-cpu"  # nothing scored on vLLM yet
        summary = {"strict": {"p": 0.3, "lo": 0.1, "hi": 0.6, "n": 10, "k": 3}}
        store.put_quality_run(
            {
                "qrun_id": "q1",
                "study": study.name,
                "arm": "vllm-fp32",
                "quality_key": study.baseline.knobs().quality_key(),
                "task": "gsm8k",
                "mode": "chat-0shot",
                "n": 10,
                "seed": 1,
                "model_sha256": "x",
                "engine": "vllm",
                "engine_version": "vllm 0.32.0",
                "status": "ok",
                "reason": None,
                "summary_json": dumps(summary),
            },
            [],
        )
        assert quality_study(study, store).name == "vllm-cpu"


def test_a_fixed_parameter_stays_where_the_other_engine_put_it():
    from dataclasses import replace

    import numpy as np

    from pareto_atlas.calibrate.fit import TARGETS, _anchors, fit_params, predict

    truth = replace(default_params(CPU, "vllm"), eff_bw=1.1, overhead_step_s=0.02)
    df = pd.DataFrame(
        [
            dict(weights="F32", slots=c, concurrency=c, prompt_tokens=128, output_tokens=32, n_requests=8)
            for c in (1, 2, 4)
        ]
    )
    pred = predict(_anchors(df), QWEN05, CPU, truth)
    for i, t in enumerate(TARGETS):
        df[t] = pred[:, i]
    start = replace(default_params(CPU, "vllm"), eff_bw=1.1)
    params, _ = fit_params(df, QWEN05, CPU, start, fit_cv=False, fixed=("eff_bw",))
    assert params.eff_bw == 1.1
    assert np.isclose(params.overhead_step_s, 0.02, rtol=0.3)
