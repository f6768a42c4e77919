"""Sweeps produce the points-table columns over a compatible space."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from pareto_atlas.simulate.space import Load, Workload, compatible, default_space
from pareto_atlas.simulate.sweep import sweep
from pareto_atlas.spec.cards import HardwareCard, shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs

CPU = HardwareCard("this-cpu", "cpu", 20.0, {"fp32": 0.1}, 24.0, price_per_hour=0.05, price_date="2026-11")


def test_compatibility_rules():
    assert compatible(Knobs(weights="FP8"), CPU)
    assert not compatible(Knobs(weights="Q4_K_M", kv="q8_0"), CPU)
    assert compatible(Knobs(weights="Q4_0"), shipped_hardware()["H100-SXM"])
    assert compatible(Knobs(batching="disagg"), CPU)


def test_small_sweep_has_contract_columns_and_sane_values():
    m = shipped_models()["qwen2.5-0.5b"]
    sp = default_space(m, [CPU, shipped_hardware()["L4"]], [Workload("w", 128, 32)], [Load(concurrency=2)])
    sp = replace(sp, knobs=sp.knobs[::40])
    df = sweep(sp, n_requests=20)
    assert len(df) == sp.size() > 0
    for col in (
        "point_id",
        "label",
        "hardware",
        "workload",
        "concurrency",
        "rate_rps",
        "weights",
        "kv",
        "optimizations",
        "n_opts",
        "provenance",
        "ttft_p50_ms",
        "tpot_p99_ms",
        "e2e_p99_ms",
        "throughput_tok_s",
        "goodput_rps",
        "mem_gb",
        "lat_rel_err",
        "thr_rel_err",
        "feasible",
        "infeasible_reason",
        "cost_per_mtok",
    ):
        assert col in df.columns, col
    ok = df[df.feasible]
    assert (ok.tpot_p99_ms >= ok.tpot_p50_ms).all() and (ok.throughput_tok_s > 0).all()
    assert df.point_id.is_unique
    assert not ((df.hardware == "this-cpu") & (df.weights == "FP8")).any()
    assert np.isfinite(ok.cost_per_mtok).all()


def test_closed_loops_of_several_clients_pause_as_the_anchors_do():
    from pareto_atlas.simulate import des
    from pareto_atlas.simulate.cost_model import coeffs
    from pareto_atlas.simulate.kernels import prefill_pairs, step_time
    from pareto_atlas.simulate.params import default_params
    from pareto_atlas.spec.think import think_times

    m = shipped_models()["qwen2.5-0.5b"]
    k = Knobs(weights="Q4_0", slots=2)
    loads = [
        Load(concurrency=2, think="auto"),
        Load(concurrency=2),
        Load(concurrency=2, think=0.5),
        Load(concurrency=1, think="auto"),
    ]
    sp = replace(default_space(m, [CPU], [Workload("w", 128, 32)], loads), knobs=(k,))
    df = sweep(sp, n_requests=40, seed=7)
    c = coeffs(m, CPU, k, default_params(CPU))
    lone = step_time(c, 0.0, 0.0, 128.0, prefill_pairs(128.0, 0.0), 0.0, 1.0)
    # "auto": each client's mean pause is one lone prefill, the load generator's seed-0 draws
    for j, think in enumerate([think_times(lone, 40), None, think_times(0.5, 40), None]):
        want = des.run(c, des.closed_loop(loads[j].concurrency, 40, 128, 32, think), "continuous", 2, seed=7 + j)
        assert (
            df.ttft_p50_ms.iloc[j] == want.summary["ttft_p50_ms"]
            and df.tpot_p99_ms.iloc[j] == want.summary["tpot_p99_ms"]
        )
    assert df.ttft_p50_ms.iloc[0] != df.ttft_p50_ms.iloc[1] and df.ttft_p50_ms.iloc[2] != df.ttft_p50_ms.iloc[1]
    assert Load(concurrency=1, think="auto").think_code == 0.0 and Load(concurrency=3, think=0.2).think_code == 0.2
    for bad in (-1.0, "soon"):
        try:
            Load(concurrency=2, think=bad)
        except ValueError as e:
            assert "think" in str(e)
        else:
            raise AssertionError(f"think={bad!r} accepted")


def test_one_point_and_the_sweep_agree_on_think_times():
    from pareto_atlas.simulate.api import simulate_point

    m = shipped_models()["qwen2.5-0.5b"]
    k = Knobs(weights="Q4_0", slots=2)
    sp = replace(default_space(m, [CPU], [Workload("w", 128, 32)], [Load(concurrency=3, think="auto")]), knobs=(k,))
    row = sweep(sp, n_requests=30).iloc[0]
    one = simulate_point(m, CPU, k, 128, 32, concurrency=3, n_requests=30, think="auto")
    assert one["ttft_p50_ms"] == row.ttft_p50_ms and one["throughput_tok_s"] == row.throughput_tok_s
    assert simulate_point(m, CPU, k, 128, 32, concurrency=3, n_requests=30)["ttft_p50_ms"] != row.ttft_p50_ms


def test_a_draft_models_acceptance_is_measured_or_a_prior_never_typed_in():
    import pandas as pd
    from rich.console import Console

    from pareto_atlas.simulate.api import resolve_acceptance
    from pareto_atlas.simulate.stage import measured_acceptance, with_measured_acceptance

    m = shipped_models()["qwen2.5-0.5b"]
    sp = default_space(m, [shipped_hardware()["H200"]], [Workload("w", 128, 32)], [Load(concurrency=8)])
    drafts = [k for k in sp.knobs if k.spec == "draft"]
    assert drafts and all(k.spec_accept == 0 for k in drafts)  # the grid states none
    acc, label = resolve_acceptance(drafts[0])
    assert 0 < acc < 1 and "leviathan2022fast" in label
    df = sweep(replace(sp, knobs=tuple(drafts[:3]) + tuple(k for k in sp.knobs if k.spec == "none")[:3]), n_requests=20)
    assert (df[df.spec == "draft"].provenance == "prior").all() and (
        df[df.spec == "none"].provenance == "simulated"
    ).all()
    # an anchor that drafted with a draft model: its acceptance replaces the prior everywhere; n-gram's
    # (which drafts only where text repeats) does not carry
    anchors = pd.DataFrame(
        [
            dict(spec="draft", spec_accept_measured=0.71, spec_drafted_per_token=2.0),
            dict(spec="ngram", spec_accept_measured=0.5, spec_drafted_per_token=0.1),
            dict(spec="draft", spec_accept_measured=0.69, spec_drafted_per_token=0.0),
        ]
    )
    assert measured_acceptance(anchors) == {"draft": 0.71}
    # with several targets: a target's own draft anchors where it has them, else every target's
    sizes = pd.DataFrame(
        [
            dict(spec="draft", spec_accept_measured=0.78, spec_drafted_per_token=2.0, model="big"),
            dict(spec="draft", spec_accept_measured=0.60, spec_drafted_per_token=2.0, model="mid"),
        ]
    )
    assert measured_acceptance(sizes, "big") == {"draft": 0.78} and measured_acceptance(sizes, "mid") == {"draft": 0.6}
    assert measured_acceptance(sizes, "small") == {"draft": 0.69} == measured_acceptance(sizes)
    sp2 = with_measured_acceptance(sp, anchors, Console(quiet=True))
    assert {k.spec_accept for k in sp2.knobs if k.spec == "draft"} == {0.71}
    df2 = sweep(replace(sp2, knobs=tuple(k for k in sp2.knobs if k.spec == "draft")[:3]), n_requests=20)
    assert (df2.provenance == "simulated").all()


def test_thinning_keeps_the_arms_then_every_knob_an_arm_measured_the_tokens_of_then_fills_at_random():
    from pareto_atlas.simulate.stage import thinned

    arms = [Knobs(weights="Q4_K_M"), Knobs(weights="F16", slots=2)]
    grid = [
        Knobs(weights=w, kv=kv, slots=s, batching=b)
        for w in ("F16", "Q4_K_M", "Q8_0")
        for kv in ("f16", "q8_0")
        for s in (1, 2, 4, 8)
        for b in ("continuous", "chunked")
    ]
    knobs = list(dict.fromkeys(arms + grid))
    cost = {k: 12 if k.weights == "F16" else 2 for k in knobs}  # F16 runs on five GPU cards too
    cost[Knobs(weights="Q8_0", kv="q8_0", slots=8, batching="chunked")] = 0  # runs nowhere: never kept
    evidenced = [k for k in knobs if k.quality_key() in {a.quality_key() for a in arms} and k not in arms]
    need = sum(cost[k] for k in arms + evidenced)
    for budget in (need, need + 20, 10**6):
        kept = thinned(knobs, arms, cost, budget)
        assert kept == [k for k in knobs if k in set(kept)]  # the grid's order
        assert set(arms + evidenced) <= set(kept)  # every one that can win
        assert sum(cost[k] for k in kept) <= budget
        assert Knobs(weights="Q8_0", kv="q8_0", slots=8, batching="chunked") not in kept
        assert kept == thinned(knobs, arms, cost, budget)  # seeded
    assert set(thinned(knobs, arms, cost, need)) == set(arms + evidenced)
    rest = set(thinned(knobs, arms, cost, need + 20)) - set(arms + evidenced)
    assert rest and sum(cost[k] for k in rest) <= 20
    # the arms stay even past the budget; nothing else is added then
    assert thinned(knobs, arms, cost, 1) == [k for k in knobs if k in set(arms)]


def test_the_full_study_simulates_every_gpu_knob_whose_tokens_an_arm_measured():
    # (the default measures no token format a GPU knob shares: its GPU rows answer for the 7B target,
    # on published evidence; the full study's F16 arm is the one that reaches the GPU grid)
    from pareto_atlas.simulate.space import default_knobs
    from pareto_atlas.simulate.stage import study_space
    from pareto_atlas.spec.study import load_study

    study = load_study("full")
    gpus = [h for h in shipped_hardware().values() if h.kind == "gpu"]
    space = study_space(study, [CPU] + gpus, shipped_models()["qwen2.5-0.5b"])
    measured = {a.knobs().quality_key() for a in study.arms}
    can_win = [k for k in default_knobs("gpu") if k.quality_key() in measured]
    assert Knobs(weights="F16", batching="chunked", chunk_tokens=256, slots=128) in can_win
    assert set(can_win) <= set(space.knobs)
    assert space.size() <= study.simulate.max_configs


def test_a_utilization_load_is_poisson_at_that_share_of_each_configurations_own_capacity():
    import pytest

    from pareto_atlas.simulate.params import CalibParams

    with pytest.raises(ValueError, match="utilization"):
        Load(utilization=1.5)
    with pytest.raises(ValueError, match="exactly one of"):
        Load(concurrency=2, utilization=0.5)
    m = shipped_models()["qwen2.5-0.5b"]
    cards = [CPU, shipped_hardware()["L4"]]
    knobs = [Knobs(weights="F16", slots=s) for s in (1, 4)] + [
        Knobs(weights="Q4_0", slots=4, batching="chunked", chunk_tokens=256)
    ]
    params = {h.name: CalibParams(step_cv=0.0) for h in cards}
    sp = replace(
        default_space(m, cards, [Workload("w", 128, 32)], [Load(utilization=0.5), Load(utilization=0.8)]),
        knobs=tuple(knobs),
    )
    df = sweep(sp, params, n_requests=60)
    assert len(df) == sp.size() and (df.concurrency == 0).all() and df.utilization.isin([0.5, 0.8]).all()
    # the rate is that share of what a closed loop of as many clients as slots completes per second
    for k in knobs:
        full = sweep(replace(sp, knobs=(k,), loads=(Load(concurrency=k.slots),)), params, n_requests=60)
        for h in full.hardware:
            cap = full.loc[full.hardware == h, "throughput_tok_s"].iloc[0] / 32
            got = df[(df.label == k.label()) & (df.hardware == h)].set_index("utilization").rate_rps
            assert got[0.5] == pytest.approx(0.5 * cap, rel=1e-9) and got[0.8] == pytest.approx(0.8 * cap, rel=1e-9)
    # an L4 is loaded at its own scale, not the CPU's
    l4, cpu = (df[(df.hardware == h) & (df.utilization == 0.5)].rate_rps.min() for h in ("L4", "this-cpu"))
    assert l4 > 10 * cpu
    # heavier load, longer queues: time to first token grows from half to 80 % of capacity
    ttft = df.pivot_table(index=["label", "hardware"], columns="utilization", values="ttft_p99_ms")
    assert (ttft[0.8] >= ttft[0.5]).mean() >= 0.75
    # a point's id names its utilization, not the rate the calibration gave it
    assert df.point_id.is_unique
    again = sweep(sp, {h.name: CalibParams(step_cv=0.0, eff_bw=0.5) for h in cards}, n_requests=60)
    assert list(again.point_id) == list(df.point_id) and not np.allclose(again.rate_rps, df.rate_rps)
