"""The tokens an anchor's prompts share, counted by a real llama.cpp server's tokenizer at measure time
(contract.measure_shared_prefix), are the tokens its prompt cache reuses from one request to the next:
more than the stated prefix (the " Request <seed>-" after it is common too), BOS included.

A tiny random model with a byte-level BPE tokenizer (tiny_gguf.write_bpe_tokenizer): its words are one
token each, digits and capitals one per byte, so the nonce's shared digits count as a real vocabulary's do.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from tiny_gguf import TINY_MOE

from pareto_atlas.measure.contract import TokenCounter, build_shared_prompts, measure_shared_prefix
from pareto_atlas.measure.random_moe import build_random_gguf

pytestmark = pytest.mark.engine

P, PREFIX, GROUPS, N = 64, 24, 2, 6


@pytest.fixture(scope="module")
def server(tiny_bpe_tokenizer: Path, tmp_path_factory):
    xllamacpp = pytest.importorskip("xllamacpp", reason="xllamacpp (the llama.cpp server wheel) is not installed")
    model = build_random_gguf(TINY_MOE.dense_twin(), tokenizer=tiny_bpe_tokenizer, out_dir=tmp_path_factory.mktemp("m"))
    p = xllamacpp.CommonParams()
    p.model.path = str(model)
    p.n_ctx, p.n_parallel, p.cpuparams.n_threads = 512, 1, 1
    p.cache_ram_mib = 0  # the one slot's own sequence is all it reuses
    srv = xllamacpp.Server(p)
    yield srv.listening_address
    del srv


def _reused(url: str, prompts: list[str]) -> list[int]:
    """Tokens the one slot's prompt cache served each prompt from the one before (timings.cache_n)."""
    out = []
    with httpx.Client(base_url=url, timeout=60) as c:
        for text in prompts:
            r = c.post("/completion", json={"prompt": text, "n_predict": 1, "cache_prompt": True})
            r.raise_for_status()
            out.append(int(r.json()["timings"]["cache_n"]))
    return out[1:]


def test_the_counted_shared_prefix_is_what_the_servers_cache_reuses(server):
    prompts = build_shared_prompts(server, P, N, PREFIX, GROUPS, seed=11)
    got = measure_shared_prefix(server, prompts, GROUPS, PREFIX)
    with httpx.Client(base_url=server, timeout=60) as c:
        count = TokenCounter(c)
        assert [count(p) for p in prompts] == [P] * N and count.offset == 1  # the contract; the BOS
    # each group's requests one after another on the one slot: what it reuses between consecutive ones
    # is their common prefix; the least of them is what every request of the group shares
    reused = [min(_reused(server, prompts[g::GROUPS])) for g in range(GROUPS)]
    assert list(got.by_group) == reused and got.tokens == min(reused)
    # the stated prefix, then " Request 11-" (" Request" 8 byte tokens, " 11" 3, "-" 1): 12 tokens more
    assert got.tokens == PREFIX + 12 and got.stated == PREFIX
    assert "share 36 leading tokens" in got.line() and "stated 24" in got.line()
