"""End to end on the real llama.cpp server (xllamacpp) with SmolLM2-135M: plumbing, not quality.

3 GSM8K items (lm-eval 5-shot) + 1 chat item + 2 retrieval items; records must be complete and
re-scoring them without the server must reproduce the scores.
"""

from __future__ import annotations

import json

import pytest

from pareto_atlas.quality import agreement, gsm8k_items, rescore, retrieval_items, run_items
from pareto_atlas.quality.records import QualityRecord
from pareto_atlas.quality.runner import server_token_counter

from smollm2_server import smollm2_server

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def base_url():
    yield from smollm2_server(n_ctx=4096)  # 2048 per slot: the 5-shot prompts are ~1000-1400 tokens


def _check_complete(records, items):
    assert [r.item_id for r in records] == [it.item_id for it in items]
    for r, it in zip(records, items):
        assert r.error is None, r.error
        assert r.prompt_sha256 == it.prompt_sha256() and r.target == it.target
        assert r.prompt_tokens and r.prompt_tokens > 0 and r.completion_tokens and r.completion_tokens >= 1
        assert r.token_ids is not None and 1 <= len(r.token_ids) <= it.max_tokens
        assert r.token_logprobs is not None and len(r.token_logprobs) == len(r.token_ids)
        assert r.finish_reason in ("stop", "length") and r.latency_s > 0


def test_gsm8k_and_retrieval_through_the_real_server(base_url):
    gsm = gsm8k_items(3, "lm-eval-5shot", max_tokens=32)
    chat = gsm8k_items(1, "chat-0shot", max_tokens=32)
    counter = server_token_counter(base_url)
    assert counter is not None and counter("hello world") >= 2
    niah = retrieval_items((256,), (0.25, 0.75), per_cell=1, count_tokens=counter)
    assert all(abs(it.meta["haystack_tokens"] - 256) <= 16 for it in niah)

    seen = []
    for items in (gsm, chat, niah):
        run = run_items(base_url, items, concurrency=2, progress=lambda d, n: seen.append((d, n)))
        _check_complete(run.records, items)
        assert run.summary.n == len(items) and run.summary.n_errors == 0
        # Saved and reloaded records re-score to the same numbers without any server.
        stored = [QualityRecord.from_dict(json.loads(json.dumps(r.to_dict()))) for r in run.records]
        again = rescore(stored)
        assert again.summary.strict == run.summary.strict and again.summary.flexible == run.summary.flexible
        assert [r.extracted_strict for r in again.records] == [r.extracted_strict for r in run.records]
        if items is niah:
            # the retrieval prompt asks about one needle; prompt tokens reflect the sized haystack
            assert all(r.prompt_tokens > 256 for r in run.records)
        ag = agreement(run.records, run.records)
        assert ag.unit == "token" and ag.answer_agreement.p == 1.0
    assert seen[-1] == (2, 2)
