"""The frontier: raw Pareto dominance, and dominance that respects error bars."""

from __future__ import annotations


import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pareto_atlas.atlas.frontier import frontier, pareto_mask, projection
from pareto_atlas.atlas.objectives import Objective
from synthetic import random_points, synthetic_points

OBJ = ("quality_rel", "tpot_p99_ms", "cost_per_mtok")


def table(rows: list[tuple[float, float, float, float, float]]) -> pd.DataFrame:
    """Rows of (quality, quality half-width, tpot, cost, relative error)."""
    q, h, tpot, cost, err = (np.array(c, dtype=float) for c in zip(*rows))
    return pd.DataFrame(
        {
            "point_id": [f"p{i}" for i in range(len(rows))],
            "label": [f"cfg{i}" for i in range(len(rows))],
            "workload": "w",
            "hardware": "hw",
            "quality": q,
            "quality_lo": q - h,
            "quality_hi": q + h,
            "quality_rel": q / 0.8,
            "tpot_p99_ms": tpot,
            "cost_per_mtok": cost,
            "lat_rel_err": err,
            "thr_rel_err": err,
            "feasible": True,
            "provenance": np.where(err == 0, "measured", "simulated"),
            "optimizations": "",
            "n_opts": 0,
        }
    )


def minimised(df: pd.DataFrame) -> np.ndarray:
    return np.column_stack([-df["quality_rel"], df["tpot_p99_ms"], df["cost_per_mtok"]]).astype(float)


def dominates(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.all(a <= b) and np.any(a < b))


# Small value sets so that ties and exact duplicates happen often.
row = st.tuples(
    st.sampled_from([0.0, 0.5, 0.7, 0.75, 0.8]),
    st.sampled_from([0.0, 0.02, 0.06]),
    st.sampled_from([5.0, 6.0, 8.0, 10.0, 20.0]),
    st.sampled_from([0.1, 0.2, 0.25, 0.5]),
    st.sampled_from([0.0, 0.05, 0.2]),
)


@settings(max_examples=80, deadline=None)
@given(st.lists(row, min_size=1, max_size=25))
def test_raw_frontier_is_exactly_the_non_dominated_set(rows):
    df = frontier(table(rows), OBJ)
    x = minimised(df)
    for i in range(len(df)):
        beaten = any(dominates(x[j], x[i]) for j in range(len(df)) if j != i)
        assert df["raw_frontier"][i] == (not beaten)


@settings(max_examples=80, deadline=None)
@given(st.lists(row, min_size=1, max_size=25))
def test_every_dominated_point_names_a_frontier_point_that_dominates_it(rows):
    df = frontier(table(rows), OBJ)
    x = minimised(df)
    pos = {pid: i for i, pid in enumerate(df["point_id"])}
    for i in np.flatnonzero(~df["raw_frontier"].to_numpy()):
        j = pos[df["dominated_by"][i]]
        assert df["raw_frontier"][j]
        assert dominates(x[j], x[i])


@settings(max_examples=80, deadline=None)
@given(st.lists(row, min_size=1, max_size=25))
def test_error_bar_dominance_is_never_stricter_than_raw(rows):
    df = frontier(table(rows), OBJ)
    raw = df["raw_frontier"].to_numpy()
    status = df["frontier_status"].to_numpy()
    assert np.all(status[raw] == "frontier")
    assert set(status[~raw]) <= {"tied", "dominated"}
    # A reported dominator beats the point beyond both error bars on every axis where they differ.
    pos = {pid: i for i, pid in enumerate(df["point_id"])}
    x = minimised(df)
    for i in np.flatnonzero(status == "dominated"):
        j = pos[df["robust_dominated_by"][i]]
        assert dominates(x[j], x[i])
        qa_lo, qb_hi = df["quality_lo"][j], df["quality_hi"][i]
        if df["quality_rel"][j] != df["quality_rel"][i]:
            assert qa_lo > qb_hi
        if df["tpot_p99_ms"][j] != df["tpot_p99_ms"][i]:
            assert df["tpot_p99_ms"][j] * (1 + df["lat_rel_err"][j]) < df["tpot_p99_ms"][i] * (1 - df["lat_rel_err"][i])


@settings(max_examples=40, deadline=None)
@given(st.lists(row.map(lambda r: (r[0], 0.0, r[2], r[3], 0.0)), min_size=1, max_size=25))
def test_without_error_bars_nothing_is_tied(rows):
    df = frontier(table(rows), OBJ)
    assert "tied" not in set(df["frontier_status"])
    assert (df["raw_frontier"] == (df["frontier_status"] == "frontier")).all()


def test_points_inside_each_others_error_bars_are_tied_not_dominated():
    # b is slower and dearer than a, but only by 2 % against a 5 % calibrated error bar.
    df = frontier(table([(0.8, 0.0, 10.0, 0.50, 0.05), (0.8, 0.0, 10.2, 0.51, 0.05), (0.8, 0.0, 20.0, 1.0, 0.05)]), OBJ)
    assert list(df["frontier_status"]) == ["frontier", "tied", "dominated"]
    assert df["dominated_by"][1] == "p0" and df["robust_dominated_by"][2] == "p0"


def test_pareto_mask_matches_brute_force_and_keeps_duplicates():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 4, size=(300, 3)).astype(float)
    m = pareto_mask(x)
    brute = np.array([not any(dominates(x[j], x[i]) for j in range(len(x))) for i in range(len(x))])
    assert (m == brute).all()
    assert pareto_mask(np.array([[1.0, 1.0], [1.0, 1.0]])).all()


def test_infeasible_and_missing_points_are_excluded_not_dropped():
    df = table([(0.8, 0.0, 5.0, 0.1, 0.0), (0.8, 0.0, 1.0, 0.01, 0.0), (0.8, 0.0, float("nan"), 0.5, 0.0)])
    df.loc[1, "feasible"] = False
    out = frontier(df, OBJ)
    assert len(out) == 3
    assert list(out["frontier_status"]) == ["frontier", "excluded", "excluded"]
    assert list(out["excluded_reason"]) == ["", "infeasible", "missing objective"]


def test_frontier_is_computed_per_group():
    df = pd.concat(
        [table([(0.8, 0.0, 5.0, 0.1, 0.0)]), table([(0.8, 0.0, 9.0, 0.9, 0.0)]).assign(workload="w2", point_id="q0")]
    )
    assert frontier(df, OBJ)["raw_frontier"].all()
    assert frontier(df, OBJ, by=())["raw_frontier"].sum() == 1


def test_projection_and_objective_parsing():
    pts = synthetic_points()
    two = projection(pts, "tpot_p99_ms", "quality_rel", by=())
    three = frontier(pts, OBJ, by=())
    # Adding an axis can only add frontier points.
    assert set(two.loc[two["raw_frontier"], "point_id"]) <= set(three.loc[three["raw_frontier"], "point_id"])
    assert Objective.parse("ttft_p50_ms").direction == "min"
    assert Objective.parse("throughput_tok_s").direction == "max"
    with pytest.raises(ValueError, match="allowed: .*tpot_p99_ms"):
        Objective.parse("tpot_p99")
    with pytest.raises(ValueError, match="direction 'up'"):
        Objective.parse("tpot_p99_ms:up")


def test_hundred_thousand_points_get_a_status_each():
    # Its speed is a benchmark (benchmarks/bench_pick.py), not a timed test.
    pts = random_points(100_000, seed=1)
    out = frontier(pts, OBJ)
    assert out["raw_frontier"].sum() >= 1 and out["frontier_status"].notna().all()


def test_an_error_bar_never_takes_a_latency_or_throughput_below_zero():
    from pareto_atlas.atlas.objectives import interval

    pts = pd.DataFrame(
        {
            "tpot_p99_ms": [10.0, 10.0, 10.0],
            "lat_rel_err": [0.0, 0.2, 1.5],
            "throughput_tok_s": [100.0] * 3,
            "cost_per_mtok": [2.0] * 3,
            "thr_rel_err": [0.0, 0.25, 2.0],
        }
    )
    lo, hi = interval(pts, "tpot_p99_ms")
    np.testing.assert_allclose(lo, [10.0, 8.0, 0.0])  # ±150 %: bounded below by 0, not -5
    np.testing.assert_allclose(hi, [10.0, 12.0, 25.0])
    lo, hi = interval(pts, "throughput_tok_s")
    np.testing.assert_allclose(lo, [100.0, 75.0, 0.0])
    np.testing.assert_allclose(hi, [100.0, 125.0, 300.0])
    lo, hi = interval(pts, "cost_per_mtok")  # price / throughput's bounds
    np.testing.assert_allclose(lo, [2.0, 2.0 / 1.25, 2.0 / 1.99])
    np.testing.assert_allclose(hi, [2.0, 2.0 / 0.75, 2.0 / 0.01])


@settings(max_examples=150, deadline=None)
@given(
    st.lists(row, min_size=1, max_size=40),
    st.sampled_from(
        [("tpot_p99_ms", "quality_rel"), ("cost_per_mtok", "quality_rel"), ("cost_per_mtok", "tpot_p99_ms")]
    ),
)
def test_a_figures_fast_statuses_equal_the_full_frontiers(rows, axes):
    # the figures ask for statuses only (dominators=False: a sorted lookup instead of targets x
    # candidates on two axes); every point's status must be the one the full computation gives,
    # ties on an axis (equal inherited quality) included
    full = projection(table(rows), *axes, by=())
    fast = projection(table(rows), *axes, by=(), dominators=False)
    assert list(fast["frontier_status"]) == list(full["frontier_status"])
    assert list(fast["dominated_by"]) == list(full["dominated_by"])


def test_the_fast_statuses_hold_on_a_large_table_with_wide_error_bars():
    rng = np.random.default_rng(3)
    n = 3000
    q = rng.choice([0.6, 0.7, 0.75, 0.8], n)  # few quality values: many exact ties
    rows = list(
        zip(
            q,
            rng.choice([0.0, 0.03], n),
            rng.lognormal(3, 0.6, n),
            rng.lognormal(-1, 0.8, n),
            rng.choice([0.05, 0.2, 0.6], n),
        )
    )
    for axes in (("tpot_p99_ms", "quality_rel"), ("cost_per_mtok", "quality_rel")):
        full = projection(table(rows), *axes, by=())
        fast = projection(table(rows), *axes, by=(), dominators=False)
        assert (full["frontier_status"] == "dominated").sum() > 100 and (full["frontier_status"] == "tied").sum() > 30
        assert list(fast["frontier_status"]) == list(full["frontier_status"])
