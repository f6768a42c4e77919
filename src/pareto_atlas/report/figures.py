"""The paper's figures, as PNG and SVG, from a points table (contract 1) and the atlas tables.

Every figure marks measured anchors the same way (filled, black-edged, larger) and says in its
title which points are simulated. Built on matplotlib's object API (no pyplot, no global
backend state), so figures can be rendered from any thread or a headless CI box.
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from pareto_atlas.atlas.constraints import Constraint
from pareto_atlas.atlas.frontier import frontier_line, projection
from pareto_atlas.atlas.objectives import UNITS, interval
from pareto_atlas.atlas.pick import best_under
from pareto_atlas.atlas.question import Question

STATUS_COLOR = {"frontier": "#1f6fb4", "tied": "#e08a1e", "dominated": "#b8b8b8", "excluded": "#e6e6e6"}
PROV_MARKER = {"measured": "o", "simulated": "o", "prior": "^"}
SIM_NOTE = "unmarked points are simulated (calibrated simulator, ± error bar); black-edged = measured anchor"


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", str(text)).strip("-") or "x"


def axis_label(column: str) -> str:
    unit = UNITS.get(column, "")
    return f"{column} ({unit})" if unit else column


def save(fig: Figure, out_dir: Path, name: str) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    with mpl.rc_context({"svg.fonttype": "none", "svg.hashsalt": "pareto-atlas"}):
        for ext in ("png", "svg"):
            p = out_dir / f"{name}.{ext}"
            fig.savefig(p, dpi=130, bbox_inches="tight", metadata={"Date": None} if ext == "svg" else None)
            paths[ext] = p
    return paths


def _legend_handles(statuses: list[str]) -> list[Line2D]:
    hs = [Line2D([], [], ls="", marker="o", color=STATUS_COLOR[s], label=s) for s in statuses]
    hs.append(Line2D([], [], ls="", marker="o", markersize=8, markerfacecolor="white", markeredgecolor="black",
                     markeredgewidth=1.5, label="measured anchor"))
    hs.append(Line2D([], [], ls="", marker="^", color="#666", label="prior (literature)"))
    return hs


def scatter_points(ax, marked: pd.DataFrame, x: str, y: str, *, error_bars: bool = True) -> None:
    """Points coloured by frontier status; measured anchors filled and black-edged; frontier with error bars."""
    for status in ("excluded", "dominated", "tied", "frontier"):
        s = marked[marked["frontier_status"] == status]
        if s.empty:
            continue
        prov = s["provenance"].astype(str)
        for kind, edge, size, lw in (("simulated", "none", 14, 0), ("prior", "none", 22, 0), ("measured", "black", 42, 1.3)):
            t = s[prov == kind] if kind != "simulated" else s[~prov.isin(("measured", "prior"))]
            if t.empty:
                continue
            ax.scatter(t[x], t[y], s=size, c=STATUS_COLOR[status], edgecolors=edge, linewidths=lw,
                       marker=PROV_MARKER[kind], zorder={"frontier": 4, "tied": 3}.get(status, 2),
                       alpha=1.0 if status in ("frontier", "tied") else 0.6)
        if error_bars and status == "frontier":
            xl, xh = interval(s, x)
            yl, yh = interval(s, y)
            xv, yv = s[x].to_numpy(float), s[y].to_numpy(float)
            ax.errorbar(xv, yv, xerr=[xv - xl, xh - xv], yerr=[yv - yl, yh - yv], fmt="none",
                        ecolor=STATUS_COLOR["frontier"], elinewidth=0.7, alpha=0.5, zorder=3)


def _two_axis(points: pd.DataFrame, out_dir: Path, name: str, x: str, y: str, title: str, logx: bool) -> dict[str, Path]:
    marked = projection(points, x, y, by=(), dominators=False)     # the statuses are what a figure draws
    fig = Figure(figsize=(7.5, 5.0))
    ax = fig.add_subplot()
    scatter_points(ax, marked, x, y)
    line = frontier_line(points, x, y)
    if len(line):
        ax.step(line[x], line[y], where="post", color=STATUS_COLOR["frontier"], lw=1.2, zorder=1)
    drawn = marked[[x, y]].apply(pd.to_numeric, errors="coerce").dropna()
    if logx and (drawn[x] > 0).any():      # a table with no scored point draws nothing to log-scale
        ax.set_xscale("log")
    ax.set_xlabel(axis_label(x))
    ax.set_ylabel(axis_label(y))
    ax.set_title(f"{title}\n{SIM_NOTE}", fontsize=9)
    ax.legend(handles=_legend_handles(["frontier", "tied", "dominated"]), fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    return save(fig, out_dir, name)


def fig_quality_latency(points: pd.DataFrame, out_dir: Path, *, latency: str = "tpot_p99_ms", name: str = "frontier_quality_latency") -> dict[str, Path]:
    """Quality vs latency with the 2-D Pareto frontier; tied = not separable within error bars."""
    # log latency: a few slow configurations would otherwise squeeze the frontier into one column
    return _two_axis(points, out_dir, name, latency, "quality_rel", "Quality-latency frontier (all hardware)", True)


def fig_cost_quality(points: pd.DataFrame, out_dir: Path, *, name: str = "frontier_cost_quality") -> dict[str, Path]:
    return _two_axis(points, out_dir, name, "cost_per_mtok", "quality_rel", "Cost-quality frontier (all hardware)", True)


def fig_hardware_frontiers(points: pd.DataFrame, out_dir: Path, *, latency: str = "tpot_p99_ms", name: str = "frontier_per_hardware") -> dict[str, Path]:
    hws = sorted(pd.unique(points["hardware"].astype(str)))
    fig = Figure(figsize=(4.2 * max(1, len(hws)), 4.2))
    axes = fig.subplots(1, max(1, len(hws)), sharey=True, squeeze=False)[0]
    for ax, hw in zip(axes, hws):
        sub = points[points["hardware"].astype(str) == hw]
        scatter_points(ax, projection(sub, latency, "quality_rel", by=(), dominators=False), latency, "quality_rel")
        line = frontier_line(sub, latency, "quality_rel")
        if len(line):
            ax.step(line[latency], line["quality_rel"], where="post", color=STATUS_COLOR["frontier"], lw=1.2)
        ax.set_title(hw, fontsize=10)
        ax.set_xlabel(axis_label(latency))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(axis_label("quality_rel"))
    axes[0].legend(handles=_legend_handles(["frontier", "tied", "dominated"]), fontsize=7)
    fig.suptitle(f"Quality-latency frontier per hardware\n{SIM_NOTE}", fontsize=9)
    return save(fig, out_dir, name)


SHORT_OBJECTIVE = {"tpot_p99_ms": ("TPOT p99", "ms"), "tpot_p50_ms": ("TPOT p50", "ms"), "ttft_p99_ms": ("TTFT p99", "ms"),
                   "ttft_p50_ms": ("TTFT p50", "ms"), "e2e_p99_ms": ("E2E p99", "ms"), "e2e_p50_ms": ("E2E p50", "ms"),
                   "throughput_tok_s": ("", "tok/s"), "throughput_per_device_tok_s": ("", "tok/s/dev"),
                   "goodput_rps": ("goodput", "req/s"), "cost_per_mtok": ("$", "/Mtok"), "quality": ("score", ""),
                   "quality_rel": ("quality", "x base"), "mem_gb": ("", "GB")}


def _num(v: float) -> str:
    """A figure in at most 3 significant digits with a k/M suffix, never an exponent."""
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:.3g}M"
    if a >= 1e4:
        return f"{v / 1e3:.3g}k"
    return f"{v:.3g}"


def _wrap_label(label: str, width: int = 18) -> str:
    """A configuration label over two lines at a '+' when it is long (cells are narrow)."""
    if len(label) <= width or "+" not in label:
        return label
    parts = label.split("+")
    cut = max(1, min(range(1, len(parts)), key=lambda i: abs(len("+".join(parts[:i])) - len(label) / 2)))
    return "+".join(parts[:cut]) + "+\n" + "+".join(parts[cut:])


def fig_atlas_grid(cells: pd.DataFrame, out_dir: Path, *, name: str = "atlas_grid") -> dict[str, Path]:
    """Regime (per model and workload) x hardware; each cell names the winner, its objective in short
    with its unit and error; boxed where a stack beats every single method."""
    model = cells["model"].fillna("").astype(str) if "model" in cells.columns else pd.Series("", index=cells.index)
    rows = list(dict.fromkeys(zip(cells["regime"], model, cells["workload"])))
    multi = len({(m, w) for _, m, w in rows}) > 1
    cols = [h for h in dict.fromkeys(cells["hardware"]) if h != "all"] + ["all"]
    fig = Figure(figsize=(2.3 * len(cols) + 2.6, 0.95 * len(rows) + 1.4))
    ax = fig.add_subplot()
    ax.set_xlim(0, len(cols))
    ax.set_ylim(len(rows), 0)
    for i, (reg, m, wl) in enumerate(rows):
        for j, hw in enumerate(cols):
            c = cells[(cells["regime"] == reg) & (model == m) & (cells["workload"] == wl) & (cells["hardware"] == hw)]
            if c.empty:
                continue
            c = c.iloc[0]
            boxed = bool(c["stack_beats_singles"])
            won = bool(c["point_id"])
            face = "#dbe9f6" if won and c["provenance"] == "measured" else ("#f4f4f4" if won else "white")
            ax.add_patch(Rectangle((j + 0.04, i + 0.06), 0.92, 0.88, facecolor=face,
                                   edgecolor="black" if boxed else "#cccccc", lw=2.4 if boxed else 0.6))
            if won:
                what, unit = SHORT_OBJECTIVE.get(c["objective"], (c["objective"], ""))
                err = "" if c["provenance"] == "measured" else \
                    f" ±{_num(max(c['value'] - c['value_lo'], c['value_hi'] - c['value']))}"
                value = f"{what} {_num(c['value'])}{err} {unit}".strip() if what != "$" else f"${_num(c['value'])}{err}{unit}"
                text = f"{_wrap_label(str(c['label']))}\n{value}\n[{c['provenance']}]"
            else:
                text = "no admissible\nconfiguration"
            ax.text(j + 0.5, i + 0.5, text, ha="center", va="center", fontsize=6.5)
    ax.set_xticks(np.arange(len(cols)) + 0.5, cols, fontsize=8)
    ax.set_yticks(np.arange(len(rows)) + 0.5, [f"{r}\n{m}\n{w}" if multi else r for r, m, w in rows], fontsize=7)
    ax.tick_params(length=0)
    for s in ax.spines.values():
        s.set_visible(False)
    ax.xaxis.tick_top()
    ax.set_title("The atlas: winner per regime, model and workload, per card ('all': the best card; boxed: a stack\n"
                 "beats every single method; blue: winner measured, grey: simulated or prior; ± the calibrated error)",
                 fontsize=9, pad=28)
    return save(fig, out_dir, name)


def fig_frontier_frequency(freq: pd.DataFrame, out_dir: Path, *, name: str = "frontier_frequency") -> dict[str, Path]:
    fig = Figure(figsize=(6.5, 0.45 * max(3, len(freq)) + 1.2))
    ax = fig.add_subplot()
    f = freq.iloc[::-1]
    ax.barh(f["optimization"], f["configs"], color="#e3e3e3", label="configurations using it")
    ax.barh(f["optimization"], f["on_frontier"], color=STATUS_COLOR["frontier"], label="of which on the frontier")
    for y, (k, n) in enumerate(zip(f["on_frontier"], f["configs"])):
        ax.text(n, y, f" {k}/{n}", va="center", fontsize=8)
    ax.set_xlabel("configurations (rows of the points table)")
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title("How often each optimization appears on the raw Pareto frontier\n(measured anchors and simulated points together)", fontsize=9)
    return save(fig, out_dir, name)


def fig_combos_vs_singles(svs: pd.DataFrame, out_dir: Path, *, name: str = "combos_vs_singles") -> dict[str, Path]:
    fig = Figure(figsize=(5.5, 4.0))
    ax = fig.add_subplot()
    order = [k for k in ("baseline", "single", "stacked") if k in set(svs["kind"])]
    s = svs.groupby("kind")[["on_frontier", "total"]].sum().reindex(order)
    x = np.arange(len(order))
    ax.bar(x, s["total"], color="#e3e3e3", label="configurations")
    ax.bar(x, s["on_frontier"], color=STATUS_COLOR["frontier"], label="on the frontier")
    for xi, (k, n) in zip(x, zip(s["on_frontier"], s["total"])):
        ax.text(xi, n, f"{k} of {n}\n({k / n:.0%})" if n else "0", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, order)
    ax.set_ylabel("configurations")
    ax.legend(fontsize=7)
    ax.set_title("Single methods vs stacked combinations on the raw frontier\n(measured and simulated points)", fontsize=9)
    return save(fig, out_dir, name)


def fig_constraint_winners(points: pd.DataFrame, out_dir: Path, *, latency: str = "tpot_p99_ms", objective: str = "cost_per_mtok",
                           quality_floor: float = 0.95, steps: int = 12, name: str = "constraint_winners") -> dict[str, Path]:
    """The cheapest admissible configuration as the latency cap tightens; labels where the winner changes."""
    vals = points[latency].to_numpy(dtype=float, na_value=np.nan)
    vals = vals[np.isfinite(vals)]
    fig = Figure(figsize=(7.5, 4.5))
    ax = fig.add_subplot()
    if len(vals):
        caps = np.unique(np.quantile(vals, np.linspace(0.02, 1.0, steps)))
        xs, ys, provs, labels = [], [], [], []
        for cap in caps:
            r = best_under(points, Question.make([Constraint(latency, "<=", float(cap))], objective,
                                                 quality_floor=quality_floor), top=1)
            if r.winner is not None:
                xs.append(cap)
                ys.append(r.winner[objective])
                provs.append(r.winner["provenance"])
                labels.append(f"{r.winner['label']} @ {r.winner['hardware']}")
        ax.step(xs, ys, where="post", color=STATUS_COLOR["frontier"])
        for i, (x, y, p, lab) in enumerate(zip(xs, ys, provs, labels)):
            meas = p == "measured"
            ax.scatter([x], [y], s=40 if meas else 16, c=STATUS_COLOR["frontier"], edgecolors="black" if meas else "none", zorder=3)
            if i == 0 or lab != labels[i - 1]:
                ax.annotate(lab, (x, y), fontsize=6.5, rotation=20, xytext=(3, 4), textcoords="offset points")
    ax.set_xlabel(f"cap on {axis_label(latency)}")
    ax.set_ylabel(f"best {axis_label(objective)}")
    ax.set_title(f"Winner under a latency cap (quality_rel >= {quality_floor:g})\n{SIM_NOTE}", fontsize=9)
    ax.grid(alpha=0.3)
    return save(fig, out_dir, name)


def fidelity_long(fidelity: pd.DataFrame) -> pd.DataFrame:
    """Long form (metric, measured, simulated, label, hardware) from long or wide input.

    Wide input has column pairs `<metric>_measured` / `<metric>_simulated`.
    """
    if {"metric", "measured", "simulated"} <= set(fidelity.columns):
        return fidelity
    pairs = [c[: -len("_measured")] for c in fidelity.columns if c.endswith("_measured") and f"{c[:-9]}_simulated" in fidelity.columns]
    if not pairs:
        raise ValueError("fidelity: expected columns metric, measured, simulated (or <metric>_measured / <metric>_simulated pairs); "
                         f"got {', '.join(map(str, fidelity.columns))}")
    keep = [c for c in ("label", "hardware", "point_id") if c in fidelity.columns]
    parts = [fidelity[keep].assign(metric=m, measured=fidelity[f"{m}_measured"], simulated=fidelity[f"{m}_simulated"]) for m in pairs]
    return pd.concat(parts, ignore_index=True)


def fig_fidelity(fidelity: pd.DataFrame, out_dir: Path, *, name: str = "simulator_fidelity") -> dict[str, Path]:
    """Simulated vs measured for the same anchors, one panel per metric, with the y = x line."""
    long = fidelity_long(fidelity)
    metrics = list(dict.fromkeys(long["metric"]))
    fig = Figure(figsize=(4.0 * max(1, len(metrics)), 4.0))
    axes = fig.subplots(1, max(1, len(metrics)), squeeze=False)[0]
    for ax, m in zip(axes, metrics):
        s = long[long["metric"] == m]
        meas, sim = s["measured"].to_numpy(float), s["simulated"].to_numpy(float)
        ax.scatter(meas, sim, s=36, c=STATUS_COLOR["frontier"], edgecolors="black", linewidths=1.0, zorder=3)
        finite = np.isfinite(meas) & np.isfinite(sim)
        if finite.any():
            lo, hi = min(meas[finite].min(), sim[finite].min()), max(meas[finite].max(), sim[finite].max())
            ax.plot([lo, hi], [lo, hi], color="#777", lw=0.8, ls="--")
            err = np.median(np.abs(sim[finite] - meas[finite]) / np.abs(meas[finite]))
            ax.set_title(f"{m}: median |rel. error| {err:.1%} (n={int(finite.sum())})", fontsize=9)
        ax.set_xlabel(f"measured {m}")
        ax.set_ylabel(f"simulated {m}")
        ax.grid(alpha=0.3)
    fig.suptitle("Simulator fidelity: simulated vs measured at the anchors (dashed: y = x)", fontsize=9)
    return save(fig, out_dir, name)
