"""Re-planning without re-measuring: constraints, price changes, new hardware, speed."""

from __future__ import annotations


import numpy as np
import pytest

from pareto_atlas.atlas.constraints import ConstraintError, parse_constraints
from pareto_atlas.atlas.pick import pick, reprice
from synthetic import random_points, synthetic_points


def test_a_price_change_moves_the_low_cost_winner_without_remeasuring():
    pts = synthetic_points()
    before = pick(pts, "tpot_p99_ms<=1000", "cost_per_mtok")
    hw = before.winner["hardware"]
    after = pick(pts, "tpot_p99_ms<=1000", "cost_per_mtok", prices={hw: 50.0}, price_date="2026-08")
    assert after.winner["hardware"] != hw
    assert after.repriced == {hw: 50.0}
    # Nothing measured changed: same points, same throughput.
    assert after.n_points == before.n_points


def test_repricing_derives_cost_from_throughput_not_by_scaling():
    pts = synthetic_points()
    pts["cost_per_mtok"] = 123.0  # a stale, wrong cost must not leak through
    out = reprice(pts, {"L4": 0.5}, "2026-08")
    l4 = out["hardware"] == "L4"
    assert np.allclose(out.loc[l4, "cost_per_mtok"], 0.5 / (out.loc[l4, "throughput_tok_s"] * 3600) * 1e6)
    assert (out.loc[l4, "price_date"] == "2026-08").all()
    assert np.allclose(
        out.loc[~l4, "cost_per_mtok"], out.loc[~l4, "price_per_hour"] / (out.loc[~l4, "throughput_tok_s"] * 3600) * 1e6
    )
    with pytest.raises(ValueError, match="no such hardware.*known: A100-80G-PCIe, H100-PCIe, L4"):
        reprice(pts, {"B200": 5.0})


def test_pick_respects_constraints_guard_and_ranking():
    pts = synthetic_points()
    r = pick(pts, "tpot_p99_ms<=6, ttft_p99_ms<100 and hardware!=L4", "throughput_tok_s", top=4)
    rows = [r.winner, *r.runners_up.to_dict("records")]
    assert r.direction == "max" and len(rows) == 4
    for row in rows:
        assert row["tpot_p99_ms"] <= 6 and row["hardware"] != "L4" and row["quality_rel"] >= 0.95
        assert pts.set_index("point_id").loc[row["point_id"], "quality_rel_lo"] >= 0.95  # the interval decides
    vals = [row["throughput_tok_s"] for row in rows]
    assert vals == sorted(vals, reverse=True)
    assert (
        r.winner["throughput_tok_s"]
        == pts[
            (pts["tpot_p99_ms"] <= 6)
            & (pts["ttft_p99_ms"] < 100)
            & (pts["hardware"] != "L4")
            & (pts["quality_rel_lo"] >= 0.95)
        ]["throughput_tok_s"].max()
    )
    # Switching the guard off admits the fast zero-quality configurations.
    off = pick(pts, "tpot_p99_ms<=6", "tpot_p99_ms", quality_floor=None)
    assert off.winner["quality_rel"] == 0.0
    assert pick(pts, "tpot_p99_ms<=6", "tpot_p99_ms").winner["quality_rel"] >= 0.95
    assert "winner:" in r.summary()


def test_stated_quality_floor_replaces_the_default_and_boundary_cases_come_back():
    pts = synthetic_points()
    r = pick(pts, "quality_rel>=94%", "cost_per_mtok")
    assert r.quality_floor == pytest.approx(0.94)
    assert r.winner["quality_rel"] >= 0.94
    # 0.9288 .. 0.96 with a paired half-width of 0.02 straddle 0.94: on record, never admitted
    assert (
        len(r.boundary) > 0
        and not r.boundary["admitted"].any()
        and {"admitted", "quality_rel_lo", "quality_rel_hi"} <= set(r.boundary.columns)
    )


def test_no_admissible_point_is_an_answer_not_an_error():
    r = pick(synthetic_points(), "tpot_p99_ms<=0.001", "cost_per_mtok")
    assert r.winner is None and r.n_candidates == 0
    assert "no configuration satisfies" in r.summary()


def test_an_empty_answer_says_why_and_still_lists_what_rests_on_priors():
    """No point with evidence qualifies (every speed a prior here, one card infeasible): the answer counts
    what kept the points out and lists the projected ones with the command that would confirm them,
    instead of a bare "no configuration satisfies the constraints"."""
    pts = synthetic_points().assign(provenance="prior")
    pts.loc[pts["hardware"] == "L4", "feasible"] = False
    r = pick(pts, "tpot_p99_ms<=1000", "cost_per_mtok")
    assert r.winner is None and len(r.projected) > 0
    n_l4 = int((pts["hardware"] == "L4").sum())
    text = r.summary()
    assert f"no configuration satisfies the constraints (of {len(pts)}: " in text
    assert f"{n_l4} infeasible" in text and "rests on priors (projected)" in text
    assert "projected — measure to confirm" in text and "confirm: " in text


def test_extra_hardware_rows_join_the_choice():
    pts = synthetic_points()
    new = pts[pts["hardware"] == "L4"].assign(
        hardware="L40S", price_per_hour=0.01, point_id=lambda d: d["point_id"] + "-l40s"
    )
    r = pick(pts, None, "cost_per_mtok", extra_hardware=new, prices={"L40S": 0.01})
    assert r.winner["hardware"] == "L40S"


@pytest.mark.parametrize(
    "text, message",
    [
        ("tpot_p99<=40", "unknown column 'tpot_p99'; allowed: .*tpot_p99_ms"),
        ("tpot_p99_ms=>40", "bad operator '=>'; allowed: <=, <, >=, >, ==, !="),
        ("tpot_p99_ms 40", "missing operator"),
        ("tpot_p99_ms<=fast", "value 'fast' is not a number"),
        ("hardware<L4", "text column takes == or !="),
        ("tpot_p99_ms<=", "value '' is not a number"),
    ],
)
def test_constraint_parser_errors_name_the_bad_token(text, message):
    with pytest.raises(ConstraintError, match=message) as e:
        parse_constraints(text)
    assert "\n" not in str(e.value)


def test_constraint_parser_reads_percent_and_lists():
    cons = parse_constraints("quality_rel>=95%, tpot_p99_ms<=40 and hardware==A100-80G-PCIe")
    assert [(c.column, c.op, c.value) for c in cons] == [
        ("quality_rel", ">=", 0.95),
        ("tpot_p99_ms", "<=", 40.0),
        ("hardware", "==", "A100-80G-PCIe"),
    ]
    assert parse_constraints(["cost_per_mtok<1"])[0].value == 1.0
    with pytest.raises(ConstraintError, match="objective 'speed'"):
        pick(synthetic_points(), None, "speed")


def test_pick_on_100k_points_answers_the_constraint():
    # Its speed (< 1 s) is a benchmark: benchmarks/bench_pick.py prints it beside the target.
    pts = random_points(100_000, seed=2)
    r = pick(pts, "tpot_p99_ms<=40, quality_rel>=0.95", "cost_per_mtok", prices={"A100-80G-PCIe": 2.085})
    assert r.winner is not None and r.winner["tpot_p99_ms"] <= 40 and r.winner["quality_rel"] >= 0.95


def test_the_summary_names_each_points_load_so_two_loads_of_one_configuration_are_told_apart():
    """A configuration is simulated at several loads, each its own point: the winner and runners-up say
    at which (before, two lines of the same label and hardware read as a duplicate)."""
    from pareto_atlas.simulate.space import load_label

    pts = synthetic_points()
    assert "concurrency" in pts.columns or "rate_rps" in pts.columns
    r = pick(pts, "tpot_p99_ms<=1000", "cost_per_mtok", top=5)
    text = r.summary()
    by_id = pts.set_index("point_id")
    win = next(line for line in text.splitlines() if line.startswith("winner:"))
    load = load_label(by_id.loc[r.winner["point_id"]])
    assert load and f", {load})" in win
    then = [line for line in text.splitlines() if line.startswith("  then:")]
    assert len(then) == 4
    for line, (_, row) in zip(then, r.runners_up.iterrows()):
        assert f"on {row['hardware']} at {load_label(by_id.loc[row['point_id']])}," in line
