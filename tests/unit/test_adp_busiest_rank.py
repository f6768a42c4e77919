"""cost_model.ADP_BUSIEST_RANK (kernels ADP_DENSE): under attention-DP each prompt runs whole on one rank and a
step lasts as long as its busiest rank. Off (the product), nothing changes; on, a step whose prompts sit on
fewer ranks than there are costs more, one whose prompts fill every rank alike costs the same."""

from __future__ import annotations

import pytest

from pareto_atlas.simulate import cost_model
from pareto_atlas.simulate.cost_model import coeffs
from pareto_atlas.simulate.kernels import ADP_DENSE, prefill_pairs, step_time
from pareto_atlas.simulate.params import CalibParams
from pareto_atlas.spec.cards import shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs

DSV3 = shipped_models()["deepseek-v3"]
B200 = shipped_hardware()["B200"]
ADP8 = Knobs(weights="FP8", kv="fp8", tp=1, attn_dp=8, ep=8)
PROMPT = 1024.0


def _c(on: bool, knobs: Knobs = ADP8, model=DSV3):
    was = cost_model.ADP_BUSIEST_RANK
    cost_model.ADP_BUSIEST_RANK = on
    try:
        return coeffs(model, B200, knobs, CalibParams())
    finally:
        cost_model.ADP_BUSIEST_RANK = was


def _step(c, n_dec: float, prompts: int) -> float:
    # n_dec decodes at 1,024 tokens of context each, beside `prompts` whole 1,024-token prompts
    n_pf = prompts * PROMPT
    return step_time(c, n_dec, n_dec * PROMPT, n_pf, prompts * prefill_pairs(PROMPT, 0.0), 0.0, n_dec + prompts)


def test_off_leaves_every_step_as_it_was():
    assert _c(False)[ADP_DENSE] == 0.0
    # a dense model never reaches the attention-DP terms
    dense = shipped_models()["qwen3-32b"]
    assert (_c(True, Knobs(tp=2), dense) == _c(False, Knobs(tp=2), dense)).all()


def test_one_prompt_on_one_rank_makes_the_step_wait_for_it():
    off, on = _c(False), _c(True)
    assert 0.0 < on[ADP_DENSE] < 1.0  # the routed experts' compute stays spread over EP
    # decode-only steps are untouched
    assert _step(on, 64, 0) == _step(off, 64, 0)
    # one prompt beside 63 decodes: the rank holding it runs the whole prompt's dense compute and attention
    assert _step(on, 63, 1) > 1.3 * _step(off, 63, 1)
    # more prompts than ranks: ceil(prompts / ranks) of them on the busiest rank
    assert _step(on, 48, 16) > _step(on, 56, 8)


def test_prompts_filling_every_rank_alike_cost_what_an_even_split_costs():
    off, on = _c(False), _c(True)
    assert _step(on, 0, 8) == pytest.approx(_step(off, 0, 8), rel=1e-9)


def test_a_worker_without_attention_dp_is_untouched():
    tp8 = Knobs(weights="FP8", kv="fp8", tp=8, ep=8)
    assert (_c(True, tp8) == _c(False, tp8)).all()


def test_the_rank_budget_is_each_ranks_own_from_the_ranks_batch():
    from pareto_atlas.calibrate import published_runs

    # off (the product): one budget from all the worker's clients, 256 + 1,024 + 1,500 block-rounded
    assert published_runs.aiconfigurator_run("trtllm", 256, 1024, 8).chunk_tokens == 2784
    published_runs.ADP_RANK_BUDGET = True
    try:
        run = published_runs.aiconfigurator_run("trtllm", 256, 1024, 8)
        # each of 8 ranks: its batch of 32 + 1,024 + 1,500 = 2,556, rounded up to 32-token blocks
        assert (run.chunk_tokens, run.max_seqs) == (8 * 2560, 256)
        assert published_runs.aiconfigurator_run("trtllm", 256, 1024).chunk_tokens == 2784  # no attention-DP
        with pytest.raises(ValueError, match="attn_dp"):
            published_runs.aiconfigurator_run("trtllm", 256, 1024, 0)
    finally:
        published_runs.ADP_RANK_BUDGET = False
