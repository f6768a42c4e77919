"""measure.gguf_header reads what gguf-py's GGUFReader reads (tensors and scalar metadata), without
building the vocabulary, and refuses a damaged header in one line."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest

from pareto_atlas.measure.gguf_header import GGUFHeaderError, read_header
from pareto_atlas.measure.weights import matmul_bits_per_weight


def _write(path: Path) -> None:
    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_block_count(2)
    w.add_embedding_length(64)
    w.add_head_count(4)
    w.add_uint32("llama.custom.u32", 7)
    w.add_float32("llama.custom.f32", 0.5)
    w.add_bool("llama.custom.flag", True)
    w.add_token_list([f"tok{i}" for i in range(300)])
    w.add_token_types([1] * 300)
    w.add_array("llama.custom.ints", [1, 2, 3])
    rng = np.random.default_rng(0)
    w.add_tensor("blk.0.attn_q.weight", rng.standard_normal((64, 64)).astype(np.float16))
    w.add_tensor("blk.0.attn_norm.weight", rng.standard_normal(64).astype(np.float32))
    q = gguf.quants.quantize(rng.standard_normal((32, 64)).astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("blk.0.ffn_up.weight", q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_the_header_matches_gguf_py(tmp_path: Path):
    p = tmp_path / "m.gguf"
    _write(p)
    h, r = read_header(p), gguf.GGUFReader(str(p))
    assert [(t.name, t.shape, t.type_id, t.n_elements, t.n_bytes) for t in h.tensors] == [
        (t.name, tuple(int(d) for d in t.shape), int(t.tensor_type), int(t.n_elements), int(t.n_bytes))
        for t in r.tensors
    ]
    assert h.metadata["general.architecture"] == "llama" and h.metadata["llama.block_count"] == 2
    assert h.metadata["llama.custom.u32"] == 7 and h.metadata["llama.custom.f32"] == 0.5
    assert h.metadata["llama.custom.flag"] is True
    assert h.metadata["tokenizer.ggml.tokens"] == 300 and h.metadata["llama.custom.ints"] == 3  # arrays: lengths
    # bits per weight of the matrices: f16 (16) and q8_0 (8.5), norms left out
    assert matmul_bits_per_weight(p) == pytest.approx((64 * 64 * 16 + 32 * 64 * 8.5) / (64 * 64 + 32 * 64))


@pytest.mark.parametrize("damage", ["magic", "truncated", "huge-length", "version"])
def test_a_damaged_header_is_refused_in_one_line(tmp_path: Path, damage: str):
    p = tmp_path / "m.gguf"
    _write(p)
    data = bytearray(p.read_bytes())
    if damage == "magic":
        data[:4] = b"GGML"
    elif damage == "truncated":
        data = data[:200]
    elif damage == "huge-length":
        data[24:32] = (2**62).to_bytes(8, "little")  # the first key's length
    else:
        data[4:8] = (9).to_bytes(4, "little")
    bad = tmp_path / f"{damage}.gguf"
    bad.write_bytes(bytes(data))
    with pytest.raises(GGUFHeaderError) as e:
        read_header(bad)
    assert "\n" not in str(e.value)
