"""Regimes, quality guards, winners, boundary cases, and what recurs on the frontier."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pareto_atlas.atlas.constraints import ConstraintError
from pareto_atlas.atlas.frontier import frontier
from pareto_atlas.atlas.regimes import Regime, admission, default_regimes, regimes_from_study
from pareto_atlas.atlas.summary import frontier_frequency, stacked_vs_single
from synthetic import synthetic_points
from pareto_atlas.atlas.winners import boundary_cases, winners

BASE_Q = 0.765


def cfg(pid, label, opts, *, q, half=0.03, tpot, thr, hw="A100", price=1.39, prov="measured", ttft=None):
    return {
        "point_id": pid,
        "label": label,
        "hardware": hw,
        "workload": "chat",
        "optimizations": "+".join(opts),
        "n_opts": len(opts),
        "provenance": prov,
        "quality_provenance": "measured",
        "quality": q,
        "quality_lo": max(0.0, q - half),
        "quality_hi": min(1.0, q + half),
        "quality_rel": q / BASE_Q,
        "tpot_p99_ms": tpot,
        "ttft_p99_ms": ttft if ttft is not None else 10 * tpot,
        "throughput_tok_s": thr,
        "price_per_hour": price,
        "price_date": "2026-07",
        "cost_per_mtok": price / (thr * 3600) * 1e6,
        "lat_rel_err": 0.0,
        "thr_rel_err": 0.0,
        "feasible": True,
    }


def seed_paper_like() -> pd.DataFrame:
    """FP16 baseline, FP8 weights, AWQ just under the floor, a naive FP8 KV cache at 0/200, and a stack."""
    return pd.DataFrame(
        [
            cfg("fp16", "FP16", [], q=0.765, tpot=40.0, thr=800),
            cfg("fp8w", "FP8", ["weight-quant"], q=0.760, tpot=25.0, thr=1300),
            cfg("awq", "AWQ4", ["weight-quant"], q=0.720, half=0.06, tpot=14.0, thr=2300),
            cfg("fp8kv", "FP8-KV", ["kv-quant"], q=0.0, half=0.0, tpot=13.0, thr=2400),
            cfg("stack", "FP8+batch+sparse", ["weight-quant", "batching", "sparse-attn"], q=0.757, tpot=22.0, thr=2000),
        ]
    )


def test_zero_quality_fast_point_is_on_the_raw_frontier_but_wins_no_regime():
    pts = seed_paper_like()
    marked = frontier(pts)
    assert marked.set_index("point_id").loc["fp8kv", "raw_frontier"]
    regs = default_regimes(pts, ttft_p99_ms=1000, tpot_p99_ms=30, cost_cap_per_mtok=1.0)
    cells = winners(pts, regs)
    assert "fp8kv" not in set(cells["point_id"])
    assert cells["point_id"].ne("").all()


def test_awq_like_point_inside_the_sampling_error_is_a_boundary_case_on_record():
    pts = seed_paper_like()
    regs = default_regimes(pts, ttft_p99_ms=1000, tpot_p99_ms=30, cost_cap_per_mtok=1.0)
    cells = winners(pts, regs)
    b = boundary_cases(pts, regs, cells)
    awq = b[b["point_id"] == "awq"].set_index("regime")
    assert not awq["admitted"].any()  # 0.941 < 0.95 on the point estimate
    assert awq.loc["low-cost", "effect"] == "would win if admitted"
    assert (awq["quality_rel_lo"] < 0.95).all() and (awq["quality_rel_hi"] >= 0.95).all()
    low = cells[(cells["regime"] == "low-cost") & (cells["hardware"] == "all")].iloc[0]
    assert low["point_id"] == "stack" and low["n_boundary"] >= 1


def test_point_estimate_above_floor_with_straddling_interval_is_a_boundary_case_not_a_winner():
    pts = seed_paper_like()
    pts.loc[pts["point_id"] == "awq", ["quality", "quality_rel"]] = [0.735, 0.735 / BASE_Q]
    r = Regime("cheap", "cost_per_mtok")
    a = admission(pts, r).set_index(pts["point_id"])
    # the guard decides on the interval: 0.961 on the point estimate, but [0.88, 1.04] straddles 0.95
    assert not a.loc["awq", "admitted"] and a.loc["awq", "boundary"] and a.loc["awq", "guard"] == "boundary"
    assert a.loc["fp8w", "admitted"] and a.loc["fp8w", "guard"] == "in"  # [0.954, 1.03]: clearly in
    b = boundary_cases(pts, [r])
    assert b.set_index("point_id").loc["awq", "effect"] == "would win if admitted"


def test_stack_that_beats_every_single_is_boxed():
    pts = seed_paper_like()
    cells = winners(pts, [Regime("cheap", "cost_per_mtok")]).set_index("hardware")
    assert cells.loc["all", "point_id"] == "stack" and cells.loc["all", "stack_beats_singles"]
    assert cells.loc["all", "best_single_label"] == "FP8"
    # When a single method wins, the cell is not boxed.
    fast = winners(pts, [Regime("fast", "tpot_p99_ms")]).set_index("hardware")
    assert fast.loc["all", "point_id"] == "stack" and fast.loc["all", "stack_beats_singles"]
    pts2 = pts[pts["point_id"] != "stack"]
    assert not winners(pts2, [Regime("cheap", "cost_per_mtok")])["stack_beats_singles"].any()


finite = st.floats(min_value=0.05, max_value=100.0, allow_nan=False)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), finite, finite, st.floats(0.5, 1.0), finite)
def test_regime_winners_satisfy_constraints_and_quality_guard(seed, ttft_cap, tpot_cap, floor, cost_cap):
    pts = synthetic_points(seed=seed)
    rng = np.random.default_rng(seed)
    pts["tpot_p99_ms"] *= rng.uniform(0.2, 5, len(pts))
    pts["ttft_p99_ms"] *= rng.uniform(0.2, 5, len(pts))
    pts.loc[rng.random(len(pts)) < 0.1, "feasible"] = False
    regs = default_regimes(
        pts, ttft_p99_ms=ttft_cap * 10, tpot_p99_ms=tpot_cap, cost_cap_per_mtok=cost_cap, quality_floor=floor
    )
    cells = winners(pts, regs)
    by_id = pts.set_index("point_id")
    for c in cells.itertuples(index=False):
        if not c.point_id:
            continue
        p = by_id.loc[c.point_id]
        r = next(r for r in regs if r.name == c.regime)
        assert p["feasible"] and p["quality_rel"] >= floor
        assert all(con.mask(p.to_frame().T.reset_index()).all() for con in r.constraints)
        if c.hardware != "all":
            assert p["hardware"] == c.hardware
        # No admitted point in the cell beats the winner on the objective.
        cell = pts[(pts["hardware"] == c.hardware) | (c.hardware == "all")]
        adm = admission(cell, r)["admitted"].to_numpy()
        best = cell.loc[adm, r.objective].min() if r.direction == "min" else cell.loc[adm, r.objective].max()
        assert c.value == best


def test_regime_from_study_dict_and_its_errors():
    r = Regime.from_dict(
        {
            "name": "chat-slo",
            "objective": "cost_per_mtok",
            "constraints": {"tpot_p99_ms": ["<=", 40], "ttft_p99_ms": ["<=", 800]},
            "quality_floor": 0.97,
        }
    )
    assert r.direction == "min" and r.quality_floor == 0.97
    assert [str(c) for c in r.constraints] == ["tpot_p99_ms<=40", "ttft_p99_ms<=800"]
    assert "quality_rel>=0.97" in r.describe()
    assert (
        Regime.from_dict({"name": "x", "objective": "throughput_tok_s", "constraints": "mem_gb<=24"}).direction == "max"
    )
    with pytest.raises(ValueError, match="unknown key 'objectve'"):
        Regime.from_dict({"name": "x", "objectve": "cost_per_mtok"})
    with pytest.raises(ConstraintError, match="bad operator '=<'"):
        Regime.from_dict({"name": "x", "objective": "cost_per_mtok", "constraints": {"tpot_p99_ms": ["=<", 4]}})
    with pytest.raises(ConstraintError, match="tpot_p99: unknown column"):
        Regime.from_dict({"name": "x", "objective": "cost_per_mtok", "constraints": {"tpot_p99": ["<=", 4]}})
    with pytest.raises(ValueError, match="objective: 'speed' is not an objective column"):
        Regime.from_dict({"name": "x", "objective": "speed"})
    with pytest.raises(ValueError, match="used twice"):
        regimes_from_study([{"name": "a", "objective": "cost_per_mtok"}] * 2)
    assert [r.name for r in regimes_from_study(None, synthetic_points())] == [
        "tight-latency",
        "high-throughput",
        "low-cost",
        "quality-floor",
    ]


def test_auto_thresholds_bind_on_the_study_scale():
    pts = synthetic_points()
    tight = default_regimes(pts)[0]
    assert tight.thresholds_auto
    adm = admission(pts, tight)
    assert 0 < adm["admitted"].sum() < len(pts)


def test_frequency_and_stacked_vs_single_count_the_frontier():
    marked = frontier(seed_paper_like())
    on = set(marked.loc[marked["raw_frontier"], "point_id"])
    freq = frontier_frequency(marked).set_index("optimization")
    expect_wq = sum(1 for pid in on if pid in ("fp8w", "awq", "stack"))
    assert freq.loc["weight-quant", "on_frontier"] == expect_wq
    assert freq.loc["weight-quant", "configs"] == 3
    svs = stacked_vs_single(marked).set_index("kind")
    assert svs.loc["stacked", "total"] == 1 and svs.loc["single", "total"] == 3
    assert svs["on_frontier"].sum() == len(on)


def test_high_throughput_is_per_device_so_two_disaggregated_pools_do_not_win_on_their_sum():
    pts = synthetic_points(seed=0)
    pts = pts[(pts["hardware"] == pts["hardware"].iloc[0]) & (pts["workload"] == pts["workload"].iloc[0])]
    best = pts.loc[pts["quality_rel"] >= 0.99].sort_values("throughput_tok_s").iloc[-1]
    disagg = best.copy()
    disagg["point_id"], disagg["batching"], disagg["label"] = "disagg-1", "disagg", best["label"] + "+disagg"
    disagg["throughput_tok_s"] = best["throughput_tok_s"] * 1.5  # more in total, on two devices
    rows = pd.DataFrame([disagg]).drop(columns=["n_devices", "throughput_per_device_tok_s"])
    with_it = pd.concat([pts.drop(columns=["n_devices", "throughput_per_device_tok_s"]), rows], ignore_index=True)
    with_it["n_devices"] = np.where(with_it["batching"] == "disagg", 2, 1)
    reg = next(r for r in default_regimes(with_it) if r.name == "high-throughput")
    assert reg.objective == "throughput_per_device_tok_s"
    cell = winners(with_it, [reg], per_hardware=False)
    assert cell.iloc[0]["point_id"] != "disagg-1"  # 0.75x per device
    # a table without the column derives it: two devices for disaggregation, one for the rest
    no_col = with_it.drop(columns=["n_devices"])
    assert winners(no_col, [reg], per_hardware=False).iloc[0]["point_id"] == cell.iloc[0]["point_id"]
    # and the objective can still be the total, where a study asks for it
    total = Regime("total", "throughput_tok_s", "max", (), reg.quality_floor)
    assert winners(with_it, [total], per_hardware=False).iloc[0]["point_id"] == "disagg-1"
