"""Write the whole atlas for a points table: tables, winners, figures, the HTML page, exports."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from pareto_atlas.atlas.answer import Answer
from pareto_atlas.atlas.evidence import StudyRef
from pareto_atlas.atlas.objectives import DEFAULT_OBJECTIVES, Objective, with_derived
from pareto_atlas.atlas.prefix import move_lines
from pareto_atlas.atlas.regimes import Regime, admission, default_regimes
from pareto_atlas.atlas.summary import frontier_frequency, stacked_vs_single
from pareto_atlas.report import figures as F
from pareto_atlas.report.definitions import METRIC_DEFINITIONS, PERCENTILE_METHOD
from pareto_atlas.report.export import export_all, winners_markdown
from pareto_atlas.report.html import write_html
from pareto_atlas.report.regime_figure import fig_atlas_grid


def _regimes(regimes: Sequence[Regime | Mapping] | None, points: pd.DataFrame) -> tuple[Regime, ...]:
    if regimes is None:
        return default_regimes(points)
    return tuple(r if isinstance(r, Regime) else Regime.from_dict(r) for r in regimes)


def _guard(points: pd.DataFrame, regimes: Sequence[Regime]) -> tuple[np.ndarray, str, float] | None:
    """Each point's verdict under the first regime with a quality floor (the figures draw it where
    quality takes few values), with that regime's name and floor; None where no regime has a floor."""
    r = next((r for r in regimes if r.quality_floor is not None), None)
    if r is None or "quality_rel" not in points.columns:
        return None
    return admission(points, r)["guard"].astype(str).to_numpy(), r.name, float(r.quality_floor)


def build_report(
    points: pd.DataFrame,
    out_dir: Path,
    *,
    regimes: Sequence[Regime | Mapping] | None = None,
    fidelity: pd.DataFrame | None = None,
    meta: Mapping[str, object] | None = None,
    objectives: Sequence[str | Objective] = DEFAULT_OBJECTIVES,
    latency: str = "tpot_p99_ms",
    figures: bool = True,
    allow_priors: bool = False,
    study_ref: str | StudyRef = "default",
) -> dict[str, Path]:
    """Everything the atlas writes, under `out_dir`; returns {name: path}.

    `regimes`: Regime objects or study `[[regimes]]` dicts (None -> the four built-ins, thresholds
    from the points). `fidelity`: measured vs simulated at the anchors (long: metric, measured,
    simulated[, label, hardware]; or wide <metric>_measured/<metric>_simulated), None -> no figure.
    `meta`: stated on the page and in summary.json (title, study, engine, price_source, ...).
    `allow_priors`: let points resting only on priors win; else they are listed in projected.csv
    with the command that would measure them (`study_ref` names the study in it).
    """
    pts = with_derived(points)
    answer = Answer.of(
        pts, _regimes(regimes, pts), allow_priors=allow_priors, study_ref=study_ref, objectives=objectives
    )
    return write_report(answer, out_dir, fidelity=fidelity, meta=meta, latency=latency, figures=figures)


def write_report(
    answer: Answer,
    out_dir: Path,
    *,
    fidelity: pd.DataFrame | None = None,
    meta: Mapping[str, object] | None = None,
    latency: str = "tpot_p99_ms",
    figures: bool = True,
    claims: Sequence[Mapping] | None = None,
    quality_table: pd.DataFrame | None = None,
) -> dict[str, Path]:
    """`build_report` of an atlas already answered (atlas.answer): the page, the tables and the
    figures read its points, frontier marks, winners, boundary and projected cases. `claims`: the
    paper's claims table rows (report.claims) and `quality_table` the measured quality evidence
    (store.quality.arm_quality_table), shown on the page where given."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    meta = dict(meta or {})
    points, regs, objectives, allow_priors = answer.points, answer.regimes, answer.objectives, answer.allow_priors
    marked, per_hw, cells = answer.marked, answer.marked_per_hardware, answer.cells
    boundary, projected = answer.boundary, answer.projected
    freq = frontier_frequency(marked)
    svs = stacked_vs_single(marked)
    paths: dict[str, Path] = {}

    paths["frontier_csv"] = out_dir / "frontier.csv"
    marked.to_csv(paths["frontier_csv"], index=False)
    paths["boundary_csv"] = out_dir / "boundary_cases.csv"
    boundary.to_csv(paths["boundary_csv"], index=False)
    paths["projected_csv"] = out_dir / "projected.csv"
    projected.to_csv(paths["projected_csv"], index=False)
    paths["winners_json"] = out_dir / "winners.json"
    cells.to_json(paths["winners_json"], orient="records", indent=1)
    paths["winners_md"] = out_dir / "winners.md"
    paths["winners_md"].write_text(winners_markdown(cells), encoding="utf-8")
    if len(answer.prefix_moves):  # what prefix caching is worth, where a workload shares (atlas.prefix)
        paths["prefix_cache_csv"] = out_dir / "prefix_cache.csv"
        answer.prefix_moves.to_csv(paths["prefix_cache_csv"], index=False)

    counts = {r.kind: {"on_frontier": int(r.on_frontier), "total": int(r.total)} for r in svs.itertuples(index=False)}
    summary = {
        "meta": {k: v for k, v in meta.items() if isinstance(v, (str, int, float, bool)) or v is None},
        "objectives": [f"{Objective.parse(o).column}:{Objective.parse(o).direction}" for o in objectives],
        "regimes": [{"name": r.name, "description": r.describe()} for r in regs],
        "n_points": int(len(points)),
        "n_measured": int((points["provenance"] == "measured").sum()),
        "frontier_status": {k: int(v) for k, v in marked["frontier_status"].value_counts().items()},
        "raw_frontier": int(marked["raw_frontier"].sum()),
        "stacked_vs_single": counts,
        "frontier_frequency": freq.to_dict(orient="records"),
        "n_boundary_cases": int(len(boundary)),
        "n_projected": int(len(projected)),
        **({"prefix_cache": move_lines(answer.prefix_moves)} if len(answer.prefix_moves) else {}),
        "allow_priors": bool(allow_priors),
        "percentile_method": meta.get("percentile_method", PERCENTILE_METHOD),
        "definitions": METRIC_DEFINITIONS,
    }
    paths["summary_json"] = out_dir / "summary.json"
    paths["summary_json"].write_text(json.dumps(summary, indent=1, default=str), encoding="utf-8")

    if figures:
        fig_dir = out_dir / "figures"
        models = (
            points["model"].fillna("").astype(str) if "model" in points.columns else pd.Series("", index=points.index)
        )
        groups = list(dict.fromkeys(zip(models, points["workload"].astype(str))))
        for m, wl in groups:  # one set of frontier figures per (model, workload), as the frontier is
            sub = points[(models == m).to_numpy() & (points["workload"].astype(str) == wl).to_numpy()]
            sfx = f"__{F.slug(f'{m}__{wl}' if m else wl)}" if len(groups) > 1 else ""
            guard = _guard(sub, regs)
            made = {
                "frontier_quality_latency": F.fig_quality_latency(
                    sub, fig_dir, latency=latency, name=f"frontier_quality_latency{sfx}", guard=guard
                ),
                "frontier_cost_quality": F.fig_cost_quality(
                    sub, fig_dir, name=f"frontier_cost_quality{sfx}", guard=guard
                ),
                "frontier_per_hardware": F.fig_hardware_frontiers(
                    sub, fig_dir, latency=latency, name=f"frontier_per_hardware{sfx}"
                ),
                "constraint_winners": F.fig_constraint_winners(
                    sub, fig_dir, latency=latency, name=f"constraint_winners{sfx}"
                ),
            }
            for key, ps in made.items():
                for ext, p in ps.items():
                    paths[f"fig_{key}{sfx}_{ext}"] = p
        for key, ps in {
            "atlas_grid": fig_atlas_grid(cells, fig_dir),
            "frontier_frequency": F.fig_frontier_frequency(freq, fig_dir),
            "combos_vs_singles": F.fig_combos_vs_singles(svs, fig_dir),
            **(
                {"simulator_fidelity": F.fig_fidelity(fidelity, fig_dir)}
                if fidelity is not None and len(fidelity)
                else {}
            ),
        }.items():
            for ext, p in ps.items():
                paths[f"fig_{key}_{ext}"] = p

    paths["atlas_html"] = write_html(out_dir / "atlas.html", answer, meta, claims=claims, quality_table=quality_table)
    exports = export_all(
        {
            "points": points.reset_index(drop=True),
            "frontier": marked,
            "frontier_per_hardware": per_hw,
            "winners": cells,
            "boundary_cases": boundary,
            "projected": projected,
            "frontier_frequency": freq,
            "stacked_vs_single": svs,
        },
        out_dir / "exports",
    )
    paths.update({f"export_{k}": v for k, v in exports.items()})
    return paths
