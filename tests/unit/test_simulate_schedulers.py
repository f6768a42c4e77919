"""Each GPU engine's default scheduler (issue 31): what it is, that GPU points run it, and that CPU points do not."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from pareto_atlas.simulate import des
from pareto_atlas.simulate.api import simulate_point
from pareto_atlas.simulate.cost_model import coeffs
from pareto_atlas.simulate.params import default_params
from pareto_atlas.simulate.schedulers import SCHEDULERS, default_policy, resolve, scheduler
from pareto_atlas.simulate.space import Load, Space, Workload
from pareto_atlas.simulate.sweep import sweep
from pareto_atlas.spec.cards import HardwareCard, shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs

CPU = HardwareCard("this-cpu", "cpu", 20.0, {"fp32": 0.1}, 24.0, price_per_hour=0.05, price_date="2026-11")
HW = shipped_hardware()


def test_documented_defaults():
    # vLLM V1 (get_batch_defaults, API server): 8192 tokens / 1024 seqs on >= 70 GiB cards other than A100
    assert default_policy("vllm", HW["H100-SXM"]) == ("chunked", 8192, 1024)
    assert default_policy("vllm", HW["H200"]) == ("chunked", 8192, 1024)
    assert default_policy("vllm", HW["A100-80G-PCIe"]) == ("chunked", 2048, 256)
    assert default_policy("vllm", HW["L4"]) == ("chunked", 2048, 256)
    # SGLang's chunked_prefill_size by memory, its prefill batches without the decodes
    # (enable_mixed_chunk off); TensorRT-LLM's max_num_tokens and max_batch_size, whole prompts
    # (enable_chunked_prefill off); both under their overlap schedulers (on by default), vLLM V1 not
    assert default_policy("sglang", HW["L4"])[:2] == ("unmixed+overlap", 2048)
    assert default_policy("sglang", HW["H200"])[:2] == ("unmixed+overlap", 8192)
    assert default_policy("trtllm", HW["H100-SXM"]) == ("whole+overlap", 8192, 2048)
    assert (scheduler("trtllm", HW["H200"]).overlap, scheduler("vllm", HW["H200"]).overlap) == (True, False)
    assert set(SCHEDULERS) == {"vllm", "sglang", "trtllm"}


def test_bad_engine_and_cpu_are_one_line_errors():
    with pytest.raises(ValueError, match="engine: 'tgi' has no default scheduler; known: vllm, sglang, trtllm"):
        default_policy("tgi", HW["H100-SXM"])
    with pytest.raises(ValueError, match="CPU card"):
        scheduler("vllm", CPU)


def test_resolve_touches_only_gpu_continuous():
    assert resolve("continuous", 0, HW["H200"]) == ("chunked", 8192, "vllm-v1 chunked 8192")
    assert resolve("continuous", 0, HW["H200"], "sglang")[2] == "sglang unmixed+overlap 8192"
    assert resolve("continuous", 0, HW["H200"], "trtllm")[:2] == ("whole+overlap", 8192)
    assert resolve("whole+overlap", 4096, HW["H200"]) == ("whole+overlap", 4096, "whole+overlap 4096")
    assert resolve("whole", 4096, HW["H200"]) == ("whole", 4096, "whole 4096")
    assert resolve("continuous", 0, HW["H200"], "llamacpp")[2] == "vllm-v1 chunked 8192"  # GPUs: vLLM's formats
    assert resolve("continuous", 0, CPU) == ("continuous", 0, "continuous")
    assert resolve("chunked", 256, HW["H200"]) == ("chunked", 256, "chunked 256")
    assert resolve("disagg", 0, HW["H200"]) == ("disagg", 0, "disagg")


def test_gpu_points_run_the_engine_default_and_cpu_points_do_not():
    m = shipped_models()["qwen2.5-0.5b"]
    gpus = (HW["H100-SXM"], HW["L4"])
    base = [Knobs(slots=32), Knobs(weights="Q8_0", slots=4)]
    space = Space(m, (CPU, *gpus), tuple(base), (Workload("long", 3000, 64),), (Load(concurrency=32),))
    df = sweep(space, n_requests=96).set_index(["hardware", "weights"])
    assert df.loc[("H100-SXM", "F16"), "scheduler"] == "vllm-v1 chunked 8192"
    assert df.loc[("L4", "F16"), "scheduler"] == "vllm-v1 chunked 2048"
    assert df.loc[("this-cpu", "Q8_0"), "scheduler"] == "continuous"
    # the same figures as the engine's policy spelled out as knobs (one card a sweep: same row, same seed),
    # and not continuous batching's (prompts of 3000 tokens past L4's 2048-token budget)
    for hw, chunk in (("H100-SXM", 8192), ("L4", 2048)):
        one = replace(space, hardware=(HW[hw],), knobs=(Knobs(slots=32),))
        spelled = replace(one, knobs=(Knobs(slots=32, batching="chunked", chunk_tokens=chunk),))
        got, want = sweep(one, n_requests=96), sweep(spelled, n_requests=96)
        assert got.scheduler.iloc[0] == f"vllm-v1 chunked {chunk}"
        assert (got.ttft_p50_ms.iloc[0], got.tpot_p50_ms.iloc[0]) == (
            want.ttft_p50_ms.iloc[0],
            want.tpot_p50_ms.iloc[0],
        )
    c = coeffs(m, HW["L4"], Knobs(slots=32), default_params(HW["L4"]))
    cont = des.run(c, des.closed_loop(32, 96, 3000, 64), "continuous", 32, 0).summary["ttft_p50_ms"]
    assert abs(cont / got.ttft_p50_ms.iloc[0] - 1) > 0.05


def test_simulate_point_says_its_scheduler():
    m = shipped_models()["qwen2.5-0.5b"]
    row = simulate_point(m, HW["H100-SXM"], Knobs(slots=8), 512, 64, concurrency=8, n_requests=40)
    assert row["scheduler"] == "vllm-v1 chunked 8192"
    assert np.isfinite(row["ttft_p50_ms"])


@pytest.mark.parametrize(
    ("engine", "label"), [("trtllm", "trtllm whole+overlap 8192"), ("sglang", "sglang unmixed+overlap 8192")]
)
def test_a_gpu_space_of_another_engine_runs_that_engines_scheduler(engine, label):
    # TensorRT-LLM's whole prompts and SGLang's unmixed prefill steps reach a sweep's GPU points, and
    # differ from vLLM's mixed chunks on the same space (prompts of 3000 tokens beside 32 decodes)
    m = shipped_models()["qwen2.5-0.5b"]
    space = Space(m, (HW["H100-SXM"],), (Knobs(slots=32),), (Workload("long", 3000, 64),), (Load(concurrency=32),))
    got = sweep(replace(space, engine=engine), n_requests=96)
    vllm = sweep(replace(space, engine="vllm"), n_requests=96)
    assert got.scheduler.iloc[0] == label
    assert np.isfinite(got.ttft_p50_ms.iloc[0])
    assert (got.ttft_p50_ms.iloc[0], got.tpot_p50_ms.iloc[0]) != (vllm.ttft_p50_ms.iloc[0], vllm.tpot_p50_ms.iloc[0])
