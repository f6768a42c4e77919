"""The engine schedulers' own kernel policies (issue 31): TensorRT-LLM's whole prompts (`whole`) and
SGLang's prefill batches without the decodes (`unmixed`) and its mixed chunks (`mixed`)."""

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


@pytest.mark.parametrize(
    "batching", ["whole", "unmixed", "whole+overlap", "unmixed+overlap", "chunked+overlap", "mixed", "mixed+overlap"]
)
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


def test_overlap_admits_an_arrival_one_step_later():
    # A decodes alone (one prefill step, then a step per token); B arrives during A's 10th decode
    # step. Without overlap B's prefill is the step after that one; under an overlap scheduler the
    # step after it was already formed when B arrived, so B joins the one after: one step later.
    # Same steps either way (B's prefill only moves), so the first token moves by one step's time.
    c = _c("chunked")
    a_only = des.run(c, des.trace(np.zeros(1), np.array([10]), np.array([50])), "chunked", 4, 1000)
    step = (a_only.finish_t[0] - a_only.first_t[0]) / 49
    t_b = a_only.first_t[0] + 9.5 * step
    arr = des.trace(np.array([0.0, t_b]), np.array([10, 100]), np.array([50, 5]))
    plain = des.run(c, arr, "chunked", 4, 1000)
    over = des.run(c, arr, "chunked+overlap", 4, 1000)
    assert plain.first_t[1] - t_b < 1.6 * step  # the rest of A's step, then B's (prefill) step
    assert over.first_t[1] - plain.first_t[1] == pytest.approx(step, rel=0.2)
    # an idle engine admits at once either way: A's own first token does not move
    assert over.first_t[0] == plain.first_t[0]


def test_overlap_delays_each_closed_loop_client_by_a_step():
    # A closed loop's next request is sent when the last one completes, while the engine already
    # runs the next step: overlap delays every TTFT but the first client's (an idle engine starts
    # at once), the other first-wave clients' too (they land a moment after the first step began).
    c = _c("whole")
    plain = des.run(c, des.closed_loop(4, 40, 200, 30), "whole", 4, 1000)
    over = des.run(c, des.closed_loop(4, 40, 200, 30), "whole+overlap", 4, 1000)
    order = np.argsort(plain.arrival, kind="stable")
    assert over.ttft[order[0]] == plain.ttft[order[0]]
    assert (over.ttft[order[1:4]] > plain.ttft[order[1:4]]).all()
    assert np.median(over.ttft) > np.median(plain.ttft)


def test_a_blocked_prompts_decodes_run_as_one_fast_forward_step_for_step():
    # A decodes 299 tokens while B's whole 1000-token prompt waits (it does not fit beside A's decode):
    # A's steps are jumped over in closed form, as a batch's are with nothing waiting, and come to the
    # sum of its single steps (context 10, 11, ... 308); B then prefills alone and decodes its 4.
    from pareto_atlas.simulate.kernels import prefill_pairs, step_time

    c = _c("whole")
    arr = des.trace(np.array([0.0, 0.001]), np.array([10, 1000]), np.array([300, 5]))
    r = des.run(c, arr, "whole", 4, 1000)
    pf_a = step_time(c, 0.0, 0.0, 10.0, prefill_pairs(10.0, 0.0), 0.0, 1.0)
    a = pf_a + sum(step_time(c, 1.0, 10.0 + i, 0.0, 0.0, 0.0, 1.0) for i in range(299))
    assert r.first_t[0] == pytest.approx(pf_a, rel=1e-12)
    assert r.finish_t[0] == pytest.approx(a, rel=1e-6)
    pf_b = step_time(c, 0.0, 0.0, 1000.0, prefill_pairs(1000.0, 0.0), 0.0, 1.0)
    assert r.first_t[1] == pytest.approx(a + pf_b, rel=1e-6)
    b = a + pf_b + sum(step_time(c, 1.0, 1000.0 + i, 0.0, 0.0, 0.0, 1.0) for i in range(4))
    assert r.finish_t[1] == pytest.approx(b, rel=1e-6)


def test_a_closed_loop_of_blocked_whole_prompts_costs_events_not_tokens():
    # 32 clients whose prompts each take the whole budget: TensorRT-LLM's whole admission runs them one
    # at a time, 320 M decode steps in all, each of which was a turn of the loop over the 32 requests
    # (minutes); jumped over per request, milliseconds. The bound is a complexity check, not a speed
    # goal: a step-by-step loop misses it by orders of magnitude on any machine.
    import time

    arr = des.closed_loop(32, 64, 1000, 5_000_000)
    des.run(_c("whole"), des.closed_loop(2, 2, 1000, 10), "whole", 32, 1000)  # compiled
    t0 = time.perf_counter()
    r = des.run(_c("whole"), arr, "whole", 32, 1000)
    assert time.perf_counter() - t0 < 10.0
    assert r.steps >= 64 * 5_000_000


def test_mixed_takes_later_prompts_whole_and_only_under_what_is_left():
    # SGLang's PrefillAdder with enable_mixed_chunk (budget 1000, three 450-token prompts at once):
    # the first two fit (450, then 450 < 550), the third does not (450 >= 100) and waits for the next
    # step whole, where chunked prefills 100 of it beside the first two. A fourth of 100 tokens behind
    # it waits too (first come, first served), though it would fit.
    arr = des.trace(np.zeros(4), np.array([450, 450, 450, 100]), np.array([1, 1, 1, 1]))
    mixed = des.run(_c("mixed"), arr, "mixed", 4, 1000)
    chunked = des.run(_c("chunked"), arr, "chunked", 4, 1000)
    assert mixed.first_t[0] == mixed.first_t[1] < mixed.first_t[2] == mixed.first_t[3]
    assert mixed.steps == 2
    # the first step prefills 900 tokens, not the budget's 1000: its first tokens come sooner
    assert mixed.first_t[0] < chunked.first_t[0]


def test_mixed_refuses_a_prompt_that_exactly_fills_what_is_left_and_chunks_the_first():
    # `input_tokens >= rem_input_tokens` stops the batch: a 500-token prompt behind a 500-token one
    # waits at a 1000-token budget; a first prompt past the budget is chunked at it, as chunked does.
    arr = des.trace(np.zeros(2), np.array([500, 500]), np.array([1, 1]))
    mixed = des.run(_c("mixed"), arr, "mixed", 4, 1000)
    assert mixed.first_t[0] < mixed.first_t[1] and mixed.steps == 2
    assert des.run(_c("chunked"), arr, "chunked", 4, 1000).steps == 1
    long = des.trace(np.zeros(1), np.array([2500]), np.array([1]))
    assert des.run(_c("mixed"), long, "mixed", 4, 1000).steps == 3


def test_mixed_runs_the_decodes_in_its_prefill_steps():
    # as chunked (enable_mixed_chunk: the decodes ride with the prefill batch), not as unmixed
    arr = des.trace(np.array([0.0, 0.05]), np.array([10, 600]), np.array([50, 1]))
    assert des.run(_c("mixed"), arr, "mixed", 4, 1000).steps == 50
    over = des.run(_c("mixed+overlap"), arr, "mixed+overlap", 4, 1000)
    plain = des.run(_c("mixed"), arr, "mixed", 4, 1000)
    assert over.first_t[1] > plain.first_t[1]  # the overlap scheduler admits B a step later


@pytest.mark.parametrize("batching", ["mixed", "unmixed+overlap"])
def test_sglang_admission_reserves_the_outputs_to_come(batching):
    # A KV pool of 3000 tokens, A (100-token prompt, 2000 outputs) running when B (the same) arrives:
    # B needs 100 + 2000 tokens for itself and A's 2000 to come at new_token_ratio 0.7, so SGLang holds
    # it back; the ratio falls over 600 decode steps and A's outputs to come shrink, and near A's 500th
    # step B fits (t + ratio (2000 - t) < 800). Without the reservation (chunked) B starts at once; with
    # a ratio that never fell it would wait for A to finish.
    arr = des.trace(np.array([0.0, 0.001]), np.array([100, 100]), np.array([2000, 2000]))
    sgl = des.run(_c(batching), arr, batching, 4, 1000, kv_cap_tokens=3000)
    plain = des.run(_c("chunked"), arr, "chunked", 4, 1000, kv_cap_tokens=3000)
    share = (sgl.first_t[1] - sgl.first_t[0]) / (sgl.finish_t[0] - sgl.first_t[0])
    assert 0.15 < share < 0.4
    assert (plain.first_t[1] - plain.first_t[0]) / (plain.finish_t[0] - plain.first_t[0]) < 0.01


def test_sglang_ratio_starts_over_after_an_idle_engine():
    # The pair above twice, the second long after the first finished: SGLang resets new_token_ratio to
    # 0.7 when it has no batch, so the second B waits as long as the first; with the ratio left at its
    # floor (0.098, after the first pair's thousands of decode steps) it would start at once.
    t = np.array([0.0, 0.001, 1000.0, 1000.001])
    arr = des.trace(t, np.full(4, 100), np.full(4, 2000))
    r = des.run(_c("mixed"), arr, "mixed", 4, 1000, kv_cap_tokens=3000)
    assert r.finish_t[:2].max() < 1000.0
    shares = [(r.first_t[b] - r.first_t[a]) / (r.finish_t[a] - r.first_t[a]) for a, b in ((0, 1), (2, 3))]
    assert 0.15 < shares[0] < 0.4 and shares[1] == pytest.approx(shares[0], abs=0.02)
