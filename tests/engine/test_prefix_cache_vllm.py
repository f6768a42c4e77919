"""Exact reuse on a real vLLM on this CPU (`make setup-vllm`): a prompt answered with its prefix cache
cold and then warm, at temperature 0, gives the same token ids, and the server says the warm answer
came from the cache (usage.prompt_tokens_details.cached_tokens).

vLLM computes a cached prefix's KV once and reuses those very blocks; only the uncached tail is
prefilled (a smaller batch of tokens than the cold prefill). On this CPU's float32 eager build the
greedy tokens were found identical (docs/results/2026-12-02-prefix-vllm.md); llama.cpp's are not
always (tests/engine/test_prefix_cache_llamacpp.py). The logprobs' largest difference is printed.
"""

from __future__ import annotations

import httpx
import pytest

from pareto_atlas.measure.anchor_plan import launch_for, served_model
from pareto_atlas.measure.contract import build_shared_prompts
from pareto_atlas.measure.engines import ArmLaunch
from pareto_atlas.measure.engines.vllm import VllmEngine, find_python
from pareto_atlas.measure.weights import ModelError
from pareto_atlas.spec.study import load_study

pytestmark = [pytest.mark.engine, pytest.mark.slow]

P, PREFIX, N = 512, 256, 24


@pytest.fixture(scope="module")
def server():
    if find_python() is None:
        pytest.skip("vLLM is not installed here: `make setup-vllm` makes .venv-vllm (about 2 minutes)")
    study = load_study("prefix-vllm")
    arm = study.arm("cache-on")
    try:
        path = served_model(study, arm)[0]
    except ModelError as e:
        pytest.skip(f"the study's model is not installed: {e}")
    with VllmEngine().start(ArmLaunch.coerce(launch_for(study, arm, str(path)))) as running:
        yield running


def _answer(c: httpx.Client, model: str, prompt: str) -> tuple[list[int], list[float], int | None]:
    body = {
        "model": model,
        "prompt": prompt,
        "max_tokens": N,
        "temperature": 0.0,
        "ignore_eos": True,
        "logprobs": 1,
        "return_token_ids": True,
    }
    r = c.post("/v1/completions", json=body)
    r.raise_for_status()
    out = r.json()
    choice = out["choices"][0]
    cached = ((out.get("usage") or {}).get("prompt_tokens_details") or {}).get("cached_tokens")
    return choice["token_ids"], choice["logprobs"]["token_logprobs"], cached


def test_a_cached_and_an_uncached_answer_are_the_same_tokens(server):
    first, second = build_shared_prompts(server.base_url, P, 2, PREFIX, 1, seed=11, model=server.model)
    with httpx.Client(base_url=server.base_url, timeout=300) as c:
        cold, lp_cold, n_cold = _answer(c, server.model, second)  # nothing cached yet
        _answer(c, server.model, first)  # shares the system prompt: its blocks are hit, its tail added
        warm, lp_warm, n_warm = _answer(c, server.model, second)  # all of `second`'s full blocks cached
    assert n_cold == 0, n_cold
    assert n_warm is not None and n_warm >= PREFIX, n_warm  # served from the cache, as the server says
    drift = max(abs(a - b) for a, b in zip(lp_cold, lp_warm))
    print(f"\nvLLM cold/warm: cached {n_cold} -> {n_warm} of {P} tokens; max |logprob diff| {drift:.3g}")
    print(f"cold {cold}\nwarm {warm}")
    assert len(cold) == len(warm) == N
    assert warm == cold
