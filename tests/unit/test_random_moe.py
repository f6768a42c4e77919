"""measure.random_moe writes a random-weight Qwen3-MoE (and its dense twin) that the project's GGUF
header reader and card reader see as the shape asked for; the file is seeded and cached, and a bad
shape is refused in one line naming the field."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
from tiny_gguf import TINY_MOE as TINY
from tiny_gguf import VOCAB

from pareto_atlas.measure.random_moe import MoeShape, build_random_gguf, file_bytes, tensor_shapes
from pareto_atlas.spec.cards import model_card_from_gguf
from pareto_atlas.spec.gguf_header import read_header


def test_the_moe_file_has_the_shape_asked_for(tiny_tokenizer: Path, tmp_path: Path):
    path = build_random_gguf(TINY, tokenizer=tiny_tokenizer, out_dir=tmp_path)
    h = read_header(path)
    m = h.metadata
    assert m["general.architecture"] == "qwen3moe"
    assert (m["qwen3moe.expert_count"], m["qwen3moe.expert_used_count"]) == (8, 2)
    assert m["qwen3moe.expert_feed_forward_length"] == 48 and m["qwen3moe.block_count"] == 2
    assert m["tokenizer.ggml.tokens"] == VOCAB and m["tokenizer.ggml.model"] == "gpt2"
    shapes = {t.name: t.shape for t in h.tensors}
    # GGUF lists dimensions innermost first: [in, out, experts] for the experts' matrices
    assert shapes["blk.1.ffn_gate_exps.weight"] == (32, 48, 8)
    assert shapes["blk.1.ffn_down_exps.weight"] == (48, 32, 8)
    assert shapes["blk.0.ffn_gate_inp.weight"] == (32, 8)
    assert shapes["blk.0.attn_q.weight"] == (32, 32) and shapes["blk.0.attn_k.weight"] == (32, 16)
    assert shapes["token_embd.weight"] == (32, VOCAB) and "output.weight" not in shapes
    assert {n: tuple(reversed(s)) for n, s in shapes.items()} == tensor_shapes(TINY, VOCAB)
    assert all(t.type_id == gguf.GGMLQuantizationType.F32 for t in h.tensors)  # F32 throughout
    assert sum(t.n_bytes for t in h.tensors) == file_bytes(TINY, VOCAB)
    card = model_card_from_gguf(str(path))
    assert (card.n_experts, card.experts_per_token, card.expert_intermediate, card.dense_layers) == (8, 2, 48, 0)
    assert card.routed_params == 2 * 8 * 3 * 32 * 48 and card.tied_embeddings


def test_the_dense_twin_runs_as_many_weights_per_token(tiny_tokenizer: Path, tmp_path: Path):
    dense = TINY.dense_twin()
    path = build_random_gguf(dense, tokenizer=tiny_tokenizer, out_dir=tmp_path)
    h = read_header(path)
    assert h.metadata["general.architecture"] == "qwen3" and "qwen3.expert_count" not in h.metadata
    assert {t.name: t.shape for t in h.tensors}["blk.0.ffn_up.weight"] == (32, 96)
    moe, twin = (
        model_card_from_gguf(str(build_random_gguf(TINY, tokenizer=tiny_tokenizer, out_dir=tmp_path))),
        model_card_from_gguf(str(path)),
    )
    # the router's E x hidden weights are the only difference in what one token runs through
    assert moe.active_params - twin.active_params == 2 * 8 * 32


def test_seeded_and_cached(tiny_tokenizer: Path, tmp_path: Path):
    a = build_random_gguf(TINY, tokenizer=tiny_tokenizer, out_dir=tmp_path / "a")
    stamp = a.stat().st_mtime_ns
    assert (
        build_random_gguf(TINY, tokenizer=tiny_tokenizer, out_dir=tmp_path / "a") == a and a.stat().st_mtime_ns == stamp
    )
    b = build_random_gguf(TINY, tokenizer=tiny_tokenizer, out_dir=tmp_path / "b")
    assert a.read_bytes() == b.read_bytes()
    from dataclasses import replace

    c = build_random_gguf(replace(TINY, seed=1), tokenizer=tiny_tokenizer, out_dir=tmp_path / "a")
    assert c != a and c.stat().st_size == a.stat().st_size and c.read_bytes() != a.read_bytes()
    r = gguf.GGUFReader(str(a))
    gate = next(t for t in r.tensors if t.name == "blk.0.ffn_gate_exps.weight")
    assert 0.015 < float(np.std(gate.data)) < 0.025  # N(0, 0.02)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"n_experts": 1}, "n_experts"),
        ({"experts_per_token": 9}, "experts_per_token"),
        ({"expert_ffn": 0}, "expert_ffn"),
        ({"n_kv_heads": 3}, "n_kv_heads"),
        ({"weights": "Q4_0"}, "weights"),
        ({"hidden": -1}, "hidden"),
        ({"dense_ffn": 64}, "dense_ffn"),
        ({"n_experts": 0, "experts_per_token": 0, "expert_ffn": 0}, "dense_ffn"),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_a_bad_shape_is_one_line_naming_the_field(change: dict, field: str):
    from dataclasses import asdict

    with pytest.raises(ValueError) as e:
        MoeShape.from_dict({**asdict(TINY), **change})
    msg = str(e.value)
    assert "\n" not in msg and field in msg and msg.startswith("moe shape:")
