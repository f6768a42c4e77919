"""Shared across every test directory."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _own_published_fit_cache(tmp_path_factory, monkeypatch):
    # the published fits are cached between stores in the model cache (calibrate.published_cache);
    # a test that counts fits, or changes the fit, must not read another run's
    from pareto_atlas.calibrate import published_cache

    d = tmp_path_factory.mktemp("published-fits")
    monkeypatch.setattr(published_cache, "cache_dir", lambda: d)


@pytest.fixture(scope="session")
def tiny_tokenizer(tmp_path_factory):
    """A GGUF of 300 tokens and no tensors: the tokenizer the random-weight model tests copy (tiny_gguf)."""
    from tiny_gguf import write_tokenizer

    return write_tokenizer(tmp_path_factory.mktemp("tok") / "tok.gguf")


@pytest.fixture(scope="session")
def tiny_bpe_tokenizer(tmp_path_factory):
    """A byte-level BPE tokenizer llama.cpp runs (tiny_gguf.write_bpe_tokenizer), its merges making the
    prompt builders' pool words one token each, as a real vocabulary does."""
    from tiny_gguf import write_bpe_tokenizer

    from pareto_atlas.measure.contract import _WORDS

    return write_bpe_tokenizer(tmp_path_factory.mktemp("bpe") / "bpe.gguf", tuple(_WORDS))
