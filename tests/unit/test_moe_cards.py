"""Mixture-of-experts and latent-attention cards: read from each family's config.json (fixtures in
tests/data/hf_configs hold the models' own values), the shipped cards equal to what their configs
read, totals and active parameters as the makers state them, and bad configs as one-line errors."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hf_config_errors import DROP, config_error

from pareto_atlas.spec.cards import CardError, ModelCard, model_card_from_hf_config, shipped_models

CONFIGS = Path(__file__).parents[1] / "data" / "hf_configs"

# (fixture, shipped card, maker's stated total and active parameters in billions, from each model's
# own card: Qwen3 technical report / model cards, Mistral's Mixtral announcement, OpenAI's gpt-oss
# model card, the DeepSeek-V3 report). Active counts here exclude the embedding lookup, so they
# sit a little under a maker's figure that includes it.
STATED = [
    ("qwen3-30b-a3b", "qwen3-30b-a3b", 30.5, 3.3),
    ("qwen3-235b-a22b", "qwen3-235b-a22b", 235.0, 22.0),
    ("mixtral-8x7b", "mixtral-8x7b", 46.7, 12.9),
    ("gpt-oss-120b", "gpt-oss-120b", 116.8, 5.1),
    ("deepseek-v3", "deepseek-v3", 671.0, 37.0),
    ("llama-4-scout", None, 109.0, 17.0),
]


def read(name: str) -> ModelCard:
    return model_card_from_hf_config(CONFIGS / f"{name}.json", name=name)


@pytest.mark.parametrize("fixture,shipped,total_b,active_b", STATED)
def test_config_reads_the_stated_sizes(fixture, shipped, total_b, active_b):
    card = read(fixture)
    assert card.is_moe
    # Llama-4's stated total counts its vision encoder (~1B) too: 2 % slack; active within 10 %
    assert card.n_params / 1e9 == pytest.approx(total_b, rel=0.02)
    assert card.active_params / 1e9 == pytest.approx(active_b, rel=0.10)
    assert card.active_params < 0.3 * card.n_params
    if shipped:
        ship = shipped_models()[shipped]
        assert replace(card, name=shipped, source="shipped", family=ship.family) == ship


def test_family_specific_fields():
    q, mx, oss, ds, l4 = (
        read(n) for n in ("qwen3-30b-a3b", "mixtral-8x7b", "gpt-oss-120b", "deepseek-v3", "llama-4-scout")
    )
    assert (q.n_experts, q.experts_per_token, q.expert_intermediate, q.dense_layers) == (128, 8, 768, 0)
    assert (mx.n_experts, mx.experts_per_token, mx.expert_intermediate) == (8, 2, 14336)
    assert (oss.n_experts, oss.experts_per_token, oss.head_dim) == (128, 4, 64)
    assert (ds.n_experts, ds.n_shared_experts, ds.dense_layers, ds.intermediate) == (256, 1, 3, 18432)
    assert (ds.kv_lora_rank, ds.qk_rope_head_dim, ds.q_lora_rank, ds.head_dim) == (512, 64, 1536, 192)
    assert (l4.n_experts, l4.experts_per_token, l4.n_shared_experts, l4.dense_layers) == (16, 1, 1, 0)


def test_mla_kv_is_its_latent():
    ds = read("deepseek-v3")
    # 61 layers x (512 + 64) x 2 bytes: one latent and one rotary key per token and layer
    assert ds.kv_bytes_per_token(16) == 61 * 576 * 2
    mha = replace(ds, kv_lora_rank=0, qk_rope_head_dim=0, qk_nope_head_dim=0, v_head_dim=0, q_lora_rank=0)
    assert ds.kv_bytes_per_token(16) < mha.kv_bytes_per_token(16) / 50


def test_dense_card_unchanged():
    m = shipped_models()["qwen2.5-7b"]
    assert not m.is_moe and not m.is_mla
    assert m.n_params == 7615283200 and m.active_params == m.matmul_params
    assert m.kv_bytes_per_token(16) == 2 * 28 * 4 * 128 * 2


def test_contradictions_are_one_line_errors(tmp_path):
    assert "experts_per_token = 2" in config_error(tmp_path, "gpt-oss-120b", experts_per_token=2)
    assert "num_experts" in config_error(tmp_path, "qwen3-30b-a3b", num_local_experts=64)
    assert "exceed the experts" in config_error(tmp_path, "mixtral-8x7b", num_experts_per_tok=9)
    assert "num_experts_per_tok" in config_error(tmp_path, "mixtral-8x7b", num_local_experts=DROP)
    assert "kv_lora_rank without qk_rope_head_dim" in config_error(tmp_path, "deepseek-v3", qk_rope_head_dim=DROP)
    assert "mlp_only_layers" in config_error(tmp_path, "qwen3-30b-a3b", mlp_only_layers=[99])
    assert "n_routed_experts = 'many'" in config_error(tmp_path, "deepseek-v3", n_routed_experts="many")
    assert "first_k_dense_replace and decoder_sparse_step" in config_error(
        tmp_path, "deepseek-v3", decoder_sparse_step=1
    )
    # a placement this reader does not model (Jamba's experts every other layer) is refused, not ignored
    assert "expert_layer_period = 2: an expert setting" in config_error(tmp_path, "mixtral-8x7b", expert_layer_period=2)


def test_qwen_sparse_step_counts_dense_layers(tmp_path):
    cfg = json.loads((CONFIGS / "qwen3-30b-a3b.json").read_text())
    cfg.update(decoder_sparse_step=2, mlp_only_layers=[1])
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    card = model_card_from_hf_config(tmp_path)
    # layers 1, 3, ..., 47 are sparse (24), less layer 1 from mlp_only_layers
    assert card.dense_layers == 48 - 23 and card.intermediate == 6144


def test_card_fields_checked():
    ship = shipped_models()["mixtral-8x7b"]
    with pytest.raises(CardError, match="experts_per_token = 3 must be in 1..n_experts"):
        replace(ship, n_experts=2, experts_per_token=3)
    with pytest.raises(CardError, match="dense_layers = 32"):
        replace(ship, dense_layers=32)
    with pytest.raises(CardError, match="latent attention needs"):
        replace(ship, kv_lora_rank=512)


def _gguf(path: Path, arch: str, kv: dict, tensors: list[str]) -> None:
    import gguf
    import numpy as np

    w = gguf.GGUFWriter(str(path), arch=arch)
    for k, v in kv.items():
        w.add_uint32(f"{arch}.{k}", v)
    w.add_token_list([f"t{i}" for i in range(64)])
    for t in tensors:
        w.add_tensor(t, np.zeros((4, 4), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_gguf_moe_and_mla_headers(tmp_path):
    from pareto_atlas.spec.cards import model_card_from_gguf

    # a scaled Qwen3-MoE as llama.cpp's converter writes it: every block routed
    base = {
        "block_count": 4,
        "embedding_length": 256,
        "attention.head_count": 4,
        "attention.head_count_kv": 2,
        "attention.key_length": 64,
        "feed_forward_length": 768,
    }
    p = tmp_path / "q.gguf"
    _gguf(
        p,
        "qwen3moe",
        base | {"expert_count": 16, "expert_used_count": 4, "expert_feed_forward_length": 128},
        [f"blk.{i}.ffn_gate_inp.weight" for i in range(4)] + ["output.weight"],
    )
    c = model_card_from_gguf(str(p))
    assert (c.n_experts, c.experts_per_token, c.expert_intermediate, c.dense_layers, c.vocab) == (16, 4, 128, 0, 64)
    # deepseek2: a leading dense block, latent attention
    p = tmp_path / "d.gguf"
    _gguf(
        p,
        "deepseek2",
        base
        | {
            "expert_count": 8,
            "expert_used_count": 2,
            "expert_feed_forward_length": 96,
            "expert_shared_count": 1,
            "leading_dense_block_count": 1,
            "attention.kv_lora_rank": 32,
            "attention.q_lora_rank": 48,
            "rope.dimension_count": 16,
            "attention.key_length": 48,
            "attention.value_length": 32,
        },
        ["output.weight"],
    )
    d = model_card_from_gguf(str(p))
    assert (d.n_shared_experts, d.dense_layers, d.intermediate) == (1, 1, 768)
    assert (d.kv_lora_rank, d.qk_rope_head_dim, d.qk_nope_head_dim, d.v_head_dim, d.head_dim) == (32, 16, 32, 32, 48)
    assert d.kv_bytes_per_token(16) == 4 * (32 + 16) * 2
    # a dense file reads as before
    p = tmp_path / "l.gguf"
    _gguf(p, "llama", base, ["output.weight"])
    assert not model_card_from_gguf(str(p)).is_moe
