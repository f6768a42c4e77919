"""Physics of the per-iteration cost model: properties that must hold for any card and configuration."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import assume, given, settings
from hypothesis import strategies as st

import pytest

from pareto_atlas.simulate.cost_model import coeffs, decode_tokens_per_s, draft_fraction, tokens_per_verify
from pareto_atlas.simulate.kernels import W_T, step_time
from pareto_atlas.simulate.moe import step_weight_bytes
from pareto_atlas.simulate.params import CalibParams
from pareto_atlas.spec.cards import shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import BITS_PER_KV, BITS_PER_WEIGHT, Knobs

MODELS = sorted(shipped_models())
HW = sorted(shipped_hardware())
WEIGHTS = sorted(set(BITS_PER_WEIGHT) - {"RANDOM"})
PARAMS = CalibParams()  # one efficiency for every dtype: the physics, not a calibration

knobs_st = st.builds(
    Knobs,
    weights=st.sampled_from(WEIGHTS),
    kv=st.sampled_from(sorted(BITS_PER_KV)),
    kv_keep=st.sampled_from([1.0, 0.5, 0.25]),
    sparse_budget=st.sampled_from([1.0, 0.25]),
    spec=st.sampled_from(["none", "ngram", "draft", "eagle"]),
    spec_k=st.integers(1, 6),
    spec_accept=st.floats(0.0, 0.9),
)


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(MODELS),
    st.sampled_from(HW),
    knobs_st,
    st.floats(1.01, 10.0),
    st.integers(0, 64),
    st.floats(0, 8192),
    st.integers(0, 2048),
)
def test_more_bandwidth_never_slows_a_step(model, hw, knobs, factor, n_dec, ctx, n_pf):
    m, h = shipped_models()[model], shipped_hardware()[hw]
    fast = replace(h, mem_bw_gbs=h.mem_bw_gbs * factor)
    args = (float(n_dec), float(n_dec) * ctx, float(n_pf), n_pf * (n_pf + 1) / 2, 0.0, float(n_dec + (n_pf > 0)))
    assert step_time(coeffs(m, fast, knobs, PARAMS), *args) <= step_time(coeffs(m, h, knobs, PARAMS), *args) * (
        1 + 1e-12
    )


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(MODELS), st.sampled_from(HW), st.sampled_from(WEIGHTS), st.sampled_from(WEIGHTS), st.floats(0, 4096)
)
def test_fewer_bytes_per_weight_never_slow_batch1_decode(model, hw, w1, w2, ctx):
    m, h = shipped_models()[model], shipped_hardware()[hw]
    lo, hi = sorted((w1, w2), key=lambda w: BITS_PER_WEIGHT[w])
    # A model's native format keeps the parts its checkpoint ships at 16 bits (gpt-oss's MXFP4: attention,
    # router, embedding, lm_head), where another format quantizes every linear layer: the two then differ in
    # what they cover, not only in bits a weight (gpt-oss at batch 1 reads more under MXFP4 than under AWQ4)
    assume(not (m.native_16bit and m.native_format in (lo, hi)))
    # Same compute dtype for both, so only the bytes differ (FP8's faster units would help too).
    if "FP8" in (lo, hi):
        h = replace(h, tflops={k: v for k, v in h.tflops.items() if k != "fp8"})
    if "W8A8" in (lo, hi):  # W8A8 runs int8 GEMMs where the card has them
        h = replace(h, tflops={k: v for k, v in h.tflops.items() if k != "int8"})
    if "NVFP4" in (lo, hi):  # W4A4 NVFP4 runs FP4 GEMMs where the card has them (spec.fp4)
        h = replace(h, tflops={k: v for k, v in h.tflops.items() if k != "fp4"})
    assert decode_tokens_per_s(coeffs(m, h, Knobs(weights=lo), PARAMS), 1, ctx) >= decode_tokens_per_s(
        coeffs(m, h, Knobs(weights=hi), PARAMS), 1, ctx
    ) * (1 - 1e-12)


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(MODELS),
    st.sampled_from(HW),
    st.sampled_from(WEIGHTS),
    st.sampled_from(sorted(BITS_PER_KV)),
    st.integers(1, 256),
    st.floats(1, 8192),
)
def test_decode_throughput_never_above_the_bandwidth_roofline(model, hw, w, kv, batch, ctx):
    m, h = shipped_models()[model], shipped_hardware()[hw]
    c = coeffs(m, h, Knobs(weights=w, kv=kv), PARAMS)
    # a mixture of experts reads only the experts its batch touches (all matmul weights for a dense card)
    bytes_per_step = step_weight_bytes(m, w, batch) + batch * ctx * m.kv_bytes_per_token(BITS_PER_KV[kv])
    assert decode_tokens_per_s(c, batch, ctx) <= h.mem_bw_gbs * 1e9 / bytes_per_step * batch


def test_speculation_gain_shrinks_with_batch():
    m, h = shipped_models()["qwen2.5-7b"], shipped_hardware()["L4"]
    base = coeffs(m, h, Knobs(weights="F16"), PARAMS)
    spec = coeffs(m, h, Knobs(weights="F16", spec="ngram", spec_k=4, spec_accept=0.6), PARAMS)
    gain = [decode_tokens_per_s(spec, b, 600) / decode_tokens_per_s(base, b, 600) for b in (1, 16, 256)]
    assert gain[0] > 1.0 and gain[0] > gain[1] > gain[2]


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(MODELS),
    st.sampled_from(HW),
    st.sampled_from(["ngram", "draft", "eagle"]),
    st.integers(1, 8),
    st.floats(0.0, 0.9),
    st.integers(0, 32),
    st.floats(0, 4096),
    st.integers(0, 512),
)
def test_zero_drafted_tokens_is_plain_decode(model, hw, spec, k, accept, n_dec, ctx, n_pf):
    m, h = shipped_models()[model], shipped_hardware()[hw]
    plain = coeffs(m, h, Knobs(), PARAMS)
    idle = coeffs(m, h, Knobs(spec=spec, spec_k=k, spec_accept=accept), PARAMS, drafted_per_token=0.0)
    args = (float(n_dec), float(n_dec) * ctx, float(n_pf), n_pf * (n_pf + 1) / 2, 0.0, float(n_dec + (n_pf > 0)))
    assert step_time(idle, *args) == step_time(plain, *args)
    assert decode_tokens_per_s(idle, max(n_dec, 1), ctx) == decode_tokens_per_s(plain, max(n_dec, 1), ctx)


def test_measured_drafting_rate_scales_the_verify_cost():
    m, h = shipped_models()["qwen2.5-0.5b"], shipped_hardware()["L4"]
    k = Knobs(spec="ngram", spec_k=8, spec_accept=0.5)
    t = [
        step_time(coeffs(m, h, k, PARAMS, drafted_per_token=d), 8.0, 8 * 500.0, 0.0, 0.0, 0.0, 8.0)
        for d in (0.0, 0.5, None)
    ]
    assert t[0] < t[1] < t[2]  # None: not measured, every step drafts k


def test_draft_fraction_inverts_drafts_per_token():
    for p in (0.0, 0.3, 1.0):
        gain = tokens_per_verify(0.6, 4) - 1
        assert draft_fraction(p * 4 / (1 + p * gain), 0.6, 4) == pytest.approx(p)


def test_llamacpp_cpu_runs_tiled_gemm_only_on_whole_tiles():
    # With a slower GEMV than GEMM, 4 decoding sequences (one GEMM tile) cost less than 2 x 2.
    m, h = shipped_models()["qwen2.5-0.5b"], shipped_hardware()["L4"]
    p = replace(PARAMS, gemm_tile=4, gemv_s_per_weight={"Q4_0": 30e-12}, gemm_s_per_weight={"Q4_0": 12e-12})
    c = coeffs(m, h, Knobs(weights="Q4_0"), p)
    t = {b: step_time(c, float(b), b * 200.0, 0.0, 0.0, 0.0, float(b)) for b in (1, 2, 3, 4)}
    assert t[2] > t[1] and t[3] > t[2] and t[4] < t[3]


def test_a_native_format_with_16_bit_parts_reads_them_at_16_bits():
    # gpt-oss ships MXFP4 experts beside BF16 attention: its batch-1 step streams more of the body than a
    # format that quantizes every linear layer (AWQ4), at no more bits a weight
    m, h = shipped_models()["gpt-oss-120b"], shipped_hardware()["A100-80G-PCIe"]
    assert m.native_format == "MXFP4" and "attention" in m.native_16bit
    assert BITS_PER_WEIGHT["MXFP4"] <= BITS_PER_WEIGHT["AWQ4"]
    body = {w: coeffs(m, h, Knobs(weights=w), PARAMS)[W_T] for w in ("MXFP4", "AWQ4")}
    assert body["MXFP4"] > 2 * body["AWQ4"]
