"""RULER's tasks end to end on the real llama.cpp server (xllamacpp) with SmolLM2-135M: plumbing,
not accuracy. Items sized with the server's own tokenizer fit their length as the server counts
the whole request (chat template included), the character guess stays short of that tokenizer,
every answer is scored, and re-scoring the saved records reproduces the scores."""

from __future__ import annotations

import pytest

from smollm2_server import smollm2_server
from pareto_atlas.quality import rescore, run_items
from pareto_atlas.quality import ruler as R
from pareto_atlas.quality.runner import server_token_counter
from pareto_atlas.quality.scoring import task_extras

# about a minute on 2 quiet cores (five 1,024-token prompts): `make test-slow`
pytestmark = [pytest.mark.engine, pytest.mark.slow]
L = 1024


@pytest.fixture(scope="module")
def base_url():
    yield from smollm2_server(n_ctx=2 * L)


def test_ruler_through_the_real_server(base_url):
    count = server_token_counter(base_url)
    assert count is not None
    items = R.ruler_items((L,), per_cell=1, seed=5, count_tokens=count)
    for it in items:  # the guess without a tokenizer comes out short of this one
        text = it.messages[0][1] + it.messages[1][1]
        cpt = R.CHARS_PER_TOKEN[it.meta["subtask"]]
        assert len(text) / cpt >= it.meta["prompt_tokens"], (it.item_id, len(text) / it.meta["prompt_tokens"])
    run = run_items(base_url, items, concurrency=2)
    for r, it in zip(run.records, items):
        assert r.error is None, r.error
        assert r.prompt_tokens + it.max_tokens <= L, (it.item_id, r.prompt_tokens)  # template included
        assert r.prompt_tokens > 0.8 * L - it.max_tokens
        assert r.completion_tokens <= it.max_tokens
        assert len(r.extracted_strict) == len(R.references(it.target)[0]) and set(r.extracted_strict) <= {"0", "1"}
    cells = task_extras(run.records)["ruler_cells"]
    assert [c["subtask"] for c in cells] == list(R.SUBTASKS) and all(c["strict"]["n"] == 1 for c in cells)
    again = rescore(run.records)
    assert [r.extracted_strict for r in again.records] == [r.extracted_strict for r in run.records]
