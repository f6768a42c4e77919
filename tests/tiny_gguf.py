"""What the random-weight model tests share (test_random_moe, test_random_kquant, test_moe_routing): a
GGUF holding only tokenizer fields (the real builds copy the Qwen2.5 GGUF's; conftest's session
fixture `tiny_tokenizer` writes it once) and a tiny MoE shape."""

from __future__ import annotations

from pathlib import Path

import gguf

from pareto_atlas.measure.random_moe import MoeShape

VOCAB = 300
TINY_MOE = MoeShape(
    n_layers=2, hidden=32, n_heads=4, n_kv_heads=2, head_dim=8, n_experts=8, experts_per_token=2, expert_ffn=48
)


def write_tokenizer(path: Path, vocab: int = VOCAB) -> Path:
    """A GGUF at `path` with a gpt2 tokenizer of `vocab` tokens t0, t1, ... and no tensors."""
    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"t{i}" for i in range(vocab)])
    w.add_token_types([1] * vocab)
    w.add_eos_token_id(1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
