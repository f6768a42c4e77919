"""The exact token-count contract: request shape, exact prompts, violators rejected."""

from __future__ import annotations

import random

import pytest

from pareto_atlas.measure.contract import (
    apply_contract,
    build_contract_prompts,
    build_shared_prompts,
    check_contract,
    contract_body,
    exact_prompt,
    measure_shared_prefix,
)
from pareto_atlas.measure.fakeserver import FakeBehaviour, FakeOpenAIServer
from pareto_atlas.measure.loadgen import run_load_sync
from pareto_atlas.measure.metrics import derive_metrics
from pareto_atlas.measure.records import RequestRecord


def test_body_asks_for_exactly_n_tokens_without_stops():
    b = contract_body("completions", "hi", 8)
    assert b["max_tokens"] == b["min_tokens"] == 8 and b["ignore_eos"] is True
    assert "stop" not in b and b["stream_options"] == {"include_usage": True}
    c = contract_body("chat", "hi", 3, model="m", extra={"cache_prompt": False})
    assert c["messages"] == [{"role": "user", "content": "hi"}] and c["model"] == "m" and c["cache_prompt"] is False
    with pytest.raises(ValueError, match="api: 'embeddings' is not one of completions, chat"):
        contract_body("embeddings", "hi", 3)


def test_check_contract_names_what_broke():
    r = RequestRecord(
        idx=0, warmup=False, send_ts=0.0, chunk_ts=(0.1,), end_ts=0.2, prompt_tokens=64, completion_tokens=8
    )
    assert check_contract(r, 64, 8) is None
    assert check_contract(r, 65, 8) == "prompt_tokens 64 != contract P=65"
    assert check_contract(r, 64, 9) == "completion_tokens 8 != contract N=9"
    assert "no usage" in check_contract(RequestRecord(idx=0, warmup=False, send_ts=0.0), 64, 8)
    err = RequestRecord(idx=0, warmup=False, send_ts=0.0, error="ConnectError")
    assert apply_contract(err, 64, 8).ok is False and apply_contract(err, 64, 8).reject_reason is None


def test_exact_prompt_converges_with_a_merging_tokenizer():
    # a tokenizer that merges "the of" into one token: counts jump, the search must still land exactly
    def count(text: str) -> int:
        return len(text.replace("the of", "theof").split()) + 1  # + BOS

    for target in (12, 13, 40):
        p = exact_prompt(count, target, "Request 7 abc: ", random.Random(target))
        assert p.startswith("Request 7 abc: ") and count(p) == target
    with pytest.raises(ValueError, match="shorter than the unique request prefix"):
        exact_prompt(count, 2, "Request 7 abc: ", random.Random(0))


def test_prompts_are_exact_unique_and_deterministic():
    with FakeOpenAIServer() as srv:
        a = build_contract_prompts(srv.base_url, 32, 5, seed=3)
        b = build_contract_prompts(srv.base_url, 32, 5, seed=3)
        chat = build_contract_prompts(srv.base_url, 32, 2, seed=3, api="chat")
    assert a == b
    assert all(len(p.split()) == 32 for p in a)
    assert len({p.split(":")[0] for p in a}) == 5  # unique prefix per request
    assert all(len(p.split()) == 32 - 3 for p in chat)  # the chat template's 3 tokens are counted


def test_violators_are_rejected_counted_and_never_averaged_in():
    with FakeOpenAIServer(FakeBehaviour(extra_completion_tokens=1)) as srv:
        prompts = build_contract_prompts(srv.base_url, 16, 4, seed=0)
        recs = run_load_sync(srv.base_url, prompts, 4, concurrency=2, warmup=0, prompt_tokens=16)
    assert [r.ok for r in recs] == [False] * 4
    assert all(r.reject_reason == "completion_tokens 5 != contract N=4" for r in recs)
    m = derive_metrics(recs, 16, 4)
    assert m.n_rejected == 4 and m.n_ok == 0 and m.ttft.n == 0 and m.throughput_tok_s == 0


def test_a_good_hint_needs_one_count():
    calls = []

    def count(text: str) -> int:
        calls.append(text)
        return len(text.split())

    p = exact_prompt(count, 20, "Request 1 ab: ", random.Random(0), hint=17)
    assert count(p) == 20 and len(calls) == 2  # the hinted try, then our own check


def test_the_shared_prefix_is_counted_by_the_servers_tokenizer_not_assumed():
    # the fake server's tokens are words, its usage counts a BOS that /tokenize leaves out (as llama.cpp's):
    # a group's requests share its stated 12 tokens (BOS + 11 words), then the word "Request" ("7-i" differs)
    with FakeOpenAIServer(FakeBehaviour(bos_tokens=1)) as srv:
        shared = build_shared_prompts(srv.base_url, 32, 6, 12, 2, seed=7)
        got = measure_shared_prefix(srv.base_url, shared, 2, 12)
        unique = measure_shared_prefix(srv.base_url, build_contract_prompts(srv.base_url, 32, 4, seed=7))
        one = measure_shared_prefix(srv.base_url, shared[:1], 1, 12)
    assert got.tokens == 13 and got.by_group == (13, 13) and got.stated == 12
    assert got.to_metrics()["shared_prefix_tokens"] == 13 and "share 13 leading tokens" in got.line()
    assert unique.tokens == 2 and unique.stated == 0  # BOS and "Request": unique prompts share that much
    assert one.tokens is None and "fewer than two" in one.basis
    with pytest.raises(ValueError, match="groups=0 must be >= 1"):
        measure_shared_prefix("http://127.0.0.1:1", shared, 0)


def test_a_server_without_a_tokenizer_or_the_chat_api_leaves_the_stated_prefix_and_says_so():
    with FakeOpenAIServer(FakeBehaviour(tokenize=False)) as srv:
        prompts = build_shared_prompts(srv.base_url, 24, 3, 8, 1, seed=1)
        none = measure_shared_prefix(srv.base_url, prompts, 1, 8)
        chat = measure_shared_prefix(srv.base_url, prompts, 1, 8, api="chat")
    for m in (none, chat):
        assert m.tokens is None and m.to_metrics()["shared_prefix_tokens"] is None
        assert "not measured" in m.line() and "the stated 8 tokens stand" in m.line()
    assert "no /tokenize" in none.basis and "chat" in chat.basis
