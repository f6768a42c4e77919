"""Issue 34, item 3's tie rule: a regime winner whose interval overlaps its runner-up's by more than
half is reported as a tie with both named; a winner whose latency or throughput bar is wider than
±50 % is reported as low-confidence. Neither is crowned."""

from __future__ import annotations

import pandas as pd
import pytest
from rich.console import Console
from test_atlas_regimes import cfg

from pareto_atlas.atlas.answer import Answer
from pareto_atlas.atlas.objectives import with_derived
from pareto_atlas.atlas.regimes import Regime
from pareto_atlas.atlas.winners import interval_overlap, winners

FAST = Regime("fast", "tpot_p99_ms", "min")


def _pair(err_a: float, err_b: float, tpot_b: float = 22.0) -> pd.DataFrame:
    a = cfg("a", "FP8", ["weight-quant"], q=0.76, tpot=20.0, thr=1300)
    b = cfg("b", "AWQ4", ["weight-quant"], q=0.76, tpot=tpot_b, thr=1200)
    a.update(lat_rel_err=err_a, thr_rel_err=err_a)
    b.update(lat_rel_err=err_b, thr_rel_err=err_b)
    return pd.DataFrame([a, b])


def _all(cells: pd.DataFrame) -> pd.Series:
    return cells[cells.hardware == "all"].iloc[0]


def test_overlap_is_the_share_of_the_narrower_interval():
    assert interval_overlap(0, 10, 5, 15) == pytest.approx(0.5)
    assert interval_overlap(0, 10, 2, 4) == pytest.approx(1.0)
    assert interval_overlap(0, 1, 2, 3) == 0.0
    assert interval_overlap(1, 1, 1, 1) == 1.0 and interval_overlap(1, 1, 2, 2) == 0.0


def test_overlapping_bars_are_a_tie_with_both_named():
    c = _all(winners(_pair(0.2, 0.2), [FAST]))  # [16, 24] and [17.6, 26.4]: 80 % of the narrower shared
    assert c.verdict == "tie" and c.overlap > 0.5
    assert c.label == "FP8" and c.runner_up_label == "AWQ4" and "tie with AWQ4" in c.verdict_note


def test_separated_bars_crown_the_winner():
    c = _all(winners(_pair(0.05, 0.05, tpot_b=30.0), [FAST]))
    assert c.verdict == "winner" and c.verdict_note == "" and c.separated


def test_a_bar_wider_than_half_is_low_confidence_even_alone():
    pts = _pair(0.9, 0.0).iloc[:1]
    c = _all(winners(pts, [FAST]))
    assert c.verdict == "low-confidence" and "±90%" in c.verdict_note


@pytest.mark.parametrize("err", [0.05, 0.3, 0.6, 2.0])
def test_no_crowned_winner_carries_a_bar_wider_than_half(err):
    """The bar: over a table whose bars range from ±5 % to ±200 %, every cell's winner with a
    latency or throughput bar wider than ±50 % is a tie or low-confidence."""
    rows = []
    for i, tpot in enumerate((10.0, 14.0, 20.0, 28.0)):
        r = cfg(f"p{i}", f"K{i}", ["batching"], q=0.76, tpot=tpot, thr=4000 / tpot, hw=("L4", "H100")[i % 2])
        r.update(lat_rel_err=err * (i + 1) / 2, thr_rel_err=err * (i + 1) / 2)
        rows.append(r)
    pts = pd.DataFrame(rows)
    regs = [FAST, Regime("thr", "throughput_tok_s", "max"), Regime("cheap", "cost_per_mtok", "min")]
    cells = Answer.of(with_derived(pts), regs).cells
    won = cells[cells.point_id != ""].merge(pts[["point_id", "thr_rel_err"]], on="point_id")
    wide = won[(won.lat_rel_err > 0.5) | (won.thr_rel_err > 0.5)]
    assert len(wide) > 0 if err >= 0.6 else len(wide) == 0  # the check is not vacuous
    assert (wide.verdict.isin(["tie", "low-confidence"])).all()
    assert set(Answer.of(with_derived(pts), regs).uncrowned.point_id) >= set(wide.point_id)


def test_the_atlas_table_prints_the_tie():
    from pareto_atlas.atlas.tables import print_winners

    ans = Answer.of(with_derived(_pair(0.2, 0.2)), [FAST])
    con = Console(record=True, width=300)
    print_winners(ans.placed_cells, con)
    assert "tie with AWQ4" in con.export_text()


def test_a_tie_between_one_configuration_at_two_loads_names_the_runner_ups_load():
    """The default build printed "Q8_0+chunked+x8 — tie with Q8_0+chunked+x8": the same
    configuration at another load. The runner-up is told apart by its card and load."""
    a = cfg("a", "FP8", ["weight-quant"], q=0.76, tpot=20.0, thr=1300)
    b = cfg("b", "FP8", ["weight-quant"], q=0.76, tpot=21.0, thr=1250)
    a.update(lat_rel_err=0.2, thr_rel_err=0.2, concurrency=8)
    b.update(lat_rel_err=0.2, thr_rel_err=0.2, concurrency=16)
    c = _all(winners(pd.DataFrame([a, b]), [FAST]))
    assert c.verdict == "tie" and c.runner_up_label == "FP8"
    assert "tie with FP8 at 16 clients (" in c.verdict_note
    b.update(concurrency=8)
    c = _all(winners(pd.DataFrame([a, b]), [FAST]))
    assert "tie with FP8 (" in c.verdict_note  # nothing to tell apart: nothing added
