"""The `atlas` and `pick` stages: read the points from the store, name the winners, print them."""

from __future__ import annotations

import math
from datetime import date

import pandas as pd
from rich.console import Console
from rich.table import Table

from pareto_atlas.atlas.pick import pick
from pareto_atlas.atlas.regimes import regimes_from_study
from pareto_atlas.atlas.winners import winners
from pareto_atlas.spec.study import Study
from pareto_atlas.store import Store
from pareto_atlas.store.points import all_points


class NothingToShow(ValueError):
    """The store holds no points for this study yet."""


def study_points(study: Study, store: Store) -> pd.DataFrame:
    points = all_points(study, store)
    if points.empty:
        raise NothingToShow(f"store {store.path} has no anchors or simulated points for study {study.name!r}; "
                            f"run `pareto-atlas measure` (or `build`) first")
    return points


def study_regimes(study: Study, points: pd.DataFrame):
    return regimes_from_study([r.model_dump(exclude_none=True) for r in study.regimes] or None, points,
                              quality_floor=study.quality.floor)


def _v(x, nd: int = 1) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def print_winners(cells: pd.DataFrame, console: Console, hardware: str = "all") -> None:
    t = Table(title=f"Dominant configuration per regime ({'all hardware' if hardware == 'all' else hardware})")
    for col in ("regime", "winner", "hardware", "provenance", "quality (rel)", "TPOT p99 ms", "tok/s", "$/Mtok", "note"):
        t.add_column(col)
    for _, c in cells[cells.hardware == hardware].iterrows():
        if not c.label:
            t.add_row(c.regime, "—", "", "", "", "", "", "", c.note or "")
            continue
        prov = c.provenance + ("" if c.provenance == "measured" else f" ±{_v(100 * (c.get('lat_rel_err') or 0), 0)}%"
                               if "lat_rel_err" in c else "")
        note = "stack beats every single" if c.stack_beats_singles else (c.note or "")
        t.add_row(c.regime, c.label, str(c.get("win_hardware", "")), prov,
                  f"{_v(c.quality_rel, 3)} ({c.quality_provenance})", _v(c.tpot_p99_ms), _v(c.throughput_tok_s),
                  _v(c.cost_per_mtok, 3), note)
    console.print(t)


def atlas_study(study: Study, store: Store, console: Console) -> pd.DataFrame:
    points = study_points(study, store)
    regs = study_regimes(study, points)
    cells = winners(points, regs)
    hw_of = dict(zip(points.point_id, points.hardware))
    cells["win_hardware"] = cells.point_id.map(hw_of).fillna("")
    n_meas = int((points.provenance == "measured").sum())
    console.print(f"[bold]atlas[/] {study.name}: {len(points)} points ({n_meas} measured, "
                  f"{len(points) - n_meas} simulated or prior), {len(regs)} regimes, "
                  f"quality floor {study.quality.floor:.0%} of the baseline arm '{study.baseline.name}'")
    print_winners(cells, console, "all")
    if "this-cpu" in set(cells.hardware):
        print_winners(cells, console, "this-cpu")
    return cells


def _prices(items: list[str]) -> dict[str, float]:
    out = {}
    for it in items:
        name, sep, val = it.partition("=")
        try:
            out[name.strip()] = float(val)
        except ValueError:
            sep = ""
        if not sep or out.get(name.strip(), 0) <= 0:
            raise ValueError(f"--price {it!r}: expected HARDWARE=DOLLARS_PER_HOUR, e.g. A100-80G-PCIe=2.085")
    return out


def pick_study(study: Study, store: Store, console: Console, constraint: str, objective: str, maximize: bool,
               prices: list[str]) -> None:
    points = study_points(study, store)
    price_map = _prices(prices)
    unknown = sorted(set(price_map) - set(points.hardware))
    if unknown:
        raise ValueError(f"--price {unknown[0]!r}: no points on that hardware; known: {', '.join(sorted(set(points.hardware)))}")
    res = pick(points, constraint or None, objective, direction="max" if maximize else None, prices=price_map,
               price_date=date.today().isoformat() if price_map else "", quality_floor=study.quality.floor)
    console.print(res.summary(), highlight=False)
    console.print(f"(answered in {res.elapsed_s * 1e3:.0f} ms from {len(points)} stored points; nothing re-measured)")
