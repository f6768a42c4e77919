"""The regime map as a static figure (PNG + SVG): one panel per (model, workload), rows regimes,
columns the cards that answer for it; each cell the winner and its objective in plain units."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from pareto_atlas.report.figures import save

SHORT_OBJECTIVE = {
    "tpot_p99_ms": ("TPOT p99", "ms"),
    "tpot_p50_ms": ("TPOT p50", "ms"),
    "ttft_p99_ms": ("TTFT p99", "ms"),
    "ttft_p50_ms": ("TTFT p50", "ms"),
    "e2e_p99_ms": ("E2E p99", "ms"),
    "e2e_p50_ms": ("E2E p50", "ms"),
    "throughput_tok_s": ("", "tok/s"),
    "throughput_per_device_tok_s": ("", "tok/s/GPU"),
    "goodput_rps": ("goodput", "req/s"),
    "cost_per_mtok": ("$", "/Mtok"),
    "quality": ("score", ""),
    "quality_rel": ("quality", "x base"),
    "mem_gb": ("", "GB"),
}


def _num(v: float) -> str:
    """A figure in plain units: 5,840 above a thousand, else 3 significant digits; never an exponent."""
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100 or a == 0:
        return f"{v:.0f}"
    return f"{v:.3g}" if a >= 0.001 else f"{v:.2e}"


def _wrap_label(label: str, width: int = 18) -> str:
    """A configuration label over two lines at a '+' when it is long (cells are narrow)."""
    if len(label) <= width or "+" not in label:
        return label
    parts = label.split("+")
    cut = max(1, min(range(1, len(parts)), key=lambda i: abs(len("+".join(parts[:i])) - len(label) / 2)))
    return "+".join(parts[:cut]) + "+\n" + "+".join(parts[cut:])


def fig_atlas_grid(cells: pd.DataFrame, out_dir: Path, *, name: str = "atlas_grid") -> dict[str, Path]:
    """The regime map: one panel per (model, workload), rows regimes, columns the cards that answer
    for it (and 'all', the best card); each cell names the winner and its objective in plain units
    with its error; boxed where a stack beats every single method. A card with no configuration of
    a (model, workload) is left out of its panel, not drawn empty."""
    model = cells["model"].fillna("").astype(str) if "model" in cells.columns else pd.Series("", index=cells.index)
    groups = list(dict.fromkeys(zip(model, cells["workload"].astype(str))))
    panels = []
    for m, wl in groups:
        sub = cells[(model == m).to_numpy() & (cells["workload"].astype(str) == wl).to_numpy()]
        regs = list(dict.fromkeys(sub["regime"]))
        # a card whose every cell found no candidate holds no configuration of this view
        held = sub[sub["n_candidates"].fillna(0) > 0] if "n_candidates" in sub.columns else sub
        cols = [h for h in dict.fromkeys(sub["hardware"]) if h != "all" and h in set(held["hardware"])]
        cols = cols + ["all"] if len(cols) > 1 else (cols or ["all"])
        panels.append((m, wl, sub, regs, cols))
    width = max(len(p[4]) for p in panels) if panels else 1
    heights = [len(p[3]) + 0.9 for p in panels] or [1]
    fig = Figure(figsize=(2.4 * width + 2.2, 0.9 * sum(heights) + 1.2))
    axes = fig.subplots(len(panels) or 1, 1, squeeze=False, gridspec_kw={"height_ratios": heights})[:, 0]
    for ax, (m, wl, sub, regs, cols) in zip(axes, panels):
        ax.set_xlim(0, width)
        ax.set_ylim(len(regs), 0)
        for i, reg in enumerate(regs):
            for j, hw in enumerate(cols):
                c = sub[(sub["regime"] == reg) & (sub["hardware"] == hw)]
                if c.empty:
                    continue
                c = c.iloc[0]
                boxed, won = bool(c["stack_beats_singles"]), bool(c["point_id"])
                face = "#dbe9f6" if won and c["provenance"] == "measured" else ("#f4f4f4" if won else "white")
                ax.add_patch(
                    Rectangle(
                        (j + 0.04, i + 0.06),
                        0.92,
                        0.88,
                        facecolor=face,
                        edgecolor="black" if boxed else "#cccccc",
                        lw=2.4 if boxed else 0.6,
                    )
                )
                if won:
                    what, unit = SHORT_OBJECTIVE.get(c["objective"], (c["objective"], ""))
                    err = (
                        ""
                        if c["provenance"] == "measured"
                        else f" ±{_num(max(c['value'] - c['value_lo'], c['value_hi'] - c['value']))}"
                    )
                    value = (
                        f"{what} {_num(c['value'])}{err} {unit}".strip()
                        if what != "$"
                        else f"${_num(c['value'])}{err}{unit}"
                    )
                    text = f"{_wrap_label(str(c['label']))}\n{value}\n[{c['provenance']}]"
                else:
                    text = "no admissible\nconfiguration"
                ax.text(j + 0.5, i + 0.5, text, ha="center", va="center", fontsize=6.5, clip_on=True)
        ax.set_xticks(np.arange(len(cols)) + 0.5, cols, fontsize=8)
        ax.set_yticks(np.arange(len(regs)) + 0.5, regs, fontsize=7)
        ax.tick_params(length=0)
        for sp in ax.spines.values():
            sp.set_visible(False)
        ax.xaxis.tick_top()
        ax.set_title(" · ".join(x for x in (m, wl) if x), fontsize=8.5, loc="left", pad=16)
    fig.suptitle(
        "The atlas: winner per regime and card ('all': the best card; boxed: a stack beats every single\n"
        "method; blue: winner measured, grey: simulated or prior; ± the calibrated error)",
        fontsize=9,
        y=1.04,
    )
    return save(fig, out_dir, name)
