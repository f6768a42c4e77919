"""The HTML atlas in a real headless Chromium: renders, no console errors, winners match Python,
and a malicious configuration label is shown as text, never run."""

from __future__ import annotations

import time

import pandas as pd

from pareto_atlas.atlas.frontier import frontier
from pareto_atlas.atlas.regimes import default_regimes
from synthetic import synthetic_points
from pareto_atlas.atlas.winners import boundary_cases, winners
from pareto_atlas.report.html import write_html

EVIL_LABEL = "<img src=x onerror=alert(1)>"
EVIL_HW = '"><svg onload=alert(2)>'
EVIL_MODEL = "<b>model</b>"


def atlas_points() -> pd.DataFrame:
    pts = synthetic_points(hardware=(("L4", 1.0, 0.39), (EVIL_HW, 6.4, 1.39)))
    # Make the malicious label the low-cost winner so it must appear in the winners table.
    cheapest = pts[pts["quality_rel_lo"] >= 0.95]["cost_per_mtok"].idxmin()
    pts.loc[cheapest, "label"] = EVIL_LABEL
    # a few points whose quality rests on a prior: drawn as squares, never winners
    prior = pts.index[pts["provenance"].eq("simulated") & pts["hardware"].eq("L4")][:7]
    pts.loc[prior, "quality_provenance"] = "prior:micikevicius2022fp8 (FP8 weights of the Q4_K_M source)"
    pts["model"] = EVIL_MODEL           # the model axis: named on every winner row, as text, never markup
    return pts


def load(browser, path) -> None:
    browser.send("Page.navigate", {"url": path.as_uri()})
    deadline = time.monotonic() + 20
    while browser.evaluate("document.body && document.body.getAttribute('data-ready')") != "1":
        assert time.monotonic() < deadline, f"page never became ready; errors: {browser.errors()}"
        time.sleep(0.1)


def test_atlas_page_in_headless_chromium(browser, tmp_path):
    pts = atlas_points()
    regs = default_regimes(pts)
    cells = winners(pts, regs)
    page = write_html(tmp_path / "atlas.html", frontier(pts), cells, boundary_cases(pts, regs, cells), list(regs),
                      {"title": "browser test", "study": EVIL_LABEL})
    load(browser, page)

    assert browser.errors() == []
    # The default view is the frontier region on a log axis: every mark drawn or counted as outside.
    assert browser.evaluate("document.getElementById('log-x').checked && document.getElementById('clip-x').checked")
    shown_n = browser.evaluate("document.querySelectorAll('#scatter .pt').length")
    note = browser.evaluate("document.getElementById('drawn-count').textContent")
    outside = int(note.split("; ")[1].split(" ")[0]) if "outside" in note else 0
    assert shown_n + outside == len(pts)
    # It rendered: with the region unticked, a scatter with one mark per embedded point, and the winners table.
    browser.evaluate("""(function () { var c = document.getElementById('clip-x'); c.checked = false;
        c.dispatchEvent(new Event('change')); })()""")
    n_marks = browser.evaluate("document.querySelectorAll('#scatter .pt').length")
    assert n_marks == len(pts)
    assert browser.evaluate("document.querySelectorAll('#scatter .pt.measured').length") == int((pts["provenance"] == "measured").sum())
    # Shape says what a point rests on: the prior-quality points are the squares.
    squares = browser.evaluate("Array.from(document.querySelectorAll('#scatter rect.pt')).map(function (r) { return r.dataset.pointId; })")
    assert sorted(squares) == sorted(pts.loc[pts["quality_provenance"].str.startswith("prior:"), "point_id"])
    assert not set(squares) & set(cells["point_id"])

    evidence = browser.evaluate("Array.from(document.querySelectorAll('#winners-body tr')).map(function (tr) { return tr.cells[9].textContent; })")
    assert all(e.startswith("quality ") and "; speed " in e for e in evidence if e)
    shown = browser.evaluate("""Array.from(document.querySelectorAll('#winners-body tr')).map(function (tr) {
        return [tr.dataset.regime, tr.dataset.hardware, tr.dataset.pointId, tr.cells[4].textContent]; })""")
    expect = [[r.regime, r.hardware, r.point_id, r.label if r.point_id else f"— {r.note}"] for r in cells.itertuples()]
    assert shown == expect
    # each winner says the load it won at, as winners.md does
    # each winner names the model it answers for (the second column)
    models = browser.evaluate("Array.from(document.querySelectorAll('#winners-body tr')).map(function (tr) { return tr.cells[1].textContent; })")
    assert models == [r.model or "" for r in cells.itertuples()]
    loads = browser.evaluate("Array.from(document.querySelectorAll('#winners-body tr')).map(function (tr) { return tr.cells[5].textContent; })")
    assert loads == [r.load if r.point_id else "" for r in cells.itertuples()]
    assert any(x.endswith(("client", "clients")) for x in loads)

    # The malicious strings are text: no element was created from them, no script ran.
    assert browser.evaluate("document.querySelectorAll('img, #winners svg, iframe').length") == 0
    assert any(EVIL_LABEL == row[3] for row in shown)
    assert EVIL_HW in browser.evaluate("document.getElementById('winners').textContent")
    assert EVIL_LABEL in browser.evaluate("document.querySelector('.sub').textContent")

    # Hover shows the configuration, its provenance and its error bar.
    browser.evaluate("""(function () { var c = document.querySelector('#scatter .pt:not(.measured)');
        c.dispatchEvent(new MouseEvent('mouseenter', {bubbles: true, clientX: 10, clientY: 10})); })()""")
    tip = browser.evaluate("document.getElementById('tooltip').textContent")
    assert "provenance: simulated" in tip and "±" in tip

    # Filters re-render: one hardware leaves only its rows (and the overall ones).
    browser.evaluate("""(function () { var s = document.getElementById('f-hardware'); s.value = 'L4';
        s.dispatchEvent(new Event('change')); })()""")
    hws = set(browser.evaluate("Array.from(document.querySelectorAll('#winners-body tr')).map(function (t) { return t.dataset.hardware; })"))
    assert hws == {"L4", "all"}
    assert browser.evaluate("document.querySelectorAll('#scatter .pt').length") == int((pts["hardware"] == "L4").sum())
    assert browser.errors() == []


def test_the_error_probe_itself_sees_console_errors_and_dialogs(browser, tmp_path):
    """Guard against a silent probe: a page that errs must be reported."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><body><script>console.error('boom'); document.body.setAttribute('data-ready','1');"
                   "setTimeout(function () { throw new Error('late'); }, 0);</script></body>")
    before = len(browser.errors())
    load(browser, bad)
    time.sleep(0.3)
    browser.evaluate("1")  # drain pending events
    new = browser.errors()[before:]
    assert any("boom" in e for e in new) and any("late" in e for e in new)
