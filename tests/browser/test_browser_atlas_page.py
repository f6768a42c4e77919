"""The HTML atlas in a real headless Chromium at 1,600 px, as a person sees it: every view draws,
a filter changes what is drawn, a tooltip names a point's configuration, winners match Python, no
table cell wraps past 3 lines, no text leaves a cell of the regime map, no two models' relative
quality share an axis, and a malicious label is shown as text, never run. A screenshot of each view
is written under the test's tmp dir (and to $ATLAS_SCREENSHOTS when it is set)."""

from __future__ import annotations

import base64
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
from synthetic import synthetic_points

from pareto_atlas.atlas.answer import Answer
from pareto_atlas.atlas.objectives import with_derived
from pareto_atlas.atlas.regimes import default_regimes
from pareto_atlas.report.html import write_html

EVIL_LABEL = "<img src=x onerror=alert(1)>"
EVIL_HW = '"><svg onload=alert(2)>'
SMALL, BIG = "<b>small</b>", "big-7b"
WIDTH = 1600


def atlas_points() -> pd.DataFrame:
    """Two models on one workload: the small one on two cards (one named to break markup), the big
    one with three quality levels (drawn as the guard's verdict) and a multi-GPU layout."""
    small = synthetic_points(hardware=(("L4", 1.0, 0.39), (EVIL_HW, 6.4, 1.39)))
    cheapest = small[small["quality_rel_lo"] >= 0.95]["cost_per_mtok"].idxmin()
    small.loc[cheapest, "label"] = EVIL_LABEL  # the low-cost winner: it must appear as text
    prior = small.index[small["provenance"].eq("simulated") & small["hardware"].eq("L4")][:7]
    small.loc[prior, "quality_provenance"] = "prior:micikevicius2022fp8 (FP8 weights of the Q4_K_M source)"
    small["model"] = SMALL
    big = synthetic_points(hardware=(("H100", 33.5, 2.99),), seed=3)
    big["point_id"] = "big-" + big["point_id"].astype(str)
    big["model"] = BIG
    levels = np.select([big["quality_rel"] > 0.995, big["quality_rel"] > 0.9], [1.0, 0.96], 0.5)
    big["quality_rel"] = levels
    big["quality_rel_lo"], big["quality_rel_hi"] = (
        levels - np.where(levels == 1.0, 0, 0.02),
        levels + np.where(levels == 1.0, 0, 0.02),
    )
    big["quality"] = 0.8 * levels
    multi = big.index[:40]
    big.loc[multi, ["tp", "replicas"]] = [4, 2]
    big.loc[multi, "n_devices"] = 8
    big.loc[multi, "throughput_per_device_tok_s"] = big.loc[multi, "throughput_tok_s"] / 8
    return pd.concat([small, big], ignore_index=True)


def load(browser, path: Path) -> None:
    browser.send(
        "Emulation.setDeviceMetricsOverride", {"width": WIDTH, "height": 1000, "deviceScaleFactor": 1, "mobile": False}
    )
    browser.send("Page.navigate", {"url": path.as_uri()})
    deadline = time.monotonic() + 30
    while browser.evaluate("document.body && document.body.getAttribute('data-ready')") != "1":
        assert time.monotonic() < deadline, f"page never became ready; errors: {browser.errors()}"
        time.sleep(0.1)


def choose(browser, select_id: str, value: str) -> None:
    browser.evaluate(f"""(function () {{ var s = document.getElementById({select_id!r}); s.value = {value!r};
        s.dispatchEvent(new Event('change')); }})()""")


def drawn_ids(browser, chart: str) -> list[str]:
    """The point ids a plotly chart draws, over all its traces."""
    return browser.evaluate(f"""(function () {{ var gd = document.getElementById({chart!r}), out = [];
        (gd.data || []).forEach(function (t) {{ (t.customdata || []).forEach(function (c) {{ out.push(c); }}); }});
        return out; }})()""")


# The rule the issue sets: a chart whose y axis is relative quality (or its verdict) draws one model.
MODELS_ON_QUALITY_AXES = """(function () {
  var model = {}, out = [];
  %s
  document.querySelectorAll('.chart[data-y]').forEach(function (gd) {
    var seen = {};
    (gd.data || []).forEach(function (t) { (t.customdata || []).forEach(function (c) { seen[model[c]] = 1; }); });
    out.push([gd.id, Object.keys(seen).length]);
  });
  return out; })()"""
POINT_MODELS = """var c = JSON.parse(document.getElementById('atlas-data').textContent).points.text;
  c.point_id.codes.forEach(function (k, i) { model[c.point_id.values[k]] = c.model.values[c.model.codes[i]]; });"""


def mixed_quality_axes(browser) -> list[str]:
    return [cid for cid, n in browser.evaluate(MODELS_ON_QUALITY_AXES % POINT_MODELS) if n > 1]


def cells_over_three_lines(browser) -> list[str]:
    """Table cells (outside the regime map, which grid_overflow checks) whose text takes more than 3
    lines: the height of the text itself (a row is as tall as its tallest cell), or of the clamped
    box that holds it."""
    return browser.evaluate("""(function () { var bad = [];
      document.querySelectorAll('table td').forEach(function (td) {
        if (!td.offsetParent || td.closest('#regime-map') || !td.textContent) return;
        var box = td.querySelector('.clamp') || td, cs = getComputedStyle(box);
        var lh = parseFloat(cs.lineHeight) || 1.45 * parseFloat(cs.fontSize), h;
        if (box !== td) h = box.clientHeight;
        else { var r = document.createRange(); r.selectNodeContents(td); h = r.getBoundingClientRect().height; }
        if (h > 3 * lh + 2) bad.push(td.closest('table').id + ': ' + td.textContent.slice(0, 80));
      }); return bad; })()""")


def grid_overflow(browser) -> list[str]:
    """Text of a regime-map cell that runs past the cell's box (an ellipsis stays inside)."""
    return browser.evaluate("""(function () { var bad = [];
      document.querySelectorAll('#regime-map td.cell').forEach(function (td) {
        var r = td.getBoundingClientRect();
        td.querySelectorAll('div').forEach(function (d) {
          var q = d.getBoundingClientRect();
          var clipped = getComputedStyle(d).textOverflow === 'ellipsis' && getComputedStyle(d).overflow === 'hidden';
          if (q.right > r.right + 1 || q.left < r.left - 1 || (!clipped && d.scrollWidth > d.clientWidth + 1))
            bad.push(d.textContent); }); }); return bad; })()""")


def hover(browser, chart: str, point_id: str) -> str:
    """Move the mouse onto a drawn point, as a person would, and return the tooltip's text. The
    other traces are hidden first (as a click on their legend entries would), so that a point
    drawn on the same spot is not the one picked."""
    xy = browser.evaluate(f"""(function () {{ var gd = document.getElementById({chart!r});
        for (var c = 0; c < gd.data.length; c++) {{ var j = (gd.data[c].customdata || []).indexOf({point_id!r});
          if (j < 0) continue;
          var others = gd.data.map(function (t, i) {{ return i; }}).filter(function (i) {{ return i !== c; }});
          Plotly.restyle(gd, {{visible: 'legendonly'}}, others);
          var traces = gd.querySelectorAll('.scatterlayer .trace');
          var pt = Array.from(traces).filter(function (t) {{ return t.style.opacity !== '0' && t.querySelector('.point'); }})[0].querySelectorAll('.point')[j];
          pt.scrollIntoView({{block: 'center'}});
          var r = pt.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; }}
        return null; }})()""")
    assert xy, f"{point_id} is not drawn on {chart}"
    browser.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": xy[0] + 30, "y": xy[1] + 30})
    browser.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": xy[0], "y": xy[1]})
    deadline = time.monotonic() + 5
    while browser.evaluate("document.getElementById('tooltip').dataset.pointId") != point_id:
        assert time.monotonic() < deadline, f"no tooltip for {point_id}"
        time.sleep(0.05)
    text = browser.evaluate("document.getElementById('tooltip').textContent")
    browser.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": 2, "y": 2})
    browser.evaluate(f"Plotly.restyle({chart!r}, {{visible: true}}).then(function () {{ return 1; }})")
    return text


def screenshot(browser, tmp_path: Path, name: str, selector: str) -> Path:
    box = browser.evaluate(f"""(function () {{ var r = document.querySelector({selector!r}).getBoundingClientRect();
        return [r.top + window.scrollY, r.height]; }})()""")
    shot = browser.send(
        "Page.captureScreenshot",
        {
            "format": "png",
            "captureBeyondViewport": True,
            "clip": {"x": 0, "y": box[0], "width": WIDTH, "height": max(1, min(box[1], 4000)), "scale": 1},
        },
    )
    data = base64.b64decode(shot["data"])
    path = tmp_path / f"{name}.png"
    path.write_bytes(data)
    if os.environ.get("ATLAS_SCREENSHOTS"):
        out = Path(os.environ["ATLAS_SCREENSHOTS"])
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{name}.png").write_bytes(data)
    return path


def test_atlas_page_in_headless_chromium(browser, tmp_path):
    pts = atlas_points()
    answer = Answer.of(with_derived(pts), default_regimes(pts))
    claims = [
        {
            "id": "fp8-winners",
            "claim": "FP8 weights are part of 3 of the 4 regime winners. " * 3,
            "answer": "FP8 is in 0 of 4 winners " * 12,
            "verdict": "differs",
            "evidence": "the winner rests on " * 60,
        }
    ]
    quality = pd.DataFrame(
        {
            "task": ["gsm8k", "gsm8k"],
            "arm": ["f16", "q4"],
            "baseline": [True, False],
            "k": [150, 141],
            "n": [200, 200],
            "rel": [1.0, 0.94],
            "rel_lo": [1.0, 0.9],
            "rel_hi": [1.0, 0.98],
            "diff": [0.0, -0.045],
            "diff_lo": [np.nan, -0.08],
            "diff_hi": [np.nan, -0.01],
            "mcnemar_p": [np.nan, 0.01],
            "kld": [np.nan, 0.03],
            "kld_lo": [np.nan, 0.02],
            "kld_hi": [np.nan, 0.04],
            "top1": [np.nan, 0.97],
        }
    )
    page = write_html(
        tmp_path / "atlas.html",
        answer,
        {"title": "browser test", "study": EVIL_LABEL},
        claims=claims,
        quality_table=quality,
    )
    browser.send("Network.enable")
    load(browser, page)
    assert browser.errors() == []
    # one self-contained file: nothing is fetched but the page itself
    fetched = [e["params"]["request"]["url"] for e in browser.events if e.get("method") == "Network.requestWillBeSent"]
    assert fetched and all(u.startswith(("file:", "data:", "blob:")) for u in fetched), fetched

    # One view per (model, workload) and one comparison on the shared workload; the first is open.
    views = browser.evaluate(
        "Array.from(document.getElementById('f-view').options).map(function (o) { return o.textContent; })"
    )
    assert views == [
        f"{SMALL} · chat-512-128",
        f"{BIG} · chat-512-128",
        "compare models on chat-512-128 (absolute score)",
    ]
    small_ids = set(pts.loc[pts["model"] == SMALL, "point_id"])
    for chart in ("chart-latency", "chart-cost", "chart-tput"):
        ids = drawn_ids(browser, chart)
        assert ids and set(ids) <= small_ids, chart
        assert browser.evaluate(f"document.querySelectorAll('#{chart} .scatterlayer .point').length") > 0
    # the frontier is a line whose points are labelled
    labels = browser.evaluate(
        "Array.from(document.querySelectorAll('#chart-latency .annotation-text')).map(function (t) { return t.textContent; })"
    )
    assert sum(1 for t in labels if t) >= 2
    assert mixed_quality_axes(browser) == []
    screenshot(browser, tmp_path, "frontier", "#view-frontier")
    screenshot(browser, tmp_path, "throughput_interactivity", "#view-tput")

    # Shape says what a point rests on: the prior-quality points are the open squares, never winners.
    squares = set(
        browser.evaluate("""(function () { var out = [];
        document.getElementById('chart-latency').data.forEach(function (t) {
          var s = t.marker.symbol; (t.customdata || []).forEach(function (c, i) {
            if ((Array.isArray(s) ? s[i] : s) === 'square-open') out.push(c); }); }); return out; })()""")
    )
    assert squares == set(pts.loc[pts["quality_provenance"].str.startswith("prior:"), "point_id"])
    assert not squares & set(answer.cells["point_id"])

    # Winners table: the open view's cells, in order, each on one line with a short evidence code.
    cells = answer.cells[answer.cells["model"] == SMALL]
    shown = browser.evaluate("""Array.from(document.querySelectorAll('#winners-body tr')).map(function (tr) {
        return [tr.dataset.regime, tr.dataset.hardware, tr.dataset.pointId, tr.cells[4].textContent, tr.cells[9].textContent]; })""")
    assert [s[:3] for s in shown] == [[r.regime, r.hardware, r.point_id] for r in cells.itertuples()]
    assert [s[3] for s in shown] == [r.label if r.point_id else "— none admitted" for r in cells.itertuples()]
    assert all(s[4].startswith("Q-") and " S-" in s[4] for s in shown if s[2])
    assert browser.evaluate("document.getElementById('evidence-legend').textContent").count("Q-") >= 5
    assert cells_over_three_lines(browser) == []
    # the paper's claims and the quality evidence are tables too: a long claim is clamped, whole on hover
    claim_cells = browser.evaluate(
        "Array.from(document.querySelectorAll('#claims-table td')).map(function (t) { return t.textContent; })"
    )
    assert claim_cells[0] == "fp8-winners" and claim_cells[3] == "differs"
    assert browser.evaluate("document.querySelectorAll('#claims-table td[title]').length") >= 2
    assert browser.evaluate("document.querySelectorAll('#quality-table tbody tr').length") == 2
    assert "0.94 [0.9, 0.98]" in browser.evaluate("document.getElementById('quality-table').textContent")

    # The regime map: rows regimes, columns this view's cards, plain units, no text out of its cell.
    heads = browser.evaluate(
        "Array.from(document.querySelectorAll('#regime-map th')).map(function (t) { return t.textContent; })"
    )
    assert heads[:4] == ["regime", EVIL_HW, "L4", "best card"] and "H100" not in heads
    figs = browser.evaluate(
        "Array.from(document.querySelectorAll('#regime-map .fig')).map(function (t) { return t.textContent; })"
    )
    assert figs and all(any(u in f for u in (" ms", "tok/s", "/Mtok", "× baseline")) for f in figs)
    assert not any("e+" in f for f in figs)
    assert grid_overflow(browser) == []
    screenshot(browser, tmp_path, "regime_map", "#view-regimes")

    # The malicious strings are text: no element was created from them, no script ran.
    assert browser.evaluate("document.querySelectorAll('img, #winners svg, iframe').length") == 0
    assert any(EVIL_LABEL == row[3] for row in shown)
    assert EVIL_HW in browser.evaluate("document.getElementById('winners').textContent")
    assert EVIL_LABEL in browser.evaluate("document.querySelector('details.facts').textContent")

    # Hover shows the configuration, its provenance, its load and its error bar.
    front = browser.evaluate("""(function () { var gd = document.getElementById('chart-latency');
        return gd.data.filter(function (t) { return t.name === 'frontier'; })[0].customdata; })()""")
    tip_id = front[len(front) // 2]
    tip = hover(browser, "chart-latency", tip_id)
    row = pts.set_index("point_id").loc[tip_id]
    assert f"configuration: {row['label']}" in tip and "load: 1 client" in tip and "rests on: quality " in tip
    assert "±" in tip or "(measured)" in tip
    # a projected point (resting on a prior) says the command that would confirm it
    prior_tip = hover(browser, "chart-latency", sorted(squares)[0])
    assert "to confirm: " in prior_tip and "pareto-atlas" in prior_tip.split("to confirm: ")[1]

    # A filter re-renders: one card leaves only its points and its rows (and the best-card ones).
    before = len(drawn_ids(browser, "chart-latency"))
    choose(browser, "f-hardware", "L4")
    l4 = set(pts.loc[(pts["model"] == SMALL) & (pts["hardware"] == "L4"), "point_id"])
    after = drawn_ids(browser, "chart-latency")
    assert after and set(after) <= l4 and len(after) < before
    hws = set(
        browser.evaluate(
            "Array.from(document.querySelectorAll('#winners-body tr')).map(function (t) { return t.dataset.hardware; })"
        )
    )
    assert hws == {"L4", "all"}
    choose(browser, "f-hardware", "all")

    # The big model's view: three quality levels, drawn as the guard's verdict; the 8-GPU layout is named.
    choose(browser, "f-view", browser.evaluate("document.getElementById('f-view').options[1].value"))
    assert set(drawn_ids(browser, "chart-latency")) <= set(pts.loc[pts["model"] == BIG, "point_id"])
    assert browser.evaluate("document.getElementById('chart-latency').dataset.y") == "verdict"
    assert browser.evaluate(
        "Array.from(document.querySelectorAll('#chart-latency .ytick text')).map(function (t) { return t.textContent; })"
    ) == ["out", "boundary", "in"]
    assert mixed_quality_axes(browser) == []
    multi = pts.loc[pts["model"].eq(BIG) & pts["tp"].eq(4), "point_id"].iloc[0]
    assert "layout: TP4 × 2 replicas, 8 × H100" in hover(browser, "chart-latency", multi)
    screenshot(browser, tmp_path, "frontier_verdict", "#view-frontier")

    # The comparison view draws both models, on the absolute score only.
    choose(browser, "f-view", browser.evaluate("document.getElementById('f-view').options[2].value"))
    assert browser.evaluate("getComputedStyle(document.getElementById('view-frontier')).display") == "none"
    cmp_models = set(pts.set_index("point_id").loc[drawn_ids(browser, "chart-compare"), "model"])
    assert cmp_models == {SMALL, BIG}
    assert "absolute" in browser.evaluate("document.querySelector('#chart-compare .ytitle').textContent")
    heads = browser.evaluate(
        "Array.from(document.querySelectorAll('#regime-map th')).map(function (t) { return t.textContent; })"
    )
    assert heads[:3] == ["regime", SMALL, BIG]  # the regime map's columns are the models here
    assert grid_overflow(browser) == []
    screenshot(browser, tmp_path, "compare", "#view-compare")
    screenshot(browser, tmp_path, "regime_map_models", "#view-regimes")
    screenshot(browser, tmp_path, "tables", "#view-tables")
    assert cells_over_three_lines(browser) == []
    assert browser.errors() == []

    # The rule can fail: a second model's points on a relative-quality chart are caught.
    choose(browser, "f-view", browser.evaluate("document.getElementById('f-view').options[0].value"))
    big_id = pts.loc[pts["model"] == BIG, "point_id"].iloc[0]
    browser.evaluate(
        f"""Plotly.addTraces('chart-latency', {{type: 'scatter', x: [1], y: [1], customdata: [{big_id!r}]}}).then(function () {{ return 1; }})"""
    )
    assert mixed_quality_axes(browser) == ["chart-latency"]
    # and so is a cell that wraps: a long unbreakable-free text in a narrow column
    browser.evaluate("""(function () { var tr = document.querySelector('#winners-body tr');
        tr.cells[2].textContent = 'word '.repeat(200); tr.cells[2].style.whiteSpace = 'normal'; })()""")
    assert cells_over_three_lines(browser)


def test_the_error_probe_itself_sees_console_errors_and_dialogs(browser, tmp_path):
    """Guard against a silent probe: a page that errs must be reported."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        "<!DOCTYPE html><body><script>console.error('boom'); document.body.setAttribute('data-ready','1');"
        "setTimeout(function () { throw new Error('late'); }, 0);</script></body>"
    )
    before = len(browser.errors())
    load(browser, bad)
    time.sleep(0.3)
    browser.evaluate("1")  # drain pending events
    new = browser.errors()[before:]
    assert any("boom" in e for e in new) and any("late" in e for e in new)
