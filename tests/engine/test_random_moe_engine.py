"""llama.cpp serves the random-weight MoE of measure.random_moe and its dense twin, and
measure.decode_slots measures them under the token contract, one request per slot."""

from __future__ import annotations

import pytest

from pareto_atlas.measure.decode_slots import DecodePoint, measure_decode
from pareto_atlas.measure.random_moe import MoeShape, build_random_gguf

# Serving two models and building their files (the Qwen2.5 tokenizer is read once): over a minute.
pytestmark = [pytest.mark.engine, pytest.mark.slow]

SMALL = MoeShape(
    n_layers=2, hidden=128, n_heads=2, n_kv_heads=1, head_dim=64, n_experts=8, experts_per_token=2, expert_ffn=256
)


@pytest.mark.parametrize("shape", [SMALL, SMALL.dense_twin()], ids=["moe", "dense"])
def test_the_random_models_serve_under_the_contract(shape: MoeShape, tmp_path):
    path = build_random_gguf(shape, out_dir=tmp_path)
    p = measure_decode(path, 3, prompt_tokens=16, output_tokens=8, rounds=1)
    assert (p.slots, len(p.tpot_ms), p.n_rejected, p.n_errors) == (3, 3, 0, 0)
    assert p.engine_version.startswith("xllamacpp") and 0 < p.step_ms < 10_000
    assert len(p.server_tpot_ms) == 3
    assert DecodePoint.from_dict(p.to_dict()) == p
