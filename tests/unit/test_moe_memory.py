"""Sliding-window layers and a checkpoint's 16-bit parts (gpt-oss-120b): read from config.json, held by
the memory plan (a window's KV stops growing) and streamed by the step cost (BF16 attention in MXFP4),
and bad fields as one-line errors naming the field."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest
from hf_config_errors import config_error

from pareto_atlas.simulate import moe
from pareto_atlas.simulate.cost_model import coeffs
from pareto_atlas.simulate.kernels.layout import AT, KVR
from pareto_atlas.simulate.kernels.step import step_time
from pareto_atlas.simulate.memory import plan_memory
from pareto_atlas.simulate.params import CalibParams
from pareto_atlas.spec.cards import CardError, ModelCard, model_card_from_hf_config, shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs

CONFIG = Path(__file__).parents[1] / "data" / "hf_configs" / "gpt-oss-120b.json"
OSS = shipped_models()["gpt-oss-120b"]
# the same card as if every layer attended in full (what the card said before layer_types was read)
FULL = replace(OSS, sliding_window=0, sliding_layers=0)
H100 = shipped_hardware()["H100-SXM"]
P = CalibParams(overhead_step_s=0.0, overhead_seq_s=0.0, overhead_req_s=0.0)


def test_config_reads_the_window_and_the_unconverted_parts():
    card = model_card_from_hf_config(CONFIG, name="gpt-oss-120b")
    assert (card.sliding_window, card.sliding_layers) == (128, 18)
    assert card.native_format == "MXFP4"
    assert card.native_16bit == ("attention", "router", "embedding", "lm_head")
    # a config without layer_types reads no window, as before
    assert shipped_models()["llama-3.1-8b"].sliding_layers == 0


def test_a_sequence_holds_its_full_layers_for_every_token_and_the_sliding_ones_for_the_window():
    per_layer = OSS.kv_bytes_per_token(16) / 36
    assert OSS.kv_bytes_per_seq(16, 5000) == pytest.approx(per_layer * (18 * 5000 + 18 * 128))
    assert OSS.kv_bytes_per_seq(16, 100) == pytest.approx(per_layer * 36 * 100)  # inside the window: all layers
    assert FULL.kv_bytes_per_seq(16, 5000) == pytest.approx(FULL.kv_bytes_per_token(16) * 5000)


def test_the_memory_plan_fits_about_twice_the_sequences_of_a_card_without_the_window():
    knobs = Knobs(weights="FP8", kv="f16", tp=2)
    with_w = plan_memory(OSS, H100, knobs, 4000, 1000, P)
    without = plan_memory(FULL, H100, knobs, 4000, 1000, P)
    assert with_w.weights_bytes == without.weights_bytes
    # per token of a full-length sequence, the plan stores what that sequence holds over the token count
    assert with_w.kv_bytes_per_token * 5000 == pytest.approx(OSS.kv_bytes_per_seq(16, 5000) / 2)
    assert with_w.max_seqs / without.max_seqs == pytest.approx(5000 / (2500 + 64), rel=0.02)


def test_a_decode_step_reads_the_full_layers_kv_per_context_token():
    c_w, c_f = coeffs(OSS, H100, Knobs(weights="FP8"), P), coeffs(FULL, H100, Knobs(weights="FP8"), P)
    assert c_w[KVR] == pytest.approx(c_f[KVR] / 2) and c_w[AT] == pytest.approx(c_f[AT] / 2)
    # 64 sequences at 4,000 tokens of context: the window saves about half the attention time
    t = lambda c, ctx: step_time(c, 64.0, 64.0 * ctx, 0.0, 0.0, 0.0, 64.0)  # noqa: E731
    attn_w, attn_f = t(c_w, 4000) - t(c_w, 0), t(c_f, 4000) - t(c_f, 0)
    assert 0.45 < attn_w / attn_f < 0.6


def test_served_in_its_own_format_the_unconverted_parts_stream_at_16_bits():
    g = OSS
    attn = g.n_layers * (2 * g.hidden * g.n_heads * g.head_dim + 2 * g.hidden * g.n_kv_heads * g.head_dim)
    router, head = g.n_layers * g.hidden * g.n_experts, g.vocab * g.hidden
    expect = ((g.matmul_params - attn - router - head) * 4.25 + (attn + router + head) * 16) / 8
    assert g.weight_bytes("MXFP4") == pytest.approx(expect)
    # stored: the embedding too; about the 60.8 GiB the checkpoint's files hold
    assert g.weight_bytes("MXFP4", matmul_only=False) == pytest.approx(expect + head * 2)
    assert 64e9 < g.weight_bytes("MXFP4", matmul_only=False) < 66e9
    # another format quantizes every part; a batch-1 step reads ~1.8x MXFP4's nominal bytes
    assert g.weight_bytes("NVFP4A16") == pytest.approx(g.matmul_params * 4.5 / 8)
    assert moe.step_weight_bytes(g, "MXFP4", 1) > 1.7 * g.active_params * 4.25 / 8
    plan = plan_memory(g, H100, Knobs(weights="MXFP4"), 1000, 1000, P)
    assert plan.weights_bytes == pytest.approx(g.weight_bytes("MXFP4", matmul_only=False))


def test_bad_window_and_quantization_fields_are_one_line_errors_naming_them(tmp_path):
    bad = partial(config_error, tmp_path, "gpt-oss-120b")
    assert "layer_types" in bad(layer_types=["sliding_attention", "full_attention"])
    assert "'chunked_attention' is not modelled" in bad(layer_types=["chunked_attention"] * 36)
    assert "sliding_window = None" in bad(sliding_window=None)
    assert "every layer slides" in bad(layer_types=["sliding_attention"] * 36)
    msg = bad(quantization_config={"modules_to_not_convert": ["model.layers.*.mlp.experts"]})
    assert "modules_to_not_convert" in msg and "experts" in msg
    with pytest.raises(CardError, match="sliding_window = 0 and sliding_layers = 4"):
        replace(OSS, sliding_window=0, sliding_layers=4)
    with pytest.raises(CardError, match="native_16bit: 'experts' is not a part"):
        replace(OSS, native_16bit=("experts",))
    with pytest.raises(CardError, match="native_format = 'MXFP5'"):
        ModelCard("x", 2, 64, 2, 2, 32, 128, 100, native_format="MXFP5")
