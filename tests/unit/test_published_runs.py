"""A published closed-loop row runs as its source ran it: aiconfigurator's rows under its benchmark
rules' deployment (sequence limit = clients, a token budget of batch + prompt + 1500) and read as the
mean over a fresh loop of ROUNDS rounds; every other row as before."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pareto_atlas.calibrate import published_runs as pr
from published_rows import aiconfigurator_row
from pareto_atlas.calibrate.fit import TARGETS
from pareto_atlas.calibrate.published import card_frame
from pareto_atlas.simulate.params import default_params
from pareto_atlas.spec.cards import shipped_hardware

H100 = shipped_hardware()["H100-SXM"]


def _row(**kw) -> pd.Series:
    return pd.Series(aiconfigurator_row(**({"tp": 2, "n_gpus": 2} | kw)))


def test_the_rules_deployment_per_engine():
    assert pr.aiconfigurator_run("vllm", 8, 1024) == pr.Run("chunked", 2532, 8, pr.ROUNDS, "mean")
    # TensorRT-LLM: whole prompts, its budget rounded up to 32-token blocks (128 + 1024 + 1500 = 2652)
    t, s = pr.aiconfigurator_run("trtllm", 128, 1024), pr.aiconfigurator_run("sglang", 512, 4096)
    assert (t.batching, t.chunk_tokens, t.max_seqs) == ("whole+overlap", 2656, 128)  # the rules leave overlap on
    assert (s.batching, s.chunk_tokens, s.max_seqs) == ("mixed+overlap", 5596, 512)
    with pytest.raises(ValueError, match="engine: 'lmdeploy'"):
        pr.aiconfigurator_run("lmdeploy", 8, 1024)
    assert pr.row_run(_row(source_id="other")) is None
    assert pr.row_run(_row(load="rate", load_value="4")) is None
    assert pr.row_run(_row(engine="trtllm", load_value="64")).chunk_tokens == 2592


def test_a_run_is_read_as_the_mean_over_its_whole_measured_phase():
    rows = pd.DataFrame([_row(load_value="4", output_tokens="16")])
    frame, models = card_frame(rows, H100)
    ran, runs = pr.apply_runs(frame, rows)
    p = default_params(H100, "vllm")
    got = pr.predict_rows(ran, models, H100, p, runs)[0]
    from pareto_atlas.calibrate.fit import _anchors
    from pareto_atlas.simulate import des
    from pareto_atlas.simulate.cost_model import coeffs
    from pareto_atlas.simulate.memory import plan_memory

    (a,) = _anchors(ran)
    cap = plan_memory(models[0], H100, a.knobs, 1024, 16, p).kv_cap_tokens
    res = des.run(
        coeffs(models[0], H100, a.knobs, p), des.closed_loop(4, 4 * pr.ROUNDS, 1024, 16), "chunked", 4, 2528, cap
    )
    assert len(res.ttft) == 80  # 20 rounds of 4 clients from an idle engine
    assert got[TARGETS.index("ttft_p50_ms")] == pytest.approx(1e3 * res.ttft.mean(), rel=1e-9)
    assert got[TARGETS.index("ttft_p50_ms")] != pytest.approx(1e3 * np.median(res.ttft), rel=1e-3)


def test_a_wave_under_the_rules_budget_is_prefilled_over_several_steps_and_read_as_a_mean():
    rows = pd.DataFrame([_row(), _row(source_id="other")])
    frame, models = card_frame(rows, H100)
    assert list(frame.chunk_tokens) == [8192, 8192]  # the engine's default, before the source's run
    ran, runs = pr.apply_runs(frame, rows)
    assert list(ran.chunk_tokens) == [2532, 8192] and runs[1] is None
    p = default_params(H100, "vllm")
    own = pr.predict_rows(ran, models, H100, p, runs)
    default = pr.predict_rows(frame, models, H100, p, [None, None])
    ttft, tpot = TARGETS.index("ttft_p50_ms"), TARGETS.index("tpot_p50_ms")
    # eight 1,024-token prompts over ~3 steps of 2,532 tokens, not one step of 8,192: the wave's
    # requests get their first token sooner on average
    assert own[0, ttft] < 0.8 * default[0, ttft]
    # another source's row runs as before (its jitter's seed is its place among the rows run so)
    assert own[1, ttft] == pytest.approx(default[1, ttft], rel=0.05)
    assert np.isfinite(own[0, tpot]) and abs(own[0, tpot] / default[0, tpot] - 1) < 0.3


def test_a_prompt_longer_than_a_whole_prompt_budget_ran_chunked():
    rows = pd.DataFrame(
        [
            _row(source_id="trtllm-perf", engine="trtllm", load="offline", load_value="100", prompt_tokens="20000"),
            _row(source_id="trtllm-perf", engine="trtllm", load="offline", load_value="100", prompt_tokens="5000"),
        ]
    )
    frame, _ = card_frame(rows, H100)
    assert list(frame.batching) == ["whole+overlap"] * 2 and list(frame.chunk_tokens) == [8192, 8192]
    ran, runs = pr.apply_runs(frame, rows)
    assert list(ran.batching) == ["chunked+overlap", "whole+overlap"] and runs == [None, None]


def test_sglangs_rows_on_the_bf16_checkpoint_served_bf16_weights():
    # the generator passes SGLang no --quantization: a BF16 checkpoint read as an FP8 GEMM served BF16
    bf16_ckpt = dict(engine="sglang", weights="FP8", kv="fp8", model_published="meta-llama/Llama-3.1-8B-Instruct")
    assert pr.row_run(_row(**bf16_ckpt)).weights == "BF16"
    assert pr.row_run(_row(**(bf16_ckpt | {"model_published": "nvidia/Llama-3.1-8B-Instruct-FP8"}))).weights == ""
    assert pr.row_run(_row(**(bf16_ckpt | {"model_published": "deepseek-ai/DeepSeek-R1"}))).weights == ""  # FP8
    assert pr.row_run(_row(**(bf16_ckpt | {"engine": "vllm"}))).weights == ""  # vLLM's rows name FP8 checkpoints
    assert pr.row_run(_row(**(bf16_ckpt | {"weights": "BF16"}))).weights == ""
    rows = pd.DataFrame([_row(**bf16_ckpt, gpu="H200", tp="1", n_gpus="1")])
    h200 = shipped_hardware()["H200"]
    frame, models = card_frame(rows, h200)
    ran, runs = pr.apply_runs(frame, rows)
    assert list(frame.weights) == ["FP8"] and list(ran.weights) == ["BF16"] and list(ran.kv) == ["fp8"]
    p = default_params(h200, "vllm")
    served = pr.predict_rows(ran, models, h200, p, runs)[0]
    as_read = pr.predict_rows(ran.assign(weights="FP8"), models, h200, p, runs)[0]
    # twice the weight bytes a decode step streams: a slower TPOT
    assert served[TARGETS.index("tpot_p50_ms")] > 1.2 * as_read[TARGETS.index("tpot_p50_ms")]
