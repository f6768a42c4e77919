"""measure.random_kquant: a random-weight dense model whose rows fit K-quant blocks, quantized by
llama.cpp's llama-quantize, so its Q4_K_M file holds real Q4_K/Q6_K tensors (not the legacy types the
0.5B's rows fall back to); the default study's kernel arm names the card of the shape it builds."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import gguf
import pytest
from tiny_gguf import VOCAB

from pareto_atlas.measure.random_kquant import KERNEL_SHAPE, NAME, QK_K, build_kquant_gguf, card_fields, row_error
from pareto_atlas.measure.weights import SOURCES, llama_quantize, source_type
from pareto_atlas.simulate import params
from pareto_atlas.spec.cards import inline_model_card, model_card_from_gguf, shipped_models
from pareto_atlas.spec.gguf_header import read_header
from pareto_atlas.spec.study import load_study

TINY = replace(KERNEL_SHAPE, n_layers=2, hidden=256, n_heads=4, head_dim=64, ffn=512)


def test_the_kernel_shape_runs_real_k_quant_rows_and_the_default_arm_names_its_card():
    assert QK_K == params.QK_K and row_error(KERNEL_SHAPE) == ""
    assert "must be a positive multiple of 256" in row_error(replace(KERNEL_SHAPE, hidden=896))
    assert "ffn = 4992" in row_error(replace(KERNEL_SHAPE, ffn=4864 + 128))
    with pytest.raises(ValueError, match="kernel shape: hidden = 576"):
        build_kquant_gguf(
            replace(KERNEL_SHAPE, hidden=576),
            tokenizer=Path("-"),
            tokenizer_sha="",
            quantizer=Path("-"),
            out_dir=Path("-"),
            version="-",
        )
    card = inline_model_card(card_fields(), NAME)
    # the simulator runs this card's Q4_K_M on the 1.5B's kernels, not the 0.5B's legacy rows
    assert params.kernel_format("Q4_K_M", card) == params.kernel_format("Q4_K_M", shipped_models()["qwen2.5-1.5b"])
    assert params.kernel_format("Q4_K_M", card) != params.kernel_format("Q4_K_M", shipped_models()["qwen2.5-0.5b"])
    assert SOURCES[NAME].source_type == source_type(NAME) == "Q4_K_M"
    for study in ("default", "full"):
        arm = load_study(study).arm("kq-q4km")
        assert arm.model.name == NAME and arm.weights == "Q4_K_M" and not arm.quality
        assert inline_model_card(arm.model.card, NAME) == card  # the arm's card is the built shape's


@pytest.mark.skipif(llama_quantize() is None, reason="llama.cpp's llama-quantize is not built (make llama-tools)")
def test_the_built_file_holds_k_quant_blocks_in_every_matrix(tiny_tokenizer: Path, tmp_path: Path):
    kw = dict(tokenizer=tiny_tokenizer, tokenizer_sha="t", quantizer=llama_quantize(), out_dir=tmp_path, version="v")
    path = build_kquant_gguf(TINY, **kw)
    T = gguf.GGMLQuantizationType
    mats = {t.name: T(t.type_id) for t in read_header(path).tensors if len(t.shape) >= 2}
    assert set(mats.values()) <= {T.Q4_K, T.Q6_K} and T.Q4_K in set(mats.values())
    assert mats["blk.0.ffn_gate.weight"] == T.Q4_K
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # the F16 it was quantized from is gone
    meta = read_header(path).metadata
    assert meta["general.architecture"] == "qwen3" and meta["tokenizer.ggml.tokens"] == VOCAB
    assert build_kquant_gguf(TINY, **kw) == path  # cached
    # the header's card is the one card_fields names (what the study's inline card gives)
    card = model_card_from_gguf(str(path), NAME)
    assert replace(card, source="inline") == inline_model_card(card_fields(TINY, VOCAB), NAME)


def test_the_f16_it_quantizes_is_byte_for_byte_random_moes_dense_twin(tiny_tokenizer: Path, tmp_path: Path):
    # written here (measure.weights names this module as a source; random_moe imports weights), but
    # the same file random_moe writes for the same dense shape, so either measures the same model
    from pareto_atlas.measure.random_kquant import write_f16
    from pareto_atlas.measure.random_moe import MoeShape, build_random_gguf
    from pareto_atlas.measure.weights import sha256_file

    twin = MoeShape(
        n_layers=2,
        hidden=256,
        n_heads=4,
        n_kv_heads=2,
        head_dim=64,
        n_experts=0,
        experts_per_token=0,
        expert_ffn=0,
        dense_ffn=512,
        weights="F16",
    )
    theirs = build_random_gguf(twin, tokenizer=tiny_tokenizer, out_dir=tmp_path / "moe")
    write_f16(TINY, tmp_path / "mine.gguf", tiny_tokenizer)
    assert sha256_file(tmp_path / "mine.gguf") == sha256_file(theirs)
