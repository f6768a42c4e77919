"""What the random-weight model tests share (test_random_moe, test_random_kquant, test_moe_routing): a
GGUF holding only tokenizer fields (the real builds copy the Qwen2.5 GGUF's; conftest's session
fixture `tiny_tokenizer` writes it once) and a tiny MoE shape. `write_bpe_tokenizer` is a tokenizer
llama.cpp can load and run (byte-level BPE, BOS added): the engine tests that need a real server's
tokenization of English text serve a tiny random model with it (conftest's `tiny_bpe_tokenizer`)."""

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


def _byte_chars() -> dict[int, str]:
    """GPT-2's byte-level alphabet: each byte as the printable character its BPE vocabularies use."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("\u00a1"), ord("\u00ac") + 1), *range(ord("\u00ae"), 256)]
    extra = [b for b in range(256) if b not in keep]
    return {**{b: chr(b) for b in keep}, **{b: chr(256 + i) for i, b in enumerate(extra)}}


def write_bpe_tokenizer(path: Path, words: tuple[str, ...] = ()) -> Path:
    """A GGUF at `path` with a byte-level BPE tokenizer llama.cpp loads: BOS (id 0, added to every
    prompt), the 256 bytes, and merges that make each of `words`, after a space, one token (" the"),
    built letter by letter; everything else (digits, capitals, punctuation) stays a token per byte."""
    b2c = _byte_chars()
    tokens, merges = ["<s>", *(b2c[b] for b in range(256))], []
    for word in words:
        cur = b2c[ord(" ")]
        for ch in word:
            if cur + ch not in tokens:
                merges.append(f"{cur} {ch}")
                tokens.append(cur + ch)
            cur += ch
    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types([3] + [1] * (len(tokens) - 1))  # 3: control (BOS)
    w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(0)
    w.add_add_bos_token(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
