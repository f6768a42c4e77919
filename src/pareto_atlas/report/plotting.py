"""How every figure draws its points: colour by frontier status, marker by provenance (measured anchors filled,
black-edged, larger), error bars, the legend, axis labels with units, and the PNG and SVG it saves."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib as mpl
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from pareto_atlas.atlas.objectives import UNITS, interval


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
    hs.append(
        Line2D(
            [],
            [],
            ls="",
            marker="o",
            markersize=8,
            markerfacecolor="white",
            markeredgecolor="black",
            markeredgewidth=1.5,
            label="measured anchor",
        )
    )
    hs.append(Line2D([], [], ls="", marker="^", color="#666", label="prior (literature)"))
    return hs


def scatter_points(ax, marked: pd.DataFrame, x: str, y: str, *, error_bars: bool = True) -> None:
    """Points coloured by frontier status; measured anchors filled and black-edged; frontier with error bars."""
    for status in ("excluded", "dominated", "tied", "frontier"):
        s = marked[marked["frontier_status"] == status]
        if s.empty:
            continue
        prov = s["provenance"].astype(str)
        for kind, edge, size, lw in (
            ("simulated", "none", 14, 0),
            ("prior", "none", 22, 0),
            ("measured", "black", 42, 1.3),
        ):
            t = s[prov == kind] if kind != "simulated" else s[~prov.isin(("measured", "prior"))]
            if t.empty:
                continue
            ax.scatter(
                t[x],
                t[y],
                s=size,
                c=STATUS_COLOR[status],
                edgecolors=edge,
                linewidths=lw,
                marker=PROV_MARKER[kind],
                zorder={"frontier": 4, "tied": 3}.get(status, 2),
                alpha=1.0 if status in ("frontier", "tied") else 0.6,
            )
        if error_bars and status == "frontier":
            xl, xh = interval(s, x)
            yl, yh = interval(s, y)
            xv, yv = s[x].to_numpy(float), s[y].to_numpy(float)
            ax.errorbar(
                xv,
                yv,
                xerr=[xv - xl, xh - xv],
                yerr=[yv - yl, yh - yv],
                fmt="none",
                ecolor=STATUS_COLOR["frontier"],
                elinewidth=0.7,
                alpha=0.5,
                zorder=3,
            )
