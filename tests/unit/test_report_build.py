"""build_report writes every output; the page embeds data safely; exports round-trip."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from synthetic import synthetic_points

from pareto_atlas.atlas.answer import Answer
from pareto_atlas.atlas.frontier import frontier
from pareto_atlas.atlas.objectives import with_derived
from pareto_atlas.atlas.regimes import Regime, default_regimes
from pareto_atlas.atlas.winners import winners
from pareto_atlas.report import build_report
from pareto_atlas.report.bundle import plotly_js
from pareto_atlas.report.export import winners_markdown
from pareto_atlas.report.figures import fidelity_long
from pareto_atlas.report.html import embed_json, render_html

EVIL = '<img src=x onerror=alert(1)></script><script>alert(2)</script>&amp;'


def evil_points() -> pd.DataFrame:
    pts = synthetic_points()
    pts.loc[0, "label"] = EVIL
    return pts


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    pts = evil_points()
    m = pts[pts["provenance"] == "measured"]
    fid = pd.DataFrame(
        {
            "label": m["label"],
            "hardware": m["hardware"],
            "tpot_p99_ms_measured": m["tpot_p99_ms"],
            "tpot_p99_ms_simulated": m["tpot_p99_ms"] * 1.03,
        }
    )
    out = tmp_path_factory.mktemp("report")
    regimes = [
        *default_regimes(pts),
        {
            "name": "chat-slo",
            "objective": "cost_per_mtok",
            "constraints": {"tpot_p99_ms": ["<=", 8]},
            "quality_floor": 0.97,
        },
    ]
    paths = build_report(
        pts, out, regimes=regimes, fidelity=fid, meta={"title": "Atlas <script>x</script>", "study": "synthetic"}
    )
    return pts, paths


def test_every_output_is_written(built):
    _, paths = built
    for key in ("frontier_csv", "winners_json", "winners_md", "boundary_csv", "atlas_html", "summary_json"):
        assert paths[key].stat().st_size > 0, key
    for fig in (
        "frontier_quality_latency",
        "frontier_cost_quality",
        "atlas_grid",
        "frontier_per_hardware",
        "frontier_frequency",
        "combos_vs_singles",
        "constraint_winners",
        "simulator_fidelity",
    ):
        assert paths[f"fig_{fig}_png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert b"<svg" in paths[f"fig_{fig}_svg"].read_bytes()[:2000]
    for table in ("points", "frontier", "winners"):
        for fmt in ("json", "csv", "parquet"):
            assert paths[f"export_{table}_{fmt}"].exists()


def test_exports_round_trip_and_match_the_atlas(built):
    pts, paths = built
    back = pd.read_parquet(paths["export_frontier_parquet"])
    assert len(back) == len(pts) and {"raw_frontier", "frontier_status", "dominated_by"} <= set(back.columns)
    expected = frontier(pts)
    assert list(back["frontier_status"]) == list(expected["frontier_status"])
    w = json.loads(paths["winners_json"].read_text())
    assert {r["regime"] for r in w} == {"tight-latency", "high-throughput", "low-cost", "quality-floor", "chat-slo"}
    assert pd.read_csv(paths["export_winners_csv"])["regime"].nunique() == 5
    summary = json.loads(paths["summary_json"].read_text())
    assert summary["raw_frontier"] == int(expected["raw_frontier"].sum())
    assert "linear interpolation" in summary["percentile_method"]


def test_page_is_self_contained_and_escapes_user_strings(built):
    _, paths = built
    page = paths["atlas_html"].read_text()
    assert "<img src=x" not in page and "<script>alert" not in page and "<script>x</script>" not in page
    # plotly.js is inlined whole: its map styles name tile servers it never reaches (no map is drawn,
    # and the page's CSP, default-src 'none', would refuse them); the page's own text names none
    assert plotly_js() in page and "default-src 'none'" in page
    own = page.replace(plotly_js(), "")
    assert not re.search(r"(src|href)=[\"']?(https?:)?//", own), "page must not load anything from the network"
    data = re.search(r'<script type="application/json" id="atlas-data">(.*?)</script>', page, re.S).group(1)
    payload = json.loads(data)
    assert EVIL in payload["points"]["text"]["label"]["values"]
    assert "linear interpolation" in page and "2026-07" in page  # percentile method, price date stated


def test_winners_markdown_escapes_table_syntax():
    pts = evil_points()
    pts.loc[:, "label"] = "a|b<x>"
    md = winners_markdown(winners(pts, [Regime("cheap", "cost_per_mtok")]))
    assert "a\\|b&lt;x&gt;" in md and "<x>" not in md


def test_winners_say_the_load_they_won_at():
    pts = synthetic_points(seed=1)
    cells = winners(pts, [Regime("fast", "tpot_p99_ms"), Regime("wide", "throughput_tok_s", "max")], per_hardware=False)
    by_id = pts.set_index("point_id")
    md = winners_markdown(cells).splitlines()
    for c, line in zip(cells.itertuples(index=False), md[2:]):
        assert c.concurrency == by_id.loc[c.point_id, "concurrency"]
        n = int(c.concurrency)
        assert f"| {c.label} | {n} client{'s' if n != 1 else ''} |" in line
    # an open loop's winner names its rate
    open_loop = pts.assign(concurrency=0, rate_rps=0.3)
    line = winners_markdown(winners(open_loop, [Regime("fast", "tpot_p99_ms")], per_hardware=False)).splitlines()[2]
    assert "| 0.3 req/s |" in line


def point_ids(payload: dict) -> list[str]:
    t = payload["points"]["text"]["point_id"]
    return [t["values"][c] for c in t["codes"]]


@settings(max_examples=60, deadline=None)
@given(st.text())
def test_embedded_json_never_contains_markup_and_round_trips(s):
    text = embed_json({"label": s, "n": [1.5, None]})
    assert not set("<>&") & set(text)
    assert json.loads(text) == {"label": s, "n": [1.5, None]}


def test_render_html_embeds_only_a_sample_of_dominated_points_but_all_winners():
    pts = synthetic_points(n_configs=2000)
    answer = Answer.of(with_derived(pts), default_regimes(pts))
    cells = answer.cells
    page = render_html(answer, {}, max_points=500)
    payload = json.loads(re.search(r'id="atlas-data">(.*?)</script>', page, re.S).group(1))
    ids = set(point_ids(payload))
    assert payload["n_points_total"] == len(pts) and payload["n_points_drawn"] == len(ids)
    assert {pid for pid in cells["point_id"] if pid} <= ids


def test_fidelity_accepts_long_or_wide_and_rejects_other_shapes():
    wide = pd.DataFrame({"label": ["a"], "tpot_p99_ms_measured": [10.0], "tpot_p99_ms_simulated": [11.0]})
    long = fidelity_long(wide)
    assert list(long[["metric", "measured", "simulated"]].iloc[0]) == ["tpot_p99_ms", 10.0, 11.0]
    assert fidelity_long(long) is long
    with pytest.raises(ValueError, match="expected columns metric, measured, simulated"):
        fidelity_long(pd.DataFrame({"x": [1]}))


def test_a_table_with_no_scored_point_still_reports(tmp_path):
    # e.g. a speed-only build: nothing to log-scale on the cost-quality axes, no winner, no crash
    pts = synthetic_points().assign(
        quality=float("nan"),
        quality_rel=float("nan"),
        quality_lo=float("nan"),
        quality_hi=float("nan"),
        quality_rel_lo=float("nan"),
        quality_rel_hi=float("nan"),
    )
    paths = build_report(pts, tmp_path, regimes=[Regime("cheap", "cost_per_mtok")])
    md = paths["winners_md"].read_text()
    assert "no configuration that meets the constraints has a quality measurement" in md and "nan on nan" not in md


def test_the_page_stays_one_file_under_10_mb_for_a_large_table():
    """20,000 configurations: the page embeds a bounded sample (every point a line or table needs
    kept) beside the inlined plotly.js, and stays under the 10 MB the page promises."""
    from synthetic import random_points

    pts = random_points(20000)
    answer = Answer.of(with_derived(pts), default_regimes(pts))
    page = render_html(answer, {})
    payload = json.loads(re.search(r'id="atlas-data">(.*?)</script>', page, re.S).group(1))
    assert payload["n_points_total"] == 20000 and payload["n_points_drawn"] < 20000
    assert {pid for pid in answer.cells["point_id"] if pid} <= set(point_ids(payload))
    assert len(page.encode()) < 10_000_000


def test_figures_write_plain_units_and_the_guards_verdict_where_quality_takes_few_values(tmp_path):
    from pareto_atlas.report.regime_figure import _num

    assert [_num(5840.3), _num(0.1712), _num(12.34), _num(250.0)] == ["5,840", "0.171", "12.3", "250"]
    pts = synthetic_points()
    three = (
        pts["quality_rel"].rank(method="dense", pct=True).map(lambda r: 1.0 if r > 0.6 else 0.96 if r > 0.3 else 0.5)
    )
    pts = pts.assign(quality_rel=three, quality_rel_lo=three - 0.02, quality_rel_hi=three + 0.02)
    paths = build_report(pts, tmp_path, regimes=[Regime("fast", "tpot_p99_ms", quality_floor=0.95)])
    svg = paths["fig_frontier_quality_latency_svg"].read_text()
    assert "guard of fast" in svg and ">boundary<" in svg.replace("</tspan>", "<")


def test_a_card_panel_says_why_it_is_empty_and_when_its_speed_rests_on_no_fit(tmp_path):
    """The per-hardware figure drew an empty H100-SXM panel for DeepSeek-V3 (every configuration over the
    node's memory) and B200's projected points under 'calibrated simulator' alone: each panel now says
    why it has no point, and a card whose speed no fit supports says so."""
    from pareto_atlas.report.figures import fig_hardware_frontiers

    pts = synthetic_points()
    l4, a100 = pts["hardware"] == "L4", pts["hardware"] == "A100-80G-PCIe"
    pts.loc[l4, "feasible"] = False
    pts.loc[l4, "infeasible_reason"] = "m F16 needs 140 GB of weights, over 90% of L4's 24 GiB: TP x PP >= 8"
    pts["calib_provenance"] = "calibrated on 8 published anchors"
    pts.loc[a100, ["provenance", "calib_provenance"]] = ["simulated", "uncalibrated default"]
    svg = fig_hardware_frontiers(pts, tmp_path)["svg"].read_text()
    assert "no feasible configuration:" in svg and f"{int(l4.sum())} × m F16 needs 140 GB" in svg.replace("\n", " ")
    assert "speed on this card:" in svg and "uncalibrated (default efficiencies)" in svg
    assert svg.count("speed on this card:") == 1  # H100-PCIe, calibrated, has no note
