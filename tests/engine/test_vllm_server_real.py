"""Against a real vLLM on this CPU (`make setup-vllm`): one anchor of the vllm-cpu study measured end
to end under the exact token-count contract, with vLLM's own counters beside the client's figures."""

from __future__ import annotations

import json

import pytest

from pareto_atlas.measure.campaign import AnchorPlan, anchor_id, measure_anchor
from pareto_atlas.measure.engines.vllm import find_python
from pareto_atlas.measure.weights import ModelError, source_file
from pareto_atlas.spec.study import load_study

pytestmark = [pytest.mark.engine, pytest.mark.slow]


@pytest.fixture(scope="module")
def study():
    if find_python() is None:
        pytest.skip("vLLM is not installed here: `make setup-vllm` makes .venv-vllm (about 2 minutes)")
    s = load_study("vllm-cpu")
    try:
        source_file(s.model.name)
    except ModelError as e:
        pytest.skip(f"the study's model is not installed: {e}")
    # a short run: 1 warm-up and 3 measured requests of 64 prompt / 8 output tokens, one client
    return s.model_copy(
        update={
            "workload": s.workload.model_copy(update={"prompt_tokens": 64, "output_tokens": 8}),
            "load": s.load.model_copy(update={"requests": 3}),
        }
    )


def test_one_vllm_anchor_end_to_end(study):
    arm = study.arm("vllm-fp32")
    row, records = measure_anchor(study, AnchorPlan(anchor_id(study, arm, 0), arm, 0), lambda ev, info: None)
    assert row["status"] == "ok", row["reason"]
    assert row["engine"] == "vllm" and row["engine_version"].startswith("vllm ")
    prov = json.loads(row["provenance_json"])
    assert prov["engine"] == "vllm" and prov["startup_s"] > 0 and "--enforce-eager" in prov["argv"]
    measured = [r for r in records if not r["warmup"]]
    assert len(measured) == 3
    for r in measured:  # the contract, as vLLM's usage counts it
        assert r["ok"], r["reject_reason"] or r["error"]
        assert (r["prompt_tokens"], r["completion_tokens"]) == (64, 8)
    m = json.loads(row["metrics_json"])
    assert (m["n_ok"], m["n_rejected"], m["n_errors"]) == (3, 0, 0)
    # vLLM's /metrics over the measured requests: 3 x 8 generated tokens, its TTFT below the client's
    assert m["server_generation_tokens"] == 24
    assert 0 < m["server_ttft_ms_mean"] <= m["ttft"]["mean"]
    print(
        f"\nvLLM fp32 on this CPU: start-up {prov['startup_s']:.0f} s, TTFT p50 {m['ttft']['p50']:.0f} ms "
        f"(server {m['server_ttft_ms_mean']:.0f} ms), TPOT p50 {m['tpot']['p50']:.0f} ms, "
        f"{m['throughput_tok_s']:.1f} tok/s"
    )
