"""HumanEval and IFEval end to end on the real llama.cpp server (xllamacpp) with SmolLM2-135M:
plumbing, not quality. The pre-filled assistant turn must be continued (the answer starts inside
the ```python fence), every answer is run in the sandbox, and re-scoring the saved records
without the server reproduces the scores."""

from __future__ import annotations

import pytest

from smollm2_server import smollm2_server
from pareto_atlas.quality import humaneval as he
from pareto_atlas.quality import rescore, run_items
from pareto_atlas.quality import sandbox as sb
from pareto_atlas.quality.ifeval import ifeval_items
from pareto_atlas.quality.scoring import task_extras

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def base_url():
    yield from smollm2_server(n_ctx=4096)


@pytest.mark.skipif(not sb.machine_allows()[0], reason="this machine forbids the sandbox")
def test_humaneval_through_the_real_server_and_the_sandbox(base_url):
    items = he.humaneval_items(2, seed=3, max_tokens=48)
    run = run_items(base_url, items, concurrency=2)
    for r in run.records:
        assert r.error is None, r.error
        assert r.output.startswith(he.PREFILL)  # the server continued our assistant turn
        assert r.extracted_flexible.split(":")[0] in sb.STATUSES
        assert r.completion_tokens and r.completion_tokens <= 48
    again = rescore(run.records)
    assert [r.correct_strict for r in again.records] == [r.correct_strict for r in run.records]
    assert sum(task_extras(run.records)["sandbox_outcomes"].values()) == 2


def test_ifeval_through_the_real_server(base_url):
    items = ifeval_items(2, seed=3, max_tokens=32)
    run = run_items(base_url, items, concurrency=2)
    assert all(
        r.error is None and len(r.extracted_strict) == len(it.meta["instructions"]) for r, it in zip(run.records, items)
    )
    s = task_extras(run.records)
    assert s["prompt_strict"]["n"] == 2 and s["instruction_loose"]["k"] >= s["instruction_strict"]["k"]
    again = rescore(run.records).summary
    assert (again.strict, again.flexible) == (run.summary.strict, run.summary.flexible)
