"""The real llama.cpp server (xllamacpp) on SmolLM2-135M, for the engine tests that ask it quality
items: one place for how it is started (a missing wheel skips; a missing model is an error)."""

from __future__ import annotations

from typing import Iterator

import pytest

from pareto_atlas.measure.weights import smollm2_gguf


def smollm2_server(n_ctx: int, n_parallel: int = 2) -> Iterator[str]:
    """Yield the base URL of a server with `n_parallel` slots sharing `n_ctx` tokens; stop it after."""
    xllamacpp = pytest.importorskip("xllamacpp", reason="xllamacpp (the llama.cpp server wheel) is not installed")
    p = xllamacpp.CommonParams()
    p.model.path = str(smollm2_gguf())  # the test command installs the model: never a skip
    p.n_parallel = n_parallel
    p.n_ctx = n_ctx
    p.cpuparams.n_threads = 2
    srv = xllamacpp.Server(p)
    yield srv.listening_address
    del srv
