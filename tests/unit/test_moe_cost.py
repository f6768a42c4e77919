"""The step cost of a mixture of experts: the experts a batch touches, weights read between the active
and the total parameters, expert and attention-data parallelism's layouts, latent attention's KV, and
dense cards' figures exactly as before experts existed."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pareto_atlas.simulate import moe
from pareto_atlas.simulate.cost_model import coeffs
from pareto_atlas.simulate.kernels import COMM_STEP, COMM_TOK, KVR, step_time
from pareto_atlas.simulate.memory import plan_memory
from pareto_atlas.simulate.parallel import check_layout, kv_share
from pareto_atlas.simulate.params import CalibParams, default_params
from pareto_atlas.spec.cards import HardwareCard, shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs

M, HW = shipped_models(), shipped_hardware()
H100 = HW["H100-SXM"]
PARAMS = CalibParams()


def step(model: str, knobs: Knobs, batch: int, hw=H100, ctx: float = 0.0, params=PARAMS, **kw) -> float:
    c = coeffs(M[model], hw, knobs, params, **kw)
    return step_time(c, float(batch), float(batch) * ctx, 0.0, 0.0, 0.0, float(batch))


def test_experts_touched_limits_and_uniform_formula():
    q = M["qwen3-30b-a3b"]
    for skew in (1.0, moe.ROUTING_SKEW, 0.75):
        assert moe.experts_touched(1, q, skew) == pytest.approx(8.0, rel=1e-12)  # one token: its k experts
        assert moe.experts_touched(1e6, q, skew) == pytest.approx(128.0, rel=1e-9)  # a huge batch: all of them
    # uniform routing: E (1 - (1 - k/E)^B)
    assert moe.experts_touched(5, q, 1.0) == pytest.approx(128 * (1 - (1 - 8 / 128) ** 5), rel=1e-12)
    touched = [moe.experts_touched(b, q) for b in (1, 2, 4, 8, 16, 64, 256)]
    assert touched == sorted(touched) and len(set(touched)) == len(touched)
    # skew lands tokens on the same experts: fewer touched than uniform at any batch > 1
    assert moe.experts_touched(16, q, 0.8) < moe.experts_touched(16, q, 1.0)
    assert moe.experts_touched(7, M["qwen2.5-7b"]) == 0.0


def test_step_reads_the_active_parameters_at_batch_1_and_the_total_at_large_batch():
    for name in ("qwen3-30b-a3b", "mixtral-8x7b", "gpt-oss-120b", "deepseek-v3"):
        m = M[name]
        one, big = moe.step_weight_bytes(m, "F16", 1), moe.step_weight_bytes(m, "F16", 1e6)
        assert one == pytest.approx(m.active_params * 2, rel=1e-9)
        assert big == pytest.approx(m.matmul_params * 2, rel=1e-9)
    # and the step time follows: at batch 1 the MoE of 30B streams its 3B active weights, not 30B
    assert step("qwen3-30b-a3b", Knobs(), 1) < 0.3 * step("qwen3-32b", Knobs(), 1)


def test_moe_cost_per_token_against_dense_models():
    # Qwen3-30B-A3B (30.5B total, 3.3B active) against Qwen3-32B (32.8B dense, about the same total).
    per_tok = lambda name, b: step(name, Knobs(), b, ctx=512) / b  # noqa: E731
    ratio = [per_tok("qwen3-30b-a3b", b) / per_tok("qwen3-32b", b) for b in (1, 8, 64, 4096)]
    # at batch 1 the MoE reads a tenth of the weights: several times cheaper per token ...
    assert ratio[0] < 0.3
    # ... the gap closes while its growing batch touches more experts and both stay weight-bound ...
    assert ratio[0] < ratio[1] < ratio[2] and ratio[2] > 3 * ratio[0]
    # ... and opens again once compute bounds both: FLOPs follow the active parameters
    assert ratio[3] < 0.6 * ratio[2]
    # falling with batch: from 1 to 64 sequences the MoE's cost per token falls several fold
    assert per_tok("qwen3-30b-a3b", 64) < per_tok("qwen3-30b-a3b", 1) / 5
    # the weights it reads per token fall more slowly than a dense model of its active size would
    m = M["qwen3-30b-a3b"]
    assert moe.step_weight_bytes(m, "F16", 64) / 64 > moe.step_weight_bytes(m, "F16", 1) / 64 * 5


def test_ep_layouts_are_validated():
    with pytest.raises(ValueError, match=r"knobs.ep: 4 does not divide tp x attn_dp = 2"):
        Knobs(tp=2, ep=4)
    with pytest.raises(ValueError, match=r"knobs.ep: 3 must be a power of two"):
        Knobs(tp=4, ep=3)
    with pytest.raises(ValueError, match=r"knobs.attn_dp: 0 must be a power of two"):
        Knobs(attn_dp=0)
    assert "dense model" in check_layout(M["qwen3-32b"], H100, Knobs(tp=2, ep=2))
    assert "knobs.attn_dp" in check_layout(M["qwen3-32b"], H100, Knobs(tp=2, attn_dp=2))
    assert check_layout(M["mixtral-8x7b"], H100, Knobs(tp=1, attn_dp=8, ep=8)) == ""
    assert "does not divide mixtral-8x7b's 8 experts" in check_layout(
        M["mixtral-8x7b"], replace(H100, gpus_per_node=16), Knobs(tp=4, attn_dp=4, ep=16)
    )
    assert "per node" in check_layout(M["qwen3-235b-a22b"], H100, Knobs(tp=4, attn_dp=4, ep=16))
    assert check_layout(M["qwen3-235b-a22b"], H100, Knobs(tp=2, attn_dp=4, ep=8)) == ""
    cpu = HardwareCard(name="cpu", kind="cpu", mem_bw_gbs=100.0, tflops={"fp32": 1.0}, mem_gib=64.0)
    assert "one CPU device" in check_layout(M["qwen3-30b-a3b"], cpu, Knobs(tp=1, attn_dp=2, ep=2))


def test_ep_knobs_keep_old_keys_and_count_gpus():
    assert "ep" not in Knobs().to_dict() and "attn_dp" not in Knobs(tp=4).to_dict()
    k = Knobs(tp=2, attn_dp=4, ep=8)
    assert k.to_dict()["ep"] == 8 and k.moe_tp == 1 and k.gpus() == 8
    assert k.layout_words("H200") == "TP2 attention-DP4 EP8, 8 \u00d7 H200"
    assert Knobs.from_dict(k.to_dict()) == k and k.key() != Knobs(tp=2, attn_dp=4).key()


def test_ep_splits_expert_memory_and_adds_the_all_to_all():
    q, p = M["qwen3-235b-a22b"], default_params(H100, "vllm")
    tp8 = plan_memory(q, H100, Knobs(weights="FP8", tp=8), 1000, 200, p)
    ep8 = plan_memory(q, H100, Knobs(weights="FP8", tp=1, attn_dp=8, ep=8), 1000, 200, p)
    # all experts over 8 GPUs either way; attention copied in each DP group under attention-DP
    routed = q.routed_params / 8
    assert tp8.weights_bytes == pytest.approx((q.n_params - q.routed_params) / 8 + routed, rel=1e-9)
    assert ep8.weights_bytes == pytest.approx(q.n_params - q.routed_params + routed, rel=1e-9)
    c1 = coeffs(q, H100, Knobs(tp=2, attn_dp=4, ep=2), PARAMS)
    c2 = coeffs(q, H100, Knobs(tp=2, attn_dp=4, ep=8), PARAMS)
    assert c2[COMM_TOK] > c1[COMM_TOK] and c2[COMM_STEP] == pytest.approx(c1[COMM_STEP])
    # attention-DP: each group reads the KV of its own sequences; one sequence leaves the others idle
    dp, no = Knobs(tp=2, attn_dp=4, ep=8), Knobs(tp=2, ep=2)
    assert coeffs(q, H100, dp, PARAMS)[KVR] == coeffs(q, H100, no, PARAMS)[KVR]
    attn = lambda k, b: step("qwen3-235b-a22b", k, b, ctx=32000) - step("qwen3-235b-a22b", k, b)  # noqa: E731
    assert attn(dp, 1) == pytest.approx(attn(no, 1), rel=0.02)
    assert attn(dp, 8) < 0.3 * attn(no, 8)


def test_attention_dp_groups_step_their_own_sequences_per_sequence_costs():
    """A step's per-sequence cost (O_SEQ: scheduling, sampling, a sliding window's attention) runs on each
    attention-DP group's rank for its own sequences only, the groups side by side (TensorRT-LLM's ADP
    router assigns each request to one rank); without attention-DP one process steps them all."""
    seq = 40e-6
    p, p0 = replace(PARAMS, overhead_seq_s=seq), replace(PARAMS, overhead_seq_s=0.0)
    q, dp, no = "qwen3-235b-a22b", Knobs(tp=1, attn_dp=8, ep=8), Knobs(tp=8, ep=8)
    per_seq = lambda k, b: step(q, k, b, params=p) - step(q, k, b, params=p0)  # noqa: E731
    assert per_seq(no, 64) == pytest.approx(64 * seq, rel=1e-9)
    assert per_seq(dp, 64) == pytest.approx(64 * seq / 8, rel=1e-9)
    # fewer sequences than groups: each busy group steps one
    assert per_seq(dp, 4) == pytest.approx(seq, rel=1e-9)


def test_mla_kv_is_held_whole_by_each_tp_device():
    ds = M["deepseek-v3"]
    assert kv_share(ds, 8) == 1.0 and kv_share(M["qwen3-32b"], 8) == 1 / 8
    assert ds.kv_bytes_per_token(16) < M["qwen3-235b-a22b"].kv_bytes_per_token(16) / 2
    h200 = HW["H200"]
    p = default_params(h200, "vllm")
    tp8 = plan_memory(ds, h200, Knobs(weights="FP8", tp=8), 2000, 500, p)
    dp8 = plan_memory(ds, h200, Knobs(weights="FP8", tp=1, attn_dp=8, ep=8), 2000, 500, p)
    assert tp8.kv_bytes_per_token == ds.kv_bytes_per_token(16)
    assert dp8.kv_bytes_per_token == ds.kv_bytes_per_token(16) / 8


# Figures of dense cards computed at the commit before experts existed (0b21eef): step seconds at
# batch 1, 16 and 256 with 1000 tokens of context each, the sequences that fit, weights per GPU. The
# TP4 row's steps are those after the all-reduce through an NVLink switch (two crossings of latency
# whatever tp, merged from branch calib after the experts): 0.64 ms less a step, the same at every batch.
BEFORE = [
    (
        "qwen2.5-7b",
        "H100-SXM",
        Knobs(),
        [0.007706646103881792, 0.00888507582701085, 0.03000074765915469],
        902,
        15230566400.0,
    ),
    (
        "llama-3-70b",
        "H100-SXM",
        Knobs(weights="FP8", tp=4, slots=32),
        [0.009338041302017134, 0.01087483403352214, 0.03823787612083994],
        607,
        17638096896.0,
    ),
    (
        "qwen3-32b",
        "H200",
        Knobs(tp=2, pp=2, kv="fp8", slots=16),
        [0.011218007501370713, 0.012154880359967306, 0.02869791764343598],
        3048,
        16380723200.0,
    ),
    (
        "smollm2-135m",
        "L4",
        Knobs(weights="Q4_0", slots=8),
        [0.002514327682667312, 0.005186415960449137, 0.0487410062326244],
        836,
        75644928.0,
    ),
]


@pytest.mark.parametrize("model,hw,knobs,steps,seqs,w", BEFORE)
def test_dense_figures_unchanged(model, hw, knobs, steps, seqs, w):
    p = default_params(HW[hw], "vllm")
    assert [step(model, knobs, b, HW[hw], 1000.0, p) for b in (1, 16, 256)] == steps
    mp = plan_memory(M[model], HW[hw], knobs, 1000, 200, p)
    assert (mp.max_seqs, mp.weights_bytes) == (seqs, w)


def test_the_space_searches_expert_layouts_for_moe_cards_only():
    from pareto_atlas.simulate.space import Load, Space, Workload, default_knobs, parallel_variants

    base = [
        k
        for k in default_knobs("gpu")
        if k.weights == "FP8"
        and k.kv == "f16"
        and k.spec == "none"
        and k.eviction == "none"
        and k.sparse_budget == 1.0
        and k.batching == "continuous"
    ][:1]
    dense, mixed = parallel_variants(base), parallel_variants(base, moe=True)
    assert all(k.ep == 1 and k.attn_dp == 1 for k in dense) and mixed[: len(dense)] == dense
    assert {(k.tp, k.attn_dp, k.ep) for k in mixed} >= {(8, 1, 8), (1, 8, 8), (2, 4, 8)}
    # through the sweep: Qwen3-235B-A22B in FP8 fits 8 H100s as TP8, EP8 across TP8, or attention-DP8 x EP8
    from pareto_atlas.simulate.sweep import sweep

    q = M["qwen3-235b-a22b"]
    ks = tuple(k for k in mixed if k.gpus() == 8 and k.replicas == 1)
    df = sweep(Space(q, (H100,), ks, (Workload("w", 512, 128),), (Load(concurrency=32),), {}), n_requests=40)
    ok = df[df.feasible] if "feasible" in df.columns else df
    assert len(ok) >= 3 and set(ok["gpus"]) == {8}
    assert (ok["throughput_tok_s"] > 0).all() and {int(e) for e in ok["ep"]} >= {1, 8}


def test_pipeline_micro_batches_route_their_own_tokens():
    # a pipeline round of 16 sequences over 2 stages routes two micro-batches of 8: each touches the
    # experts 8 tokens touch, fewer than 16 tokens would, so the round streams less than one pass of 16
    q = M["qwen3-30b-a3b"]
    c = coeffs(q, H100, Knobs(tp=1, pp=2), PARAMS)
    one = coeffs(q, H100, Knobs(), PARAMS)
    w = lambda cc, b: step_time(cc, float(b), 0.0, 0.0, 0.0, 0.0, float(b))  # noqa: E731
    share = lambda b: moe.experts_touched(b, q) / q.n_experts  # noqa: E731
    from pareto_atlas.simulate.kernels import MOE_W

    assert c[MOE_W] == one[MOE_W]
    assert w(c, 16) < w(one, 16) - 0.5 * one[MOE_W] * (share(16) - share(8))


def test_a_study_grid_names_expert_layouts():
    from pareto_atlas.spec.study import GridSpec

    g = GridSpec(tp=[1, 2], ep=[1, 2, 8], attn_dp=[1, 8])
    assert g.keeps(Knobs(tp=1, attn_dp=8, ep=8)) and not g.keeps(Knobs(tp=4, ep=4))
    with pytest.raises(ValueError, match=r"ep: 3 must be a power of two"):
        GridSpec(ep=[1, 3])


def _distinct_experts(popularity, k: int, batch: int, trials: int, rng) -> float:
    # each token draws k distinct experts with the router's popularity; a step counts the distinct ones
    e = len(popularity)
    return float(
        sum(
            len({int(x) for _ in range(batch) for x in rng.choice(e, size=k, replace=False, p=popularity)})
            for _ in range(trials)
        )
        / trials
    )


def test_the_skew_law_fits_skewed_routing_and_predicts_held_out_batches():
    import numpy as np

    rng = np.random.default_rng(0)
    e, k = 128, 8
    for zipf, lo, hi in ((0.0, 0.98, 1.02), (1.0, 0.75, 0.9)):
        pop = np.arange(1, e + 1, dtype=float) ** -zipf
        pop /= pop.sum()
        fit_b, held = [1, 2, 4, 8], [16, 32, 64]
        seen = [_distinct_experts(pop, k, b, 120, rng) for b in fit_b + held]
        s = moe.fit_routing_skew(fit_b, seen[:4], e, k)
        assert lo < s < hi
        for b, t in zip(held, seen[4:]):
            assert e * (1 - (1 - k / e) ** (b**s)) == pytest.approx(t, rel=0.06)
    with pytest.raises(ValueError, match="fit_routing_skew"):
        moe.fit_routing_skew([1, 2], [8.0, 200.0], e, k)
