"""The engine schedulers' own kernel policies (issue 31): TensorRT-LLM's whole prompts (`whole`) and
SGLang's prefill batches without the decodes (`unmixed`)."""

from __future__ import annotations

import numpy as np
import pytest

from pareto_atlas.simulate import des
from pareto_atlas.simulate.cost_model import coeffs
from pareto_atlas.simulate.kernels import CV, O_REQ
from pareto_atlas.simulate.params import CalibParams
from pareto_atlas.spec.cards import shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs

M7 = shipped_models()["qwen2.5-7b"]
L4 = shipped_hardware()["L4"]


def _c(batching: str) -> np.ndarray:
    c = coeffs(M7, L4, Knobs(batching=batching, slots=8, chunk_tokens=1000), CalibParams())
    c[CV] = 0.0  # no jitter: the step counts and orders below are exact
    c[O_REQ] = 0.0
    return c


@pytest.mark.parametrize("batching", ["whole", "unmixed"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_request_finishes_and_every_token_is_counted(batching, seed):
    rng = np.random.default_rng(seed)
    n = 80
    prompts, outputs = rng.integers(1, 2500, n), rng.integers(1, 60, n)
    arr = des.trace(np.cumsum(rng.exponential(0.05, n)), prompts, outputs)
    r = des.run(_c(batching), arr, batching, 6, 1000, kv_cap_tokens=20000)
    assert (r.first_t > r.arrival).all() and (r.finish_t >= r.first_t).all()
    dur = r.finish_t.max() - r.arrival.min()
    assert r.summary["throughput_tok_s"] * dur == pytest.approx(arr.output.sum())


def test_whole_prefills_a_prompt_past_the_budget_in_one_step_and_chunked_in_several():
    arr = des.trace(np.zeros(1), np.array([2500]), np.array([1]))
    assert des.run(_c("whole"), arr, "whole", 4, 1000).steps == 1
    assert des.run(_c("chunked"), arr, "chunked", 4, 1000).steps == 3


def test_whole_holds_a_prompt_that_does_not_fit_beside_the_decodes():
    # A decodes; B's 1000-token prompt needs the whole 1000-token budget, A's decode takes one of it:
    # whole prompts wait for A to finish, chunked ones start beside it.
    arr = des.trace(np.array([0.0, 0.001]), np.array([10, 1000]), np.array([200, 2]))
    whole = des.run(_c("whole"), arr, "whole", 4, 1000)
    chunked = des.run(_c("chunked"), arr, "chunked", 4, 1000)
    assert whole.first_t[1] >= whole.finish_t[0]
    assert chunked.first_t[1] < chunked.finish_t[0]


def test_unmixed_stops_the_decodes_for_a_prefill_step():
    # A (one prefill step, 49 decode steps) and B's prompt arriving while A decodes: unmixed runs B's
    # prefill as a step of its own in which A emits nothing (51 steps); chunked mixes it in (50).
    arr = des.trace(np.array([0.0, 0.05]), np.array([10, 600]), np.array([50, 1]))
    un = des.run(_c("unmixed"), arr, "unmixed", 4, 1000)
    mixed = des.run(_c("chunked"), arr, "chunked", 4, 1000)
    assert un.first_t[1] < un.finish_t[0]  # B arrived while A ran
    assert (un.steps, mixed.steps) == (51, 50)
    assert un.finish_t[0] > mixed.finish_t[0]
