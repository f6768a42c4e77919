"""One self-contained interactive HTML atlas: offline, no CDN, every data string escaped.

Data travel as JSON inside <script type="application/json"> with <, > and & written as \\u
escapes (so no string can close the script element); the page's own JS renders them with
textContent. Static text written here goes through html.escape.
"""

from __future__ import annotations

import html
import json
import math
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from pareto_atlas.atlas.objectives import UNITS, quality_rel_interval
from pareto_atlas.atlas.regimes import Regime, admission
from pareto_atlas.report.definitions import METRIC_DEFINITIONS, PERCENTILE_METHOD

POINT_FIELDS = ("point_id", "label", "model", "hardware", "workload", "provenance", "quality_provenance", "frontier_status",
                "raw_frontier", "quality", "quality_rel", "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms",
                "e2e_p99_ms", "throughput_tok_s", "cost_per_mtok", "price_per_hour", "price_date", "lat_rel_err",
                "thr_rel_err", "n_opts", "optimizations", "mem_gb", "kld", "kld_lo", "kld_hi", "top1", "calib_provenance")
AXES = ("quality_rel", "tpot_p99_ms", "tpot_p50_ms", "ttft_p99_ms", "ttft_p50_ms", "e2e_p99_ms", "cost_per_mtok",
        "throughput_tok_s", "mem_gb")
MAX_POINTS = 5000
MAX_BOUNDARY = 300
MAX_PROJECTED = 200


def _clean(v: object) -> object:
    """JSON-safe scalars: numpy types unwrapped, NaN/inf -> null."""
    if isinstance(v, (np.generic,)):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if v is pd.NA or v is pd.NaT:
        return None
    return v


def _records(df: pd.DataFrame) -> list[dict]:
    cols = list(df.columns)
    return [{c: _clean(v) for c, v in zip(cols, row)} for row in df.itertuples(index=False, name=None)]


def embed_json(payload: object) -> str:
    """JSON safe inside a <script> element: no raw <, > or & anywhere in the text."""
    text = json.dumps(payload, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026") \
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _embedded_points(marked: pd.DataFrame, keep_ids: set[str], max_points: int) -> pd.DataFrame:
    """Every frontier, tied, measured, winning and listed point, plus a seeded sample of the rest."""
    must = marked["frontier_status"].isin(("frontier", "tied")) | (marked["provenance"] == "measured") \
        | marked["point_id"].astype(str).isin(keep_ids)
    rest = marked[~must]
    room = max(0, max_points - int(must.sum()))
    if len(rest) > room:
        rest = rest.sample(n=room, random_state=0)
    return pd.concat([marked[must], rest]).sort_index()


def page_payload(marked: pd.DataFrame, cells: pd.DataFrame, boundary: pd.DataFrame, regimes: list[Regime],
                 meta: dict, *, max_points: int = MAX_POINTS, projected: pd.DataFrame | None = None) -> dict:
    from pareto_atlas.atlas.evidence import evidence_label, evidence_ok

    bshow = boundary.assign(_o=(boundary["effect"] == "none").astype(int)).sort_values("_o", kind="stable") \
        .drop(columns="_o").head(MAX_BOUNDARY)
    keep = set(cells["point_id"].astype(str)) | set(bshow["point_id"].astype(str))
    pts = _embedded_points(marked, keep, max_points).copy()
    lo, hi = quality_rel_interval(pts)
    pts["quality_rel_lo"], pts["quality_rel_hi"] = lo, hi
    labels = dict(zip(marked["point_id"].astype(str), marked["label"].astype(str)))
    pts["dominated_by_label"] = pts.get("dominated_by", pd.Series("", index=pts.index)).astype(str).map(labels).fillna("")
    # what each point rests on: the marker's shape (measured / simulated / prior) and the tooltip's words
    pts["rests_on"] = np.where(pts["provenance"] == "measured", "measured",
                               np.where(evidence_ok(pts), "simulated", "prior"))
    pts["evidence"] = evidence_label(pts)
    fields = [c for c in (*POINT_FIELDS, "quality_rel_lo", "quality_rel_hi", "dominated_by_label", "rests_on", "evidence")
              if c in pts.columns]
    admitted = {}
    for r in regimes:
        a = admission(pts, r)["admitted"].to_numpy()
        admitted[r.name] = {str(pid): 1 for pid in pts.loc[a, "point_id"]}
    prices = (marked.groupby("hardware")[["price_per_hour", "price_date"]].first().reset_index())
    return {
        "points": _records(pts[fields]), "winners": _records(cells), "boundary": _records(bshow),
        "projected": _records(projected.head(MAX_PROJECTED)) if projected is not None else [],
        "projected_total": int(len(projected)) if projected is not None else 0,
        "boundary_total": int(len(boundary)), "admitted": admitted,
        "regimes": [{"name": r.name, "description": r.describe(), "objective": r.objective} for r in regimes],
        "axes": [a for a in AXES if a in marked.columns], "units": UNITS,
        "default_x": "tpot_p99_ms", "default_y": "quality_rel",
        "n_points_total": int(len(marked)), "n_points_drawn": int(len(pts)),
        "prices": _records(prices), "meta": {k: _clean(v) if not isinstance(v, (dict, list)) else v for k, v in meta.items()},
    }


def _static(regimes: list[Regime], meta: dict, prices: pd.DataFrame) -> dict[str, str]:
    e = html.escape
    defs = {**METRIC_DEFINITIONS, **meta.get("definitions", {})}
    dl = "".join(f"<dt>{e(str(k))}</dt><dd>{e(str(v))}</dd>" for k, v in defs.items())
    dl += f"<dt>Percentiles</dt><dd>{e(str(meta.get('percentile_method', PERCENTILE_METHOD)))}</dd>"
    regs = "".join(f"<li><b>{e(r.name)}</b>: {e(r.describe())}</li>" for r in regimes)
    price_rows = "".join(f"<tr><td>{e(str(h))}</td><td>${float(p):.4g}/h</td><td>{e(str(d))}</td></tr>"
                         for h, p, d in prices[["hardware", "price_per_hour", "price_date"]].itertuples(index=False))
    facts = [f"{e(str(k))}: {e(str(v))}" for k, v in meta.items() if k not in ("definitions", "title") and not isinstance(v, (dict, list))]
    return {"defs": dl, "regimes": regs, "prices": price_rows, "facts": " · ".join(facts)}


def render_html(marked: pd.DataFrame, cells: pd.DataFrame, boundary: pd.DataFrame, regimes: list[Regime],
                meta: dict | None = None, *, max_points: int = MAX_POINTS, projected: pd.DataFrame | None = None) -> str:
    """The whole page as one string (inline CSS, JS and data)."""
    meta = {"generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), **(meta or {})}
    payload = page_payload(marked, cells, boundary, list(regimes), meta, max_points=max_points, projected=projected)
    prices = marked.groupby("hardware")[["price_per_hour", "price_date"]].first().reset_index()
    s = _static(list(regimes), meta, prices)
    pkg = resources.files("pareto_atlas.report")
    css = (pkg / "atlas.css").read_text(encoding="utf-8")
    js = (pkg / "atlas.js").read_text(encoding="utf-8")
    title = html.escape(str(meta.get("title", "pareto-atlas")))
    n_meas = int((marked["provenance"] == "measured").sum())
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>{title}</title><style>{css}</style></head>
<body>
<h1>{title}</h1>
<p class="sub">Cost-quality-latency Pareto atlas. {len(marked)} configurations, {n_meas} measured anchors; the rest are
simulated by the calibrated simulator (with its error bar) or literature priors. {s['facts']}</p>
<div class="controls">
<label>x <select id="x-axis"></select></label>
<label>y <select id="y-axis"></select></label>
<label><input type="checkbox" id="log-x" checked> log x</label>
<label><input type="checkbox" id="clip-x" checked> frontier region</label>
<label>hardware <select id="f-hardware"></select></label>
<label>workload <select id="f-workload"></select></label>
<label>model <select id="f-model"></select></label>
<label>regime <select id="f-regime"></select></label>
</div>
<p class="legend"><span><i class="dot" style="background:#1f6fb4"></i>frontier</span><span><i class="dot" style="background:#e08a1e"></i>tied within error</span><span><i class="dot" style="background:#b8b8b8"></i>dominated</span><span>shape = what it rests on:</span><span><i class="dot measured"></i>measured (circle, black edge)</span><span><i class="dot"></i>simulated from evidence (circle)</span><span><i class="sq"></i>prior (square: quality or speed from the literature only)</span><span>red ring = regime winner</span></p>
<div id="scatter"></div>
<p class="note" id="drawn-count"></p>
<h2>Winner per regime</h2>
<ul>{s['regimes']}</ul>
<table id="winners"><thead><tr><th>regime</th><th>model</th><th>workload</th><th>hardware</th><th>winner</th><th>load</th><th>provenance</th><th>objective value [error]</th><th>quality_rel [95 %]</th><th>rests on (evidence)</th><th>stacked?</th><th>separated from runner-up?</th></tr></thead>
<tbody id="winners-body"></tbody></table>
<p class="note">Highlighted rows with a boxed winner: a stacked combination beats every single method in that cell. A winner needs evidence for its quality (measured, inherited from a measured arm, a measured effect, or a measured KL divergence) and its speed (measured or simulated, not a prior).</p>
<h2>Projected — measure to confirm</h2>
<p class="note" id="projected-note"></p>
<table id="projected"><thead><tr><th>regime</th><th>hardware</th><th>configuration</th><th>objective value</th><th>winner's value</th><th>quality_rel [95 %]</th><th>rests on</th><th>command that would confirm it</th></tr></thead>
<tbody id="projected-body"></tbody></table>
<h2>Boundary cases (quality interval straddles the floor)</h2>
<p class="note" id="boundary-note"></p>
<table id="boundary"><thead><tr><th>regime</th><th>hardware</th><th>configuration</th><th>provenance</th><th>quality_rel [95 % CI]</th><th>floor</th><th>verdict</th><th>effect</th></tr></thead>
<tbody id="boundary-body"></tbody></table>
<h2>Prices used for cost</h2>
<table id="prices"><thead><tr><th>hardware</th><th>price</th><th>price date</th></tr></thead><tbody>{s['prices']}</tbody></table>
<h2>Definitions</h2>
<dl id="definitions">{s['defs']}</dl>
<div id="tooltip" role="tooltip"></div>
<script type="application/json" id="atlas-data">{embed_json(payload)}</script>
<script>{js}</script>
</body></html>
"""


def write_html(path: Path, marked: pd.DataFrame, cells: pd.DataFrame, boundary: pd.DataFrame, regimes: list[Regime],
               meta: dict | None = None, *, projected: pd.DataFrame | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(marked, cells, boundary, regimes, meta, projected=projected), encoding="utf-8")
    return path
