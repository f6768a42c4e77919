"""Model files: the pinned source verifies, variants re-encode every matrix, bad input is one line."""

from __future__ import annotations

import gguf
import numpy as np
import pytest

from pareto_atlas.measure import weights as W


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PARETO_ATLAS_CACHE", str(tmp_path))


def test_smollm2_source_verifies():
    path, sha = W.source_file("smollm2-135m-instruct")
    assert sha == W.SOURCES["smollm2-135m-instruct"].sha256 and path.exists()


def test_sha_mismatch_is_refused(tmp_path):
    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF" + b"\0" * 100)
    with pytest.raises(W.ModelError, match="does not match the pinned"):
        W._verified(f, "0" * 64)


def test_variant_reencodes_matrices_and_keeps_shapes():
    src, _ = W.source_file("smollm2-135m-instruct")
    out, sha = W.variant_file("smollm2-135m-instruct", "Q8_0")
    a, b = gguf.GGUFReader(str(src)), gguf.GGUFReader(str(out))
    ta = {t.name: t for t in a.tensors}
    tb = {t.name: t for t in b.tensors}
    assert set(ta) == set(tb)
    mats = [n for n, t in tb.items() if W._is_matrix(t)]
    assert mats and all(tb[n].tensor_type == gguf.GGMLQuantizationType.Q8_0 for n in mats)
    assert all(list(ta[n].shape) == list(tb[n].shape) for n in ta)
    # Q8_0 of a 4-bit source reproduces the source weights closely
    n = mats[0]
    x = gguf.quants.dequantize(ta[n].data, ta[n].tensor_type)
    y = gguf.quants.dequantize(tb[n].data, tb[n].tensor_type)
    assert np.abs(x - y).max() < 0.02 * np.abs(x).max()
    # cached: asking again returns the same file, not a new one
    assert W.variant_file("smollm2-135m-instruct", "Q8_0") == (out, sha)


def test_unmakeable_and_unknown_models_are_one_line():
    with pytest.raises(W.ModelError, match="cannot be made on this machine; makeable: F16.*Q2_K"):
        W.variant_file("smollm2-135m-instruct", "IQ1_S")
    with pytest.raises(W.ModelError, match="unknown 'nope'; known: smollm2"):
        W.source_file("nope")


def test_k_quants_without_llama_quantize_say_how_to_build_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PARETO_ATLAS_LLAMA_QUANTIZE", str(tmp_path / "missing"))
    assert W.llama_quantize() is None and "Q2_K" not in W.makeable_here()
    with pytest.raises(
        W.ModelError, match=r"'Q2_K' needs llama.cpp's llama-quantize.*make llama-tools.*build_llama_tools.sh"
    ):
        W.variant_file("smollm2-135m-instruct", "Q2_K")
    assert not list((tmp_path / "models").glob("*Q2_K*"))  # nothing half-written is left


def test_a_failing_llama_quantize_is_one_line_and_leaves_no_file(tmp_path, monkeypatch):
    exe = tmp_path / "llama-quantize"
    exe.write_text("#!/bin/sh\necho 'main: invalid ftype' >&2\nexit 1\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PARETO_ATLAS_LLAMA_QUANTIZE", str(exe))
    assert "Q3_K" in W.makeable_here()
    with pytest.raises(W.ModelError, match=r"llama-quantize Q3_K_M failed \(exit 1\): main: invalid ftype"):
        W.variant_file("smollm2-135m-instruct", "Q3_K")
    assert not list((tmp_path / "models").glob("*Q3_K*"))
