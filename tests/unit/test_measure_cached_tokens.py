"""Per-request cached tokens, as a server with a prefix cache reports them (the fake server answers as
vLLM does: usage.prompt_tokens_details.cached_tokens in whole blocks, 0 included), recorded beside the
token-count contract and summed into an anchor's measured hit rate; and the line the measure stage
prints for it."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from pareto_atlas.measure.contract import build_contract_prompts, build_shared_prompts
from pareto_atlas.measure.fakeserver import FakeBehaviour, FakeOpenAIServer
from pareto_atlas.measure.loadgen import run_load_sync
from pareto_atlas.measure.metrics import derive_metrics
from pareto_atlas.stages.progress import measure_progress

P, N, PREFIX, BLOCK = 24, 3, 12, 4


def _anchor(behaviour: FakeBehaviour, shared: bool):
    with FakeOpenAIServer(behaviour) as srv:
        if shared:
            prompts = build_shared_prompts(srv.base_url, P, 5, PREFIX, 1, seed=3)
        else:
            prompts = build_contract_prompts(srv.base_url, P, 5, seed=3)
        recs = run_load_sync(srv.base_url, prompts, N, concurrency=1, warmup=1, prompt_tokens=P)
    return recs, derive_metrics(recs, P, N)


def test_a_shared_prefix_is_recorded_per_request_beside_the_contract():
    recs, m = _anchor(FakeBehaviour(cache_block=BLOCK), shared=True)
    assert m.n_ok == 4 and all(r.ok for r in recs)  # the contract holds with the details in usage
    # the warm-up found nothing; each later request its prefix (12 tokens, "Request" is shared too:
    # 13 common words, whole blocks of 4 -> 12)
    assert [r.cached_tokens for r in recs] == [0, 12, 12, 12, 12]
    assert m.prefix_hit_rate == pytest.approx(12 / P)  # the warm-up's 0 stays out


def test_unique_prompts_measure_a_zero_hit_rate_and_a_silent_server_none():
    _, unique = _anchor(FakeBehaviour(cache_block=BLOCK), shared=False)
    assert unique.prefix_hit_rate == 0.0  # reported zeros: measured, not missing
    recs, silent = _anchor(FakeBehaviour(), shared=True)
    assert all(r.cached_tokens is None for r in recs) and silent.prefix_hit_rate is None


def _printed(metrics: dict) -> str:
    out = io.StringIO()
    on = measure_progress(Console(file=out, width=200))
    on("anchor", {"i": 0, "n": 1, "arm": "cache-on"})
    on("done", {"arm": "cache-on", "status": "ok", "reason": None, "metrics": metrics})
    return out.getvalue()


def test_the_measure_stage_prints_the_hit_rate_and_ttft_p50_p99():
    _, m = _anchor(FakeBehaviour(cache_block=BLOCK), shared=True)
    text = _printed(m.to_dict())
    assert "hit rate 50.0% of prompt tokens" in text
    assert f"TTFT p50 {m.ttft.p50:.1f} ms p99 {m.ttft.p99:.1f} ms" in text
    assert "hit rate" not in _printed({**m.to_dict(), "prefix_hit_rate": None})
