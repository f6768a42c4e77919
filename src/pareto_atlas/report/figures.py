"""The paper's figures, as PNG and SVG, from a points table (contract 1) and the atlas tables.

Every figure marks measured anchors the same way (filled, black-edged, larger) and says in its
title which points are simulated. Built on matplotlib's object API (no pyplot, no global
backend state), so figures can be rendered from any thread or a headless CI box.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from pareto_atlas.atlas.constraints import Constraint
from pareto_atlas.atlas.frontier import frontier_line, projection
from pareto_atlas.atlas.pick import best_under
from pareto_atlas.atlas.question import Question
from pareto_atlas.report.plotting import STATUS_COLOR, SIM_NOTE, axis_label, save, _legend_handles, scatter_points
from pareto_atlas.report.plotting import (
    PROV_MARKER as PROV_MARKER,
    slug as slug,
)  # re-exported: importable from here as before


VERDICTS = ("out", "boundary", "in")


def _verdict_axis(
    points: pd.DataFrame,
    out_dir: Path,
    name: str,
    x: str,
    title: str,
    guard: np.ndarray,
    regime_name: str,
    floor: float,
) -> dict[str, Path]:
    """Quality as the guard's verdict (in / boundary / out) against x, where quality takes so few
    values that a continuous axis would show three rows of dots: colour by card, the frontier of
    (lower x, better verdict) as a labelled staircase."""
    rank = pd.Series(guard).map({v: i for i, v in enumerate(VERDICTS)}).fillna(0).to_numpy(dtype=float)
    xv = points[x].to_numpy(dtype=float, na_value=np.nan)
    ok = np.isfinite(xv) & (xv > 0)
    fig = Figure(figsize=(7.5, 4.6))
    ax = fig.add_subplot()
    jitter = (np.arange(len(points)) * 0.6180339887 % 1.0 - 0.5) * 0.4
    cards = sorted(pd.unique(points["hardware"].astype(str)))
    colors = mpl.colormaps["tab10"]
    prov = points["provenance"].astype(str).to_numpy()
    for k, hw in enumerate(cards):
        m = ok & (points["hardware"].astype(str).to_numpy() == hw)
        for kind, marker, size in (("prior", "s", 10), ("simulated", "o", 10), ("measured", "D", 30)):
            mk = m & ((prov == kind) if kind != "simulated" else ~np.isin(prov, ("measured", "prior")))
            if mk.any():
                ax.scatter(
                    xv[mk],
                    rank[mk] + jitter[mk],
                    s=size,
                    marker=marker,
                    color=colors(k % 10),
                    alpha=0.35,
                    edgecolors="black" if kind == "measured" else "none",
                    linewidths=0.8,
                    label=f"{hw} · {kind}",
                )
    order = np.lexsort((-rank[ok], xv[ok]))
    idx = np.flatnonzero(ok)[order]
    best, line = -1.0, []
    for i in idx:
        if rank[i] > best:
            line.append(i)
            best = rank[i]
    if line:
        lx, ly = xv[line], rank[line]
        ax.step(lx, ly, where="post", color="#222", lw=1.2, zorder=5)
        ax.scatter(lx, ly, s=40, color="#222", zorder=6)
        label_frontier(
            ax, pd.DataFrame({x: lx, "v": ly, "label": points["label"].astype(str).to_numpy()[line]}), x, "v"
        )
    ax.set_xscale("log")
    ax.set_yticks(range(len(VERDICTS)), VERDICTS)
    ax.set_ylim(-0.6, 2.6)
    ax.set_xlabel(axis_label(x))
    ax.set_ylabel(f"quality guard of {regime_name} (floor {floor:g})")
    n = points["quality_rel"].round(3).nunique()
    ax.set_title(
        f"{title}{view_title(points)}\nquality takes {n} value{'s' if n != 1 else ''}: "
        "drawn as the guard's verdict on its 95 % interval",
        fontsize=9,
    )
    ax.legend(fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, frameon=False)
    ax.grid(alpha=0.3)
    return save(fig, out_dir, name)


def _two_axis(
    points: pd.DataFrame,
    out_dir: Path,
    name: str,
    x: str,
    y: str,
    title: str,
    logx: bool,
    guard: tuple[np.ndarray, str, float] | None = None,
) -> dict[str, Path]:
    if guard is not None and y == "quality_rel" and points["quality_rel"].round(3).nunique() <= 4:
        return _verdict_axis(points, out_dir, name, x, title, *guard)
    marked = projection(points, x, y, by=(), dominators=False)  # the statuses are what a figure draws
    fig = Figure(figsize=(7.5, 5.0))
    ax = fig.add_subplot()
    scatter_points(ax, marked, x, y)
    line = frontier_line(points, x, y)
    if len(line):
        ax.step(line[x], line[y], where="post", color=STATUS_COLOR["frontier"], lw=1.2, zorder=1)
    drawn = marked[[x, y]].apply(pd.to_numeric, errors="coerce").dropna()
    if logx and (drawn[x] > 0).any():  # a table with no scored point draws nothing to log-scale
        ax.set_xscale("log")
    label_frontier(ax, line, x, y)
    ax.set_xlabel(axis_label(x))
    ax.set_ylabel(axis_label(y))
    ax.set_title(f"{title}{view_title(points)}\n{SIM_NOTE}", fontsize=9)
    ax.legend(handles=_legend_handles(["frontier", "tied", "dominated"]), fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    return save(fig, out_dir, name)


def view_title(points: pd.DataFrame) -> str:
    """ ": model · workload" where the table is one (model, workload) view."""
    parts = [
        str(points[c].iloc[0])
        for c in ("model", "workload")
        if c in points.columns and len(points) and points[c].nunique() == 1 and str(points[c].iloc[0])
    ]
    return ": " + " · ".join(parts) if parts else ""


def label_frontier(ax, line: pd.DataFrame, x: str, y: str, *, most: int = 8) -> None:
    """Name the frontier points that have room: at most `most`, each at least ~8 % of the axes from
    the last named one (in the axes' own scale, log or linear), the label cut at 26 characters."""
    if not len(line) or "label" not in line.columns:
        return
    to_axes = ax.transData + ax.transAxes.inverted()
    ax.figure.canvas.draw_idle()
    named: list[tuple[float, float]] = []
    for _, r in line.iterrows():
        try:
            u, v = to_axes.transform((float(r[x]), float(r[y])))
        except (TypeError, ValueError):
            continue
        if not (np.isfinite(u) and np.isfinite(v)) or any(abs(u - a) < 0.08 and abs(v - b) < 0.08 for a, b in named):
            continue
        named.append((u, v))
        text = str(r["label"]) if len(str(r["label"])) <= 26 else str(r["label"])[:25] + "…"
        ax.annotate(
            text,
            (float(r[x]), float(r[y])),
            fontsize=6.5,
            xytext=(4, -9 if len(named) % 2 else 4),
            textcoords="offset points",
            ha="left" if u < 0.7 else "right",
            color="#123",
            zorder=6,
            annotation_clip=True,
        )
        if len(named) >= most:
            break


def fig_quality_latency(
    points: pd.DataFrame,
    out_dir: Path,
    *,
    latency: str = "tpot_p99_ms",
    name: str = "frontier_quality_latency",
    guard: tuple[np.ndarray, str, float] | None = None,
) -> dict[str, Path]:
    """Quality vs latency with the 2-D Pareto frontier; tied = not separable within error bars.
    `guard`: (each point's verdict, the regime's name, its floor), drawn instead of quality_rel
    where quality takes at most 4 values."""
    # log latency: a few slow configurations would otherwise squeeze the frontier into one column
    return _two_axis(
        points, out_dir, name, latency, "quality_rel", "Quality-latency frontier (all hardware)", True, guard
    )


def fig_cost_quality(
    points: pd.DataFrame,
    out_dir: Path,
    *,
    name: str = "frontier_cost_quality",
    guard: tuple[np.ndarray, str, float] | None = None,
) -> dict[str, Path]:
    return _two_axis(
        points, out_dir, name, "cost_per_mtok", "quality_rel", "Cost-quality frontier (all hardware)", True, guard
    )


def fig_hardware_frontiers(
    points: pd.DataFrame, out_dir: Path, *, latency: str = "tpot_p99_ms", name: str = "frontier_per_hardware"
) -> dict[str, Path]:
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
        if note := card_note(sub):
            ax.text(0.5, 0.5, note, transform=ax.transAxes, ha="center", va="center", fontsize=7, wrap=True)
        ax.set_xlabel(axis_label(latency))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(axis_label("quality_rel"))
    axes[0].legend(handles=_legend_handles(["frontier", "tied", "dominated"]), fontsize=7)
    fig.suptitle(f"Quality-latency frontier per hardware\n{SIM_NOTE}", fontsize=9, y=1.04)
    return save(fig, out_dir, name)


def card_note(points: pd.DataFrame) -> str:
    """What a card's panel must say beside its points: why it has none (every configuration infeasible:
    the reason that ruled out most, atlas.infeasible), or that its speed rests on no calibration (an
    uncalibrated card's points are not the calibrated simulator SIM_NOTE speaks of)."""
    from textwrap import fill

    from pareto_atlas.atlas.evidence import speed_evidence
    from pareto_atlas.atlas.infeasible import infeasible_summary

    feasible = points["feasible"].fillna(True).astype(bool) if "feasible" in points else pd.Series(True, points.index)
    if not feasible.any():
        why = [f"{n} × {r}" for inf in infeasible_summary(points) for r, n in inf.reasons[:2]]
        return "no feasible configuration:\n" + "\n".join(fill(w, 44) for w in why)
    speed = set(speed_evidence(points[feasible.to_numpy()]))
    words = {"uncalibrated": "uncalibrated (default efficiencies)", "prior": "projected (no fit here): never a winner"}
    if speed and speed <= set(words):
        return "speed on this card:\n" + "\n".join(words[s] for s in sorted(speed))
    return ""


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
    ax.set_title(
        "How often each optimization appears on the raw Pareto frontier\n(measured anchors and simulated points together)",
        fontsize=9,
    )
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
    ax.set_title(
        "Single methods vs stacked combinations on the raw frontier\n(measured and simulated points)", fontsize=9
    )
    return save(fig, out_dir, name)


def fig_constraint_winners(
    points: pd.DataFrame,
    out_dir: Path,
    *,
    latency: str = "tpot_p99_ms",
    objective: str = "cost_per_mtok",
    quality_floor: float = 0.95,
    steps: int = 12,
    name: str = "constraint_winners",
) -> dict[str, Path]:
    """The cheapest admissible configuration as the latency cap tightens; labels where the winner changes."""
    vals = points[latency].to_numpy(dtype=float, na_value=np.nan)
    vals = vals[np.isfinite(vals)]
    fig = Figure(figsize=(7.5, 4.5))
    ax = fig.add_subplot()
    if len(vals):
        caps = np.unique(np.quantile(vals, np.linspace(0.02, 1.0, steps)))
        xs, ys, provs, labels = [], [], [], []
        for cap in caps:
            r = best_under(
                points,
                Question.make([Constraint(latency, "<=", float(cap))], objective, quality_floor=quality_floor),
                top=1,
            )
            if r.winner is not None:
                xs.append(cap)
                ys.append(r.winner[objective])
                provs.append(r.winner["provenance"])
                labels.append(f"{r.winner['label']} @ {r.winner['hardware']}")
        ax.step(xs, ys, where="post", color=STATUS_COLOR["frontier"])
        for i, (x, y, p, lab) in enumerate(zip(xs, ys, provs, labels)):
            meas = p == "measured"
            ax.scatter(
                [x],
                [y],
                s=40 if meas else 16,
                c=STATUS_COLOR["frontier"],
                edgecolors="black" if meas else "none",
                zorder=3,
            )
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
    pairs = [
        c[: -len("_measured")]
        for c in fidelity.columns
        if c.endswith("_measured") and f"{c[:-9]}_simulated" in fidelity.columns
    ]
    if not pairs:
        raise ValueError(
            "fidelity: expected columns metric, measured, simulated (or <metric>_measured / <metric>_simulated pairs); "
            f"got {', '.join(map(str, fidelity.columns))}"
        )
    keep = [c for c in ("label", "hardware", "point_id") if c in fidelity.columns]
    parts = [
        fidelity[keep].assign(metric=m, measured=fidelity[f"{m}_measured"], simulated=fidelity[f"{m}_simulated"])
        for m in pairs
    ]
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
