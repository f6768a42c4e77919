"""Prefix caching on the real llama.cpp server with SmolLM2: prompts that share a stated prefix under the
exact token contract; with the prompt cache on the server reports cached tokens and TTFT drops, with it
off it reports none.

Exact reuse is assumed to leave the tokens unchanged (Knobs.quality_key leaves prefix_cache out). On
llama.cpp that holds only up to float rounding: its server documents that logits are not bit-identical
across batch sizes (a cached prompt prefills its tail as a smaller batch), and on SmolLM2 at
temperature 0 a cached answer was seen to part from the uncached one after five tokens. The test below
holds the uncached engine deterministic and the cached answer's start to the uncached one.
"""

from __future__ import annotations

import httpx
import pytest

from pareto_atlas.measure.contract import build_contract_prompts, build_shared_prompts, contract_body
from pareto_atlas.measure.loadgen import run_load_sync
from pareto_atlas.measure.metrics import derive_metrics
from tests.smollm2_server import smollm2_server

pytestmark = pytest.mark.engine

P, PREFIX, N, REQUESTS = 384, 352, 4, 4


@pytest.fixture(scope="module")
def server():
    yield from smollm2_server(n_ctx=2048, n_parallel=1)


def _run(url: str, prompts: list[str], cache: bool):
    recs = run_load_sync(url, prompts, N, concurrency=1, warmup=1, prompt_tokens=P, extra_body={"cache_prompt": cache})
    return recs, derive_metrics(recs, P, N)


def test_a_shared_prefix_is_served_from_the_cache_and_the_contract_holds(server):
    shared = build_shared_prompts(server, P, REQUESTS + 1, PREFIX, 1, seed=7)
    unique = build_contract_prompts(server, P, REQUESTS + 1, seed=8)
    off, m_off = _run(server, shared, cache=False)
    on, m_on = _run(server, shared, cache=True)
    _, m_unique = _run(server, unique, cache=True)
    for m in (m_off, m_on, m_unique):
        assert m.n_ok == REQUESTS, (m.reject_reasons, m.error_reasons)  # the contract holds
    cached = [r.cached_tokens for r in on if not r.warmup]
    assert all(c is not None and PREFIX - 16 <= c < P for c in cached), cached
    assert all((r.cached_tokens or 0) == 0 for r in off if not r.warmup)
    assert m_on.prefix_hit_rate > 0.8 and m_off.prefix_hit_rate == 0.0
    assert m_unique.prefix_hit_rate < 0.05  # unique prompts: the nonce first, nothing to reuse
    print(
        f"hit rate on {m_on.prefix_hit_rate:.2f} off {m_off.prefix_hit_rate:.2f}; TTFT p50 on "
        f"{m_on.ttft.p50:.1f} ms, off {m_off.ttft.p50:.1f} ms"
    )
    assert m_on.ttft.p50 < 0.8 * m_off.ttft.p50


def _answer(c: httpx.Client, prompt: str, cache: bool) -> tuple[str, int | None]:
    body = contract_body("completions", prompt, 16, stream=False, extra={"cache_prompt": cache})
    r = c.post("/v1/completions", json=body).json()
    return r["choices"][0]["text"], (r.get("timings") or {}).get("cache_n")


def test_the_uncached_answer_is_deterministic_and_a_cached_one_is_served_from_the_cache(server):
    first, second = build_shared_prompts(server, P, 2, PREFIX, 1, seed=9)
    with httpx.Client(base_url=server, timeout=120) as c:
        a, n_a = _answer(c, second, False)
        b, n_b = _answer(c, second, False)
        _answer(c, first, True)  # the slot now holds the shared prefix
        cached, n_on = _answer(c, second, True)
    assert a == b and not n_a and not n_b
    assert n_on and n_on >= PREFIX - 16
    print(f"uncached {a!r}\ncached   {cached!r}")
    # a cache that served wrong KV would answer otherwise from the first token; full equality is not
    # guaranteed here (the module's doc), and was seen to fail after five tokens when the slot held the
    # whole prompt and recomputed one token
    assert cached.split()[:3] == a.split()[:3]


def test_a_traces_blocks_become_prompts_that_share_exactly_their_leading_blocks(server):
    from pareto_atlas.measure.contract import TokenCounter, build_block_prompts

    B = 64  # tokens a block (the Mooncake trace's are 512)
    P = [150, 200, 150, 100]
    ids = [(1, 2, 3), (1, 2, 4, 5), (1, 6, 7), (1, 2)]
    prompts = build_block_prompts(server, P, ids, B, seed=3)
    with httpx.Client(base_url=server, timeout=60) as c:
        count = TokenCounter(c)
        assert [count(p) for p in prompts] == P  # the exact token contract

        def common(a: str, b: str) -> int:
            ta = c.post("/tokenize", json={"content": a}).json()["tokens"]
            tb = c.post("/tokenize", json={"content": b}).json()["tokens"]
            return next((i for i, (x, y) in enumerate(zip(ta, tb)) if x != y), min(len(ta), len(tb)))

        # rows sharing blocks 1, 2 share about two blocks of tokens; a row sharing block 1 only, one block
        assert 2 * B - 2 <= common(prompts[0], prompts[1]) <= 2 * B + 2
        assert B - 2 <= common(prompts[0], prompts[2]) <= B + 2
        # the last row ends inside block 2: a partial block is the start of the same id's full one
        assert common(prompts[3], prompts[1]) >= P[3] - 2
    with pytest.raises(ValueError, match="block lists must match"):
        build_block_prompts(server, P, ids[:2], B)
