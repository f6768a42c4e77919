"""A trace-driven arm on the real llama.cpp server with SmolLM2: the campaign replays the trace under
the exact token-count contract, request by request, and the simulator replays the same requests.
No timing is asserted here (speed goals live in benchmarks/)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pareto_atlas.calibrate.fit import _anchors
from pareto_atlas.calibrate.stage import attach_load
from pareto_atlas.measure.campaign import plan, run_campaign
from pareto_atlas.measure.weights import smollm2_gguf
from pareto_atlas.simulate import des
from pareto_atlas.simulate.cost_model import coeffs
from pareto_atlas.simulate.params import default_params
from pareto_atlas.simulate.stage import study_space
from pareto_atlas.spec.cards import shipped_hardware, shipped_models
from pareto_atlas.spec.study import parse_study
from pareto_atlas.spec.trace import trace_rows, trace_sha256
from pareto_atlas.store import Store
from pareto_atlas.store.points import measured_points

pytestmark = pytest.mark.engine

# The test command installs the model; a missing one is an error here, never a skip.
GGUF = smollm2_gguf()
N_ROWS = 6  # the shipped example's first rows: its burst at the start, a few seconds of arrivals

STUDY = """
name = "trace-tiny"
[model]
name = "smollm2-135m-instruct"
card = "smollm2-135m"
[workload]
name = "chat-small-head"
trace = "{trace}"
[load]
warmup = 1
[[arms]]
name = "q4_1-slots2"
weights = "Q4_1"
slots = 2
"""


def test_a_trace_arm_measured_and_simulated_replays_the_same_requests(tmp_path):
    head = trace_rows("chat_small")[:N_ROWS]
    trace = tmp_path / "head.csv"
    trace.write_text(
        "arrival_s,prompt_tokens,output_tokens\n"
        + "".join(f"{r.arrival_s},{r.prompt_tokens},{r.output_tokens}\n" for r in head)
    )
    study = parse_study(STUDY.format(trace=trace), "trace-tiny.toml")
    with Store(tmp_path / "store.duckdb") as store:
        summary = run_campaign(study, store)
        assert summary.measured == 1, summary.failures
        aid = plan(study)[0].anchor_id
        anchor = store.anchors("trace-tiny").iloc[0]
        recs = [r for r in store.requests(aid) if not r["warmup"]]
        points = attach_load(measured_points(study, store), store)

    # the contract, request by request: every row's own P and N, as the server counted them
    assert len(recs) == N_ROWS and all(r["ok"] for r in recs), [r.get("reject_reason") or r.get("error") for r in recs]
    assert [(r["prompt_tokens"], r["completion_tokens"]) for r in recs] == [
        (r.prompt_tokens, r.output_tokens) for r in head
    ]
    metrics = json.loads(anchor.metrics_json)
    assert metrics["n_ok"] == N_ROWS and metrics["n_rejected"] == 0
    wl = json.loads(anchor.workload_json)
    assert wl["trace"] == "head" and wl["trace_sha256"] == trace_sha256(str(trace))
    assert json.loads(anchor.load_json)["concurrency"] == 0

    # the calibration's replay of this anchor: the same requests, in the order they were sent
    (a,) = _anchors(points)
    by_send = sorted(recs, key=lambda r: r["send_ts"])
    assert a.concurrency == 0 and len(a.sends) == N_ROWS
    assert a.prompts == tuple(r["prompt_tokens"] for r in by_send)
    assert a.outputs == tuple(r["completion_tokens"] for r in by_send)
    model, hw = shipped_models()["smollm2-135m"], shipped_hardware()["L4"]
    c = coeffs(model, hw, a.knobs, default_params(hw))
    sim = des.run(c, des.trace(np.array(a.sends), np.array(a.prompts), np.array(a.outputs)), slots=2)
    assert sorted(sim.output.tolist()) == sorted(r.output_tokens for r in head)
    assert np.isfinite(sim.ttft).all() and (sim.finish_t > sim.first_t).all()

    # the atlas's simulated points of this workload replay the very same rows
    space = study_space(study, [hw], model)
    assert [ld.trace for ld in space.loads] == [True]
    assert space.workloads[0].trace == tuple((r.arrival_s, r.prompt_tokens, r.output_tokens) for r in head)
