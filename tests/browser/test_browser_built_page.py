"""A page that a build wrote, opened in headless Chromium at 1,600 px and checked by the same rules
as the synthetic page of test_browser_atlas_page.py, over every (model, workload) view it offers.

Opt-in: set ATLAS_PAGE to the page (e.g. `make page-check` after `make atlas`); screenshots of each
view go to $ATLAS_SCREENSHOTS when it is set. The rules are the issue's bar: each view draws its
frontier with labelled points, never two models' relative quality on one axis, a tooltip names a
point's configuration, a filter changes what is drawn, no table cell wraps past 3 lines, no text
leaves a cell of the regime map, one self-contained file under 10 MB that fetches nothing."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from test_browser_atlas_page import (
    cells_over_three_lines,
    choose,
    drawn_ids,
    grid_overflow,
    hover,
    load,
    mixed_quality_axes,
    screenshot,
)

PAGE = os.environ.get("ATLAS_PAGE")
MAX_BYTES = 10 * 1024 * 1024

pytestmark = pytest.mark.skipif(not PAGE, reason="set ATLAS_PAGE to a built atlas page to check it")


def views(browser) -> list[tuple[str, str]]:
    return browser.evaluate(
        "Array.from(document.getElementById('f-view').options).map(function (o) { return [o.value, o.textContent]; })"
    )


def frontier_labels(browser, chart: str) -> list[str]:
    return browser.evaluate(
        f"Array.from(document.querySelectorAll('#{chart} .annotation-text')).map(function (t) {{ return t.textContent; }})"
    )


def frontier_ids(browser, chart: str) -> list[str]:
    return browser.evaluate(f"""(function () {{ var gd = document.getElementById({chart!r});
        var f = (gd.data || []).filter(function (t) {{ return t.name === 'frontier'; }})[0];
        return f ? f.customdata : []; }})()""")


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")[:60]


def test_a_built_page_reads_as_the_issue_asks(browser, tmp_path):
    page = Path(PAGE).resolve()
    assert page.is_file(), f"ATLAS_PAGE={PAGE} is not a file"
    assert page.stat().st_size < MAX_BYTES, f"{page.stat().st_size / 1e6:.1f} MB"
    browser.send("Network.enable")
    load(browser, page)
    assert browser.errors() == []
    fetched = [e["params"]["request"]["url"] for e in browser.events if e.get("method") == "Network.requestWillBeSent"]
    assert all(u.startswith(("file:", "data:", "blob:")) for u in fetched), fetched

    offered = views(browser)
    assert offered, "the page offers no view"
    seen_frontier = 0
    for value, name in offered:
        choose(browser, "f-view", value)
        compare = browser.evaluate("getComputedStyle(document.getElementById('view-frontier')).display") == "none"
        charts = ("chart-compare",) if compare else ("chart-latency", "chart-cost", "chart-tput")
        for chart in charts:
            assert drawn_ids(browser, chart), f"{name}: {chart} draws nothing"
            assert browser.evaluate(f"document.querySelectorAll('#{chart} .scatterlayer .point').length") > 0, (
                f"{name}: {chart} has no visible point"
            )
        assert mixed_quality_axes(browser) == [], name
        assert grid_overflow(browser) == [], name
        assert cells_over_three_lines(browser) == [], name
        if not compare:
            front = frontier_ids(browser, "chart-latency")
            assert front, f"{name}: no frontier on the quality-latency chart"
            assert any(frontier_labels(browser, "chart-latency")), f"{name}: the frontier points are not labelled"
            tip = hover(browser, "chart-latency", front[len(front) // 2])
            assert "configuration: " in tip and "rests on: " in tip, tip
            seen_frontier += 1
            screenshot(browser, tmp_path, f"{slug(name)}-frontier", "#view-frontier")
            screenshot(browser, tmp_path, f"{slug(name)}-throughput", "#view-tput")
        else:
            screenshot(browser, tmp_path, f"{slug(name)}-compare", "#view-compare")
        screenshot(browser, tmp_path, f"{slug(name)}-regimes", "#view-regimes")
        screenshot(browser, tmp_path, f"{slug(name)}-tables", "#view-tables")
    assert seen_frontier, "no (model, workload) view with a frontier"

    # a filter changes what is drawn: one card of the first view's cards leaves only its points
    choose(browser, "f-view", offered[0][0])
    cards = browser.evaluate(
        "Array.from(document.getElementById('f-hardware').options).map(function (o) { return o.value; })"
    )
    chart = "chart-compare" if len(offered) == 1 and "compare" in offered[0][1] else "chart-latency"
    before = set(drawn_ids(browser, chart))
    narrowed = False
    for card in (c for c in cards if c != "all"):
        choose(browser, "f-hardware", card)
        after = set(drawn_ids(browser, chart))
        assert after <= before, card
        narrowed |= bool(after) and after != before
    choose(browser, "f-hardware", "all")
    assert narrowed or len(cards) <= 2, "no card filter changed what is drawn"
    assert browser.errors() == []
