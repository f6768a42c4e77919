"""Parallel configurations: memory per GPU, the step cost of TP and PP, replicas, GPUs in cost, and
one-GPU results identical to what main computed before parallelism existed."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pareto_atlas.atlas.pick import reprice
from pareto_atlas.simulate.api import simulate_point
from pareto_atlas.simulate.cost_model import coeffs, prefill_coeffs
from pareto_atlas.simulate.kernels import COMM_STEP, COMM_TOK, PP_STAGES, step_time
from pareto_atlas.simulate.memory import plan_memory
from pareto_atlas.simulate.parallel import allreduce_s, check_layout, kv_heads_per_device, replica_load
from pareto_atlas.simulate.params import default_params
from pareto_atlas.simulate.space import Load, Space, Workload, compatible, default_knobs, parallel_variants
from pareto_atlas.simulate.sweep import sweep
from pareto_atlas.spec.cards import shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs

HW = shipped_hardware()
M = shipped_models()
H100 = HW["H100-SXM"]


def decode_ms(model, hw, knobs, batch=8, ctx=1000.0) -> float:
    c = coeffs(model, hw, knobs, default_params(hw))
    return 1e3 * step_time(c, float(batch), batch * ctx, 0.0, 0.0, 0.0, float(batch))


def test_70b_f16_does_not_fit_one_80gb_card_and_says_why_but_fits_at_tp2():
    m = M["llama-3.1-70b"]
    one = plan_memory(m, H100, Knobs(), 1024, 128, default_params(H100))
    assert not one.feasible
    assert "141 GB of weights" in one.reason and "TP x PP >= 2" in one.reason and "\n" not in one.reason
    two = plan_memory(m, H100, Knobs(tp=2), 1024, 128, default_params(H100))
    assert two.feasible and two.max_seqs >= 1
    assert two.weights_bytes == pytest.approx(one.weights_bytes / 2)
    row = simulate_point(m, H100, Knobs(), 1024, 128, concurrency=4, n_requests=20)
    assert not row["feasible"] and "141 GB" in row["infeasible_reason"]


def test_kv_per_gpu_splits_with_tp_until_the_kv_heads_run_out():
    m = M["llama-3.1-70b"]  # 8 KV heads
    p = default_params(H100)
    per = {tp: plan_memory(m, H100, Knobs(tp=tp), 1024, 128, p).kv_bytes_per_token for tp in (2, 4, 8)}
    assert per[4] == pytest.approx(per[2] / 2) and per[8] == pytest.approx(per[4] / 2)
    q = M["qwen2.5-7b"]  # 4 KV heads: at tp 8 each is held twice
    assert kv_heads_per_device(q, 8) == 1 and kv_heads_per_device(q, 4) == 1 and kv_heads_per_device(q, 2) == 2


def test_tp2_decode_is_faster_than_tp1_but_slower_than_half_for_the_communication():
    m = M["llama-3.1-8b"]
    t1, t2 = decode_ms(m, H100, Knobs()), decode_ms(m, H100, Knobs(tp=2))
    assert t2 < t1
    assert t2 > t1 / 2
    c2 = coeffs(m, H100, Knobs(tp=2), default_params(H100))
    assert c2[COMM_STEP] > 0 and c2[COMM_TOK] > 0
    silent = c2.copy()
    silent[COMM_STEP] = silent[COMM_TOK] = 0.0
    args = (8.0, 8000.0, 0.0, 0.0, 0.0, 8.0)
    assert step_time(silent, *args) < step_time(c2, *args) == pytest.approx(t2 / 1e3)  # the all-reduces cost time


def test_one_gpu_vectors_have_no_communication_or_stages():
    c = coeffs(M["llama-3.1-8b"], H100, Knobs(), default_params(H100))
    assert c[COMM_STEP] == 0 and c[COMM_TOK] == 0 and c[PP_STAGES] == 0


@settings(max_examples=40, deadline=None)
@given(
    tp=st.sampled_from([2, 4, 8]),
    pp=st.sampled_from([1, 2]),
    batch=st.integers(1, 256),
    bw=st.floats(8.0, 2000.0),
    more=st.floats(1.0, 10.0),
    prompt=st.integers(0, 4096),
)
def test_more_link_bandwidth_never_makes_a_step_slower(tp, pp, batch, bw, more, prompt):
    m = M["llama-3.1-70b"]
    knobs = Knobs(tp=tp, pp=pp)
    slow, fast = replace(H100, link_gbs=bw), replace(H100, link_gbs=bw * more)
    p = default_params(H100)
    args = (float(batch), batch * 500.0, float(prompt), prompt * (prompt + 1) / 2.0, 0.0, float(batch + (prompt > 0)))
    assert step_time(coeffs(m, fast, knobs, p), *args) <= step_time(coeffs(m, slow, knobs, p), *args)


def test_pipeline_stages_do_not_speed_up_a_lone_prompt_but_split_a_batch():
    m, p = M["llama-3.1-70b"], default_params(H100)
    c1, c2 = coeffs(m, H100, Knobs(tp=4), p), coeffs(m, H100, Knobs(tp=4, pp=2), p)
    lone = (0.0, 0.0, 2048.0, 2048 * 2049 / 2.0, 0.0, 1.0)
    assert step_time(c2, *lone) >= step_time(c1, *lone)  # the bubble: one prompt crosses both stages
    batch = (64.0, 64 * 4000.0, 0.0, 0.0, 0.0, 64.0)
    assert step_time(c2, *batch) < step_time(c1, *batch)  # micro-batches in flight split the work


def test_disagg_prefill_workers_have_their_own_vector():
    m, p = M["llama-3.1-70b"], default_params(H100)
    k = Knobs(batching="disagg", tp=4, prefill_tp=2, decode_workers=3)
    pf, dec = prefill_coeffs(m, H100, k, p), coeffs(m, H100, k, p)
    lone = (0.0, 0.0, 1024.0, 1024 * 1025 / 2.0, 0.0, 1.0)
    assert step_time(pf, *lone) > step_time(dec, *lone)  # tp 2 prefills slower than tp 4
    assert np.array_equal(prefill_coeffs(m, H100, Knobs(tp=4), p), coeffs(m, H100, Knobs(tp=4), p))


def test_allreduce_is_free_on_one_device_and_grows_with_bytes():
    assert allreduce_s(1e6, 1, H100) == 0.0
    assert allreduce_s(2e6, 8, H100) > allreduce_s(1e6, 8, H100) > allreduce_s(0.0, 8, H100) > 0


@pytest.mark.parametrize(
    "model,hw,knobs,field",
    [
        ("qwen2.5-0.5b", "H100-SXM", Knobs(tp=4), "knobs.tp"),  # 14 heads
        ("llama-3.1-70b", "H100-SXM", Knobs(tp=8, pp=2), "knobs.tp x pp"),  # 16 GPUs on an 8-GPU node
        ("llama-3.1-70b", "H100-SXM", Knobs(batching="disagg", prefill_tp=16), "knobs.prefill_tp"),
        ("smollm2-135m", "H100-SXM", Knobs(pp=64), "knobs.pp"),
    ],
)
def test_a_layout_that_does_not_fit_is_a_one_line_error_naming_the_field(model, hw, knobs, field):
    why = check_layout(M[model], HW[hw], knobs)
    assert why.startswith(field + ":") and "\n" not in why
    assert compatible(knobs, HW[hw], model=M[model]) == why
    with pytest.raises(ValueError, match=field.replace(" ", r"\s")):
        simulate_point(M[model], HW[hw], knobs, 128, 16, concurrency=1, n_requests=10)


def test_replicas_share_the_load_and_add_throughput():
    assert replica_load(8, 0.0, 2) == (4, 0.0, 2.0)
    assert replica_load(3, 0.0, 2) == (2, 0.0, 1.5)
    assert replica_load(0, 10.0, 4) == (0, 2.5, 4.0)
    m = M["llama-3.1-8b"]
    one = simulate_point(m, H100, Knobs(slots=32), 512, 128, concurrency=8, n_requests=80)
    two = simulate_point(m, H100, Knobs(slots=32, replicas=2), 512, 128, concurrency=16, n_requests=80)
    assert two["gpus"] == 2
    assert two["throughput_tok_s"] == pytest.approx(2 * one["throughput_tok_s"])
    assert two["tpot_p50_ms"] == pytest.approx(one["tpot_p50_ms"])


def test_cost_and_throughput_per_gpu_count_every_gpu_and_reprice_keeps_them():
    m = M["llama-3.1-70b"]
    ks = (
        Knobs(weights="FP8", slots=32),
        Knobs(slots=32, tp=4),
        Knobs(slots=32, tp=2, replicas=2),
        Knobs(slots=32, batching="disagg", tp=2, decode_workers=2),
    )
    df = sweep(Space(m, (H100,), ks, (Workload("w", 512, 128),), (Load(concurrency=8),), {}), n_requests=40)
    assert list(df["gpus"]) == [1, 4, 4, 6]
    assert np.allclose(df["price_per_hour"], H100.price_per_hour * df["gpus"])
    assert np.allclose(df["throughput_per_device_tok_s"], df["throughput_tok_s"] / df["gpus"])
    assert np.allclose(df["cost_per_mtok"], df["price_per_hour"] / (df["throughput_tok_s"] * 3600) * 1e6)
    assert list(df["tp"]) == [1, 4, 2, 2] and list(df["replicas"]) == [1, 1, 2, 1]
    re = reprice(df, {"H100-SXM": 2.0})
    assert np.allclose(re["price_per_hour"], 2.0 * df["gpus"])


def test_the_gpu_grid_searches_parallel_layouts_and_the_cpu_grid_stays_one_device():
    cpu = default_knobs("cpu", parallel=True)
    assert cpu == default_knobs("cpu") and all(k.gpus() == 1 for k in cpu)
    gpu = default_knobs("gpu", parallel=True)
    assert gpu[: len(default_knobs("gpu"))] == default_knobs("gpu")  # the one-GPU grid first, as before
    tps = {k.tp for k in gpu}
    assert tps == {1, 2, 4, 8} and any(k.replicas > 1 for k in gpu) and any(k.decode_workers > 1 for k in gpu)
    only = parallel_variants(default_knobs("gpu"), {"tp": (1, 2), "replicas": (1,)})
    assert only and all(k.tp in (1, 2) and k.replicas == 1 for k in only)
    # on a 14-head model tp 4 and 8 drop out per card; on the CPU every parallel layout does
    sp = Space(M["qwen2.5-0.5b"], (H100,), tuple(gpu), (Workload("w", 128, 16),), (Load(concurrency=1),), {})
    assert {k.tp for k, _ in sp.pairs()} == {1, 2}


# One-GPU points as main computed them before parallelism existed (qwen2.5-7b, 512/128 tokens, 60
# requests, closed loop of 8 then Poisson at half capacity): ids, figures and costs bit for bit.
MAIN_SWEEP = {
    "91eb8b77dc25f1c2": (35.91171218002645, 204.56145426052436, 0.5295882048010996),
    "1a8ea4e2a2d31e46": (37.79999649824875, 284.6175813474226, 0.38062769285181536),
    # "ea8346d22871945b" (L4, AWQ4, continuous): a GPU point's continuous batching is its engine's own
    # scheduler since issue 31's "each engine's own scheduler" (simulate.schedulers), so it left this list
    "a41e5c0b2f0b6ecf": (6.457865224718541, 1142.4391470702574, 1.9402929883409772),
    "e54ddda37f042170": (6.914408439730644, 1559.746217438611, 1.4211713687030698),
}


def test_one_gpu_points_are_exactly_those_main_computed():
    ks = (
        Knobs(weights="FP8", slots=32, batching="chunked", chunk_tokens=256),
        Knobs(weights="AWQ4", slots=8),
        Knobs(batching="disagg", slots=32),
    )
    sp = Space(
        M["qwen2.5-7b"],
        (HW["L4"], HW["H200"]),
        ks,
        (Workload("w", 512, 128),),
        (Load(concurrency=8), Load(utilization=0.5)),
        {},
    )
    df = sweep(sp, n_requests=60).set_index("point_id")
    for pid, (tpot, thr, cost) in MAIN_SWEEP.items():
        row = df.loc[pid]
        assert (row.tpot_p99_ms, row.throughput_tok_s, row.cost_per_mtok) == (tpot, thr, cost), pid
    assert df.loc["ea8346d22871945b", "scheduler"] == "vllm-v1 chunked 2048"


def test_a_points_table_without_parallel_columns_counts_one_gpu_or_two_for_disagg():
    from pareto_atlas.atlas.objectives import with_derived

    t = pd.DataFrame({"batching": ["continuous", "disagg"], "throughput_tok_s": [100.0, 100.0]})
    d = with_derived(t)
    assert list(d["gpus"]) == [1, 2] and list(d["throughput_per_device_tok_s"]) == [100.0, 50.0]


def test_every_shipped_gpu_card_states_its_node_and_a_bad_node_field_is_a_one_line_error():
    from pareto_atlas.spec.cards import HardwareCard

    for h in HW.values():
        if h.kind == "gpu":
            assert (
                h.gpus_per_node >= 1
                and h.link in ("nvlink", "pcie", "xgmi")
                and h.link_gbs > 0
                and h.link_latency_us > 0
            )
    for bad, field in (
        (dict(link="infiniband"), ".link:"),
        (dict(gpus_per_node=0), ".gpus_per_node:"),
        (dict(gpus_per_node=8, link="none", link_gbs=0.0), ".link:"),
    ):
        with pytest.raises(ValueError) as e:
            HardwareCard(name="X", kind="gpu", mem_bw_gbs=1000.0, **({"link": "pcie", "link_gbs": 32.0} | bad))
        assert field in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ValueError, match="gpus_per_node"):
        HardwareCard(name="cpu", kind="cpu", mem_bw_gbs=10.0, gpus_per_node=2, link="pcie", link_gbs=1.0)


def test_the_70b_and_qwen3_cards_are_their_config_json_values():
    m = M["llama-3.1-70b"]
    assert (m.n_layers, m.hidden, m.n_heads, m.n_kv_heads, m.head_dim, m.intermediate, m.vocab) == (
        80,
        8192,
        64,
        8,
        128,
        28672,
        128256,
    )
    assert M["llama-3.3-70b"].n_params == m.n_params and 70.0e9 < m.n_params < 71.0e9
    q = M["qwen3-32b"]
    assert (q.n_layers, q.hidden, q.n_heads, q.n_kv_heads, q.head_dim, q.intermediate) == (64, 5120, 64, 8, 128, 25600)
    assert 32.0e9 < q.n_params < 33.5e9


def test_pick_searches_parallel_layouts_and_takes_gpu_constraints():
    from pareto_atlas.atlas.pick import pick

    m = M["llama-3.1-70b"]
    ks = (
        Knobs(weights="FP8", slots=32),
        Knobs(weights="FP8", slots=32, tp=2),
        Knobs(weights="FP8", slots=32, tp=4),
        Knobs(weights="FP8", slots=8, tp=4, replicas=2),
    )
    df = sweep(Space(m, (H100,), ks, (Workload("w", 512, 128),), (Load(concurrency=16),), {}), n_requests=60)
    df = df.assign(
        quality=0.8,
        quality_lo=0.78,
        quality_hi=0.82,
        quality_rel=1.0,
        quality_rel_lo=0.99,
        quality_rel_hi=1.01,
        quality_provenance="measured",
        quality_evidence="measured",
    )
    fast = pick(df, "", "tpot_p99_ms", top=4)
    assert fast.winner["gpus"] > 1  # the fastest token needs more than one GPU
    small = pick(df, "gpus<=2", "tpot_p99_ms", top=4)
    assert small.winner["gpus"] <= 2 and small.winner["tpot_p99_ms"] > fast.winner["tpot_p99_ms"]
    assert pick(df, "tp==1", "tpot_p99_ms").winner["label"] == "FP8+x32"
    old = df.drop(columns=["tp", "pp", "replicas", "prefill_workers", "prefill_tp", "decode_workers", "gpus"])
    assert pick(old.iloc[:1], "tp==1", "tpot_p99_ms").winner is not None  # a table from before: one GPU
