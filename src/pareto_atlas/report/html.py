"""One self-contained interactive HTML atlas: offline, no CDN, every data string escaped.

One view per (model, workload), chosen at the top; the charts are drawn by the bundled plotly.js
(report.bundle). Data travel as JSON inside <script type="application/json"> with <, > and &
written as \\u escapes (so no string can close the script element); the page's own JS renders
them with textContent. Static text written here goes through html.escape.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path

import pandas as pd

from pareto_atlas.atlas.answer import Answer
from pareto_atlas.atlas.prefix import move_lines
from pareto_atlas.report.bundle import plotly_js
from pareto_atlas.report.definitions import METRIC_DEFINITIONS, PERCENTILE_METHOD
from pareto_atlas.report.page_data import MAX_POINTS, page_payload


def embed_json(payload: object) -> str:
    """JSON safe inside a <script> element: no raw <, > or & anywhere in the text."""
    text = json.dumps(payload, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _static(answer: Answer, meta: dict) -> dict[str, str]:
    e = html.escape
    defs = {**METRIC_DEFINITIONS, **meta.get("definitions", {})}
    dl = "".join(f"<dt>{e(str(k))}</dt><dd>{e(str(v))}</dd>" for k, v in defs.items())
    dl += f"<dt>Percentiles</dt><dd>{e(str(meta.get('percentile_method', PERCENTILE_METHOD)))}</dd>"
    regs = "".join(f"<li><b>{e(r.name)}</b>: {e(r.describe())}</li>" for r in answer.regimes)
    prices = answer.points.groupby("hardware")[["price_per_hour", "price_date"]].first().reset_index()
    price_rows = "".join(
        f"<tr><td>{e(str(h))}</td><td>${float(p):.4g}/h</td><td>{e(str(d))}</td></tr>"
        for h, p, d in prices[["hardware", "price_per_hour", "price_date"]].itertuples(index=False)
    )
    facts = [
        f"{e(str(k))}: {e(str(v))}"
        for k, v in meta.items()
        if k not in ("definitions", "title") and not isinstance(v, (dict, list))
    ]
    moves = answer.prefix_moves
    prefix = (
        "<h2>What prefix caching is worth</h2><ul class=\"regimes\">"
        + "".join(f"<li>{e(line.strip())}</li>" for line in move_lines(moves))
        + "</ul>"
        if len(moves)
        else ""
    )
    return {"defs": dl, "regimes": regs, "prices": price_rows, "facts": " · ".join(facts), "prefix": prefix}


def render_html(
    answer: Answer,
    meta: dict | None = None,
    *,
    max_points: int = MAX_POINTS,
    claims: Sequence[dict] | None = None,
    quality_table: pd.DataFrame | None = None,
) -> str:
    """The whole page as one string (inline CSS, JS, plotly.js and data)."""
    meta = {"generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), **(meta or {})}
    payload = page_payload(answer, meta, max_points=max_points, claims=claims, quality_table=quality_table)
    s = _static(answer, meta)
    pkg = resources.files("pareto_atlas.report")
    css = (pkg / "atlas.css").read_text(encoding="utf-8")
    js = (pkg / "atlas.js").read_text(encoding="utf-8")
    title = html.escape(str(meta.get("title", "pareto-atlas")))
    n_meas = int((answer.points["provenance"] == "measured").sum())
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data: blob:; font-src data:">
<title>{title}</title><style>{css}</style></head>
<body>
<h1>{title}</h1>
<p class="sub">Cost-quality-latency Pareto atlas. {len(answer.points)} configurations, {n_meas} measured anchors; the rest are
simulated by the calibrated simulator (with its error bar) or rest on literature priors.</p>
<details class="facts"><summary>What this atlas rests on</summary><p class="sub">{s['facts']}</p></details>
<header>
<div class="controls">
<label class="view-pick">view <select id="f-view"></select></label>
<label>card <select id="f-hardware"></select></label>
<label>regime <select id="f-regime"></select></label>
<label>latency <select id="f-latency"></select></label>
<label><input type="checkbox" id="f-priors" checked> show points resting on priors</label>
</div>
<p class="note" id="view-note"></p>
</header>
<section id="view-frontier" class="view">
<h2>Frontier: quality against latency and against cost</h2>
<p class="note">Colour: card. Shape: what a point rests on (◆ measured, ● simulated from evidence, □ prior: projected).
The line joins the frontier points that can win (labelled, with error bars); the dotted line counts
the projected points resting on priors too; faint points are dominated. Drag to zoom, double-click to reset.</p>
<div class="pair"><div id="chart-latency" class="chart"></div><div id="chart-cost" class="chart"></div></div>
<p class="note" id="drawn-count"></p>
</section>
<section id="view-tput" class="view">
<h2>Throughput per GPU against throughput per user</h2>
<p class="note">Each card's curve is its frontier (no configuration of that card is faster for one user and for the GPU at once); ★ marks a regime winner.</p>
<div id="chart-tput" class="chart wide"></div>
</section>
<section id="view-compare" class="view">
<h2>Models compared on the task's absolute score</h2>
<p class="note">Several models answer this workload: each is drawn on the task's own score (not relative to a baseline, which differs per model).</p>
<div id="chart-compare" class="chart wide"></div>
</section>
<section id="view-regimes" class="view">
<h2>Regime map: the winner per regime and card</h2>
<ul class="regimes">{s['regimes']}</ul>
<div class="scroll"><table id="regime-map"></table></div>
<p class="note">A boxed cell: a stacked combination beats every single method there. Cards with no configuration in this view are left out.</p>
</section>
<section id="view-tables" class="view">
<h2>Winners</h2>
<table id="winners"><thead><tr><th>regime</th><th>model</th><th>workload</th><th>card</th><th>winner</th><th>layout</th><th>load</th><th>objective [error]</th><th>quality_rel [95 %]</th><th>evidence</th><th>stack</th><th>separated</th></tr></thead>
<tbody id="winners-body"></tbody></table>
<p class="legend" id="evidence-legend"></p>
{s['prefix']}
<h2>Quality evidence</h2>
<p class="note" id="quality-note"></p>
<div class="scroll"><table id="quality-table"></table></div>
<div id="claims-block"><h2>The paper's claims, claim by claim</h2>
<div class="scroll"><table id="claims-table"></table></div></div>
<h2>Projected — measure to confirm</h2>
<p class="note" id="projected-note"></p>
<table id="projected"><thead><tr><th>regime</th><th>card</th><th>configuration</th><th>objective</th><th>winner's</th><th>quality_rel [95 %]</th><th>evidence</th><th>command that would confirm it</th></tr></thead>
<tbody id="projected-body"></tbody></table>
<h2>Boundary cases (quality interval straddles the floor)</h2>
<p class="note" id="boundary-note"></p>
<table id="boundary"><thead><tr><th>regime</th><th>card</th><th>configuration</th><th>provenance</th><th>quality_rel [95 % CI]</th><th>floor</th><th>effect</th></tr></thead>
<tbody id="boundary-body"></tbody></table>
<h2>Prices used for cost</h2>
<table id="prices"><thead><tr><th>card</th><th>price</th><th>price date</th></tr></thead><tbody>{s['prices']}</tbody></table>
<h2>Definitions</h2>
<dl id="definitions">{s['defs']}</dl>
</section>
<div id="tooltip" role="tooltip"></div>
<script type="application/json" id="atlas-data">{embed_json(payload)}</script>
<script>{plotly_js()}</script>
<script>{js}</script>
</body></html>
"""


def write_html(
    path: Path,
    answer: Answer,
    meta: dict | None = None,
    *,
    claims: Sequence[dict] | None = None,
    quality_table: pd.DataFrame | None = None,
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(answer, meta, claims=claims, quality_table=quality_table), encoding="utf-8")
    return path
