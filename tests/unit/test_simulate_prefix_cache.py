"""The simulated prefix cache: an LRU of blocks whose room is the KV memory a full batch leaves."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from pareto_atlas.simulate import des
from pareto_atlas.simulate.prefix_cache import SharedLoad, cache_tokens, cached_tokens, shared_load
from pareto_atlas.simulate.space import Load, Space, Workload, compatible, prefix_variants
from pareto_atlas.simulate.sweep import sweep
from pareto_atlas.spec.cards import shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.spec.sharing import Sharing


def _load(blocks, prompt, block=16):
    return SharedLoad(np.array(prompt, np.int64), np.ones(len(prompt), np.int64), tuple(blocks), block)


def test_lru_hits_a_chain_of_leading_blocks_and_evicts_the_oldest():
    load = _load([(1, 2, 3), (1, 2, 9), (1, 5, 3), (7, 8, 6), (1, 2, 3)], [48] * 5)
    assert cached_tokens(load, 0).tolist() == [0] * 5  # no room: nothing cached
    # a block counts only after every block before it hit; the last prompt token is always computed
    assert cached_tokens(load, 10 * 16).tolist() == [0, 32, 16, 0, 47]
    # room for 4 blocks: (7, 8, 6) pushes out 1, 2's older neighbours, then 1 itself is gone
    assert cached_tokens(load, 4 * 16).tolist()[-1] < 47


def test_cache_room_is_what_a_full_batch_leaves():
    assert cache_tokens(10_000, 8, 1000) == 2000
    assert cache_tokens(10_000, 32, 1000) == 0.0
    assert cache_tokens(np.inf, 1, 10) == 0.0


def test_shared_load_of_a_trace_uses_its_blocks():
    trace = ((0.0, 600, 4), (1.0, 600, 4))
    sl = shared_load(None, ((5, 6), (5, 7)), 600, 4, 2, 1, trace)
    assert sl.block == 512 and cached_tokens(sl, 1e6).tolist() == [0, 512]


def test_des_checks_cached_counts():
    a = des.closed_loop(1, 3, 100, 8)
    with pytest.raises(ValueError, match="cached: one count per request"):
        des.run(np.ones(40) * 1e-4, a, cached=np.array([0, 100, 0]))


def _sweep(knobs, workloads, loads=(Load(concurrency=16),)):
    hw = shipped_hardware()["L4"]
    m = shipped_models()["llama-3.1-8b"]
    return sweep(Space(m, (hw,), tuple(knobs), tuple(workloads), tuple(loads)), n_requests=120)


AGENT = Workload("agent", 2048, 64, share=Sharing(prefix_tokens=1536, groups=4))
CHAT = Workload("chat", 1024, 128, share=Sharing(prefix_tokens=256, turns=4))


def test_a_cached_prefix_skips_its_prefill():
    df = _sweep(
        [Knobs(weights="FP8", slots=16), Knobs(weights="FP8", slots=16, prefix_cache=True)],
        [AGENT, Workload("plain", 2048, 64)],
    )
    on = df[(df.prefix_cache) & (df.workload == "agent")].iloc[0]
    off = df[(~df.prefix_cache) & (df.workload == "agent")].iloc[0]
    assert off.prefix_hit_rate == 0.0 and on.prefix_hit_rate > 0.6
    assert on.ttft_p50_ms < 0.7 * off.ttft_p50_ms
    assert df[df.workload == "plain"].prefix_hit_rate.isna().all()  # shares nothing: no hit rate


def test_quantized_kv_holds_more_and_more_slots_leave_less_room():
    knobs = [Knobs(weights="FP8", kv=kv, slots=s, prefix_cache=True) for kv in ("f16", "fp8") for s in (32, 128)]
    df = _sweep(knobs, [CHAT]).set_index(["kv", "slots"]).prefix_hit_rate
    assert df["fp8", 32] > df["f16", 32]
    assert df["f16", 128] < df["f16", 32] and df["fp8", 128] < df["fp8", 32]


def test_evicted_kv_is_not_reused():
    df = _sweep([Knobs(weights="FP8", slots=16, prefix_cache=True, eviction="h2o", kv_keep=0.5)], [AGENT])
    assert df.prefix_hit_rate.iloc[0] == 0.0


def test_knob_key_and_grid_variants():
    assert "prefix_cache" not in Knobs().to_dict() and Knobs(prefix_cache=True).to_dict()["prefix_cache"] is True
    assert Knobs().key() != Knobs(prefix_cache=True).key()
    assert "prefix-cache" in Knobs(prefix_cache=True).optimizations()
    v = prefix_variants([Knobs(), Knobs(eviction="h2o", kv_keep=0.5)])
    assert v == [Knobs(prefix_cache=True)]
    hw = shipped_hardware()["H200"]
    assert "prefix_cache" in compatible(Knobs(batching="disagg", decode_workers=2, prefix_cache=True), hw)
    with pytest.raises(ValueError, match="knobs.prefix_cache"):
        Knobs(prefix_cache=1)


def test_the_atlas_says_what_caching_is_worth_and_where_it_moves_the_winner():
    from pareto_atlas.atlas.prefix import caching_worth, worth_lines

    knobs = [
        Knobs(weights="FP8", kv=kv, slots=s, prefix_cache=pc)
        for kv in ("f16", "fp8")
        for s in (32, 128)
        for pc in (False, True)
    ]
    df = _sweep(knobs, [CHAT, Workload("plain", 1024, 128)]).assign(model="llama-3.1-8b")
    t = caching_worth(df)
    assert set(t.workload) == {"chat"}  # a workload that shares nothing has no row
    thr = t[t.criterion == "throughput_per_device_tok_s"].iloc[0]
    assert thr.best_with.endswith("+pcache") and thr.gain > 1.0 and thr.hit_rate > 0
    lines = worth_lines(t)
    assert lines and "hit rate" in lines[0]
    assert worth_lines(caching_worth(df[df.workload == "plain"]))[0].startswith("prefix caching: no workload")


def test_calibration_replays_an_anchors_measured_hits():
    import pandas as pd

    from pareto_atlas.calibrate.fit import _anchors, predict
    from pareto_atlas.simulate.params import default_params

    hw, m = shipped_hardware()["L4"], shipped_models()["llama-3.1-8b"]
    row = {
        **Knobs(weights="FP8", slots=4, prefix_cache=True).as_row(),
        "prompt_tokens": 2048,
        "output_tokens": 32,
        "concurrency": 1,
        "n_requests": 16,
    }
    anchors = _anchors(pd.DataFrame([row, {**row, "prefix_hit_rate": 0.8}]))
    assert anchors[0].hit == 0.0 and anchors[1].hit == 0.8
    ttft = predict(anchors, m, hw, default_params(hw, "vllm"))[:, 0]
    assert ttft[1] < 0.5 * ttft[0]


def test_a_measured_anchors_warm_ups_fill_the_cache_before_its_scored_requests():
    from pareto_atlas.simulate.prefix_cache import hit_rate, measured_twin_cached

    s = Sharing(prefix_tokens=192)
    warm = measured_twin_cached(s, 384, 16, 12, 1, 1, 1e6, 1)
    cold = measured_twin_cached(s, 384, 16, 12, 0, 1, 1e6, 1)
    # after one warm-up every scored request finds the 192-token system prompt (12 blocks of 16)
    assert warm.tolist() == [192] * 12
    assert cold.tolist() == [0] + [192] * 11
    assert hit_rate(warm, np.full(12, 384)) == pytest.approx(0.5)
    # two groups on two sessions side by side: the warm-up holds group 0's prefix only, so the first
    # scored request (group 1) misses and every later one hits its group's prefix
    two = measured_twin_cached(Sharing(prefix_tokens=288, groups=2), 384, 16, 6, 1, 2, 1e6, 2)
    assert two.tolist() == [0] + [288] * 5
    # no room left by the running batch: nothing is cached
    assert measured_twin_cached(s, 384, 16, 4, 1, 1, 400, 1).tolist() == [0] * 4


def _answer(df):
    from pareto_atlas.atlas.answer import Answer
    from pareto_atlas.atlas.objectives import with_derived
    from pareto_atlas.atlas.regimes import default_regimes

    q = {"quality": 0.8, "quality_lo": 0.78, "quality_hi": 0.82, "quality_rel": 1.0, "quality_rel_lo": 0.98}
    pts = with_derived(df.assign(**q, quality_rel_hi=1.02, quality_provenance="measured"))
    return Answer.of(pts, default_regimes(pts), allow_priors=True)


def test_the_atlas_names_the_regime_winners_the_cache_moves():
    from pareto_atlas.atlas.prefix import move_lines

    knobs = [
        Knobs(weights="FP8", kv=kv, slots=s, prefix_cache=pc)
        for kv in ("f16", "fp8")
        for s in (32, 128)
        for pc in (False, True)
    ]
    df = _sweep(knobs, [CHAT, Workload("plain", 1024, 128)]).assign(model="llama-3.1-8b")
    m = _answer(df).prefix_moves
    assert set(m.workload) == {"chat"} and len(m) == len(set(m.regime))  # one row per regime, shared workloads only
    assert not m.moved.any() and m.cached.all()  # here the cache only speeds up the winner it had
    assert "moved 0 of" in move_lines(m)[-1] and "projected" in move_lines(m)[0]
    # a configuration the cache makes 10x faster for the GPU: it wins throughput only with the cache on
    bumped = df.copy()
    star = (bumped.label == "FP8+x32+pcache") & (bumped.workload == "chat")
    bumped.loc[star, ["throughput_tok_s", "throughput_per_device_tok_s"]] *= 10
    m = _answer(bumped).prefix_moves.set_index("regime")
    assert m.loc["high-throughput", "label"] == "FP8+x32+pcache" and m.loc["high-throughput", "moved"]
    assert m.loc["high-throughput", "label_off"] == "FP8+kvfp8+x128"
    assert not m.loc["quality-floor", "moved"]  # same quality both ways: a tie, not a move
    assert any("moves from FP8+kvfp8+x128" in line for line in move_lines(m.reset_index()))
    # without its twin (the cache off) that configuration is not weighed: with and without must differ by the cache
    alone = bumped[~((bumped.label == "FP8+x32") & (bumped.workload == "chat"))]
    assert "FP8+x32+pcache" not in set(_answer(alone).prefix_moves.label)
    assert len(_answer(df[df.workload == "plain"]).prefix_moves) == 0


def _target_knobs(extra: list[dict], max_configs: int = 400):
    from rich.console import Console

    from pareto_atlas.measure.model_card import model_card
    from pareto_atlas.simulate.stage import measured_workloads, target_spaces
    from pareto_atlas.simulate.targets import study_targets
    from pareto_atlas.spec.study import study_from_dict

    gpu = {"name": "llama-3.1-8b-instruct", "card": "llama-3.1-8b", "hardware": ["L4", "H100-SXM"]}
    raw = {
        "name": "x",
        "model": {"name": "smollm2-135m-instruct", "card": "smollm2-135m"},
        "workload": {"name": "p64-n8", "prompt_tokens": 64, "output_tokens": 8},
        "arms": [{"name": "a", "weights": "Q4_1"}],
        "simulate": {"hardware": ["L4", "H100-SXM"], "concurrency": [1, 8], "max_configs": max_configs},
        "targets": [{**gpu, "workloads": [{"name": "chat", "prompt_tokens": 512, "output_tokens": 64}]}] + extra,
    }
    st = study_from_dict(raw)
    hw = [shipped_hardware()[h] for h in ("L4", "H100-SXM")]
    targets = study_targets(st, model_card(st, None), hw, measured_workloads(st))
    return [sp.knobs for sp in target_spaces(st, targets, None, Console(quiet=True))]


def test_a_target_with_its_own_budget_leaves_the_others_thinned_as_before_and_pairs_the_cache():
    share = {"name": "agent", "prompt_tokens": 2048, "output_tokens": 64, "share": "agent-shared-preamble"}
    extra = {"name": "qwen2.5-7b-instruct", "card": "qwen2.5-7b", "hardware": ["H100-SXM"], "workloads": [share]}
    alone = _target_knobs([])
    both = _target_knobs([{**extra, "max_configs": 120}])
    assert both[0] == alone[0]  # the first target's thinned grid is the same configurations
    shared = both[1]
    on = {replace(k, prefix_cache=False) for k in shared if k.prefix_cache}
    off = {k for k in shared if not k.prefix_cache and k.eviction == "none" and k.decode_workers == 1}
    assert on and on == off  # thinned in pairs: every configuration with the cache has its twin without
    # without its own budget the new target takes a share of the study's, and the first target's grid shrinks
    assert len(_target_knobs([extra])[0]) < len(alone[0])


def _groups(n, warm=1):
    # two groups (288 of 384 tokens shared) alternating, token by token (llama.cpp reuses to the token)
    return shared_load(Sharing(prefix_tokens=288, groups=2), (), 384, 16, warm + n, 2, block=1)


def test_llamacpp_slots_reuse_their_own_last_sequence_chosen_by_similarity():
    from pareto_atlas.simulate.prefix_cache import slot_cached_tokens

    load = _groups(5)
    # both slots idle at every arrival: each request takes the slot holding its group's prefix; the first
    # scored one (group 1) finds only group 0's slot similar (no: 0 shared), so the empty one, and misses
    start = np.arange(5) * 10.0
    assert slot_cached_tokens(load, start, start + 1.0, 2, warmup=1).tolist() == [0, 288, 288, 288, 288]
    # one slot: the previous sequence is always the other group's, so nothing is reused (a pool of
    # blocks would hit every request after the first two)
    assert slot_cached_tokens(load, start, start + 1.0, 1, warmup=1).tolist() == [0] * 5
    assert (
        cached_tokens(shared_load(Sharing(prefix_tokens=288, groups=2), (), 384, 16, 6, 2), 1e6).tolist()[3:]
        == [288] * 3
    )


def test_llamacpp_a_request_that_finds_only_the_other_groups_slot_idle_misses():
    from pareto_atlas.simulate.prefix_cache import slot_cached_tokens

    load = _groups(4)
    # scored requests: g1 @0-1, g0 @0-5 (long), g1 @2-3, g0 @6: at t=2 only the slot of g1's first is
    # idle (g0's is busy until 5): a hit; a g0 request arriving while g0's slot is busy takes g1's and misses
    start = np.array([0.0, 0.0, 2.0, 3.5])
    end = np.array([1.0, 5.0, 3.0, 4.0])
    assert slot_cached_tokens(load, start, end, 2, warmup=1).tolist() == [0, 288, 288, 0]
    # with no slot idle a request waits for the first freed: a g1 request at 0.5 gets g1's slot at 1
    end2 = np.array([1.0, 5.0, 3.0, 9.0])
    start2 = np.array([0.0, 0.0, 0.5, 6.0])
    assert slot_cached_tokens(load, start2, end2, 2, warmup=1).tolist()[:3] == [0, 288, 288]
    # both slots idle: the similar one, not the least recently used (which holds the other prompt)
    a, b = (1, 2, 3), (7, 8, 9)
    same = _load([a, b, b], [48] * 3)
    assert slot_cached_tokens(same, np.array([0.0, 2.0]), np.array([1.0, 3.0]), 2, warmup=1).tolist() == [0, 47]
    with pytest.raises(ValueError, match="slot_cached_tokens: 3 starts"):
        slot_cached_tokens(load, start[:3], end, 2, warmup=1)
