"""The `atlas` and `pick` stages: read the points from the store, name the winners, print them."""

from __future__ import annotations

import math
from datetime import date

import pandas as pd
from rich.console import Console
from rich.table import Table

from pareto_atlas.atlas.evidence import StudyRef
from pareto_atlas.atlas.objectives import with_derived
from pareto_atlas.atlas.pick import pick
from pareto_atlas.atlas.regimes import regimes_from_study
from pareto_atlas.atlas.winners import winners
from pareto_atlas.spec.study import Study, study_ref
from pareto_atlas.store import Store
from pareto_atlas.store.points import all_points


class NothingToShow(ValueError):
    """The store holds no points for this study yet."""


def study_points(study: Study, store: Store) -> pd.DataFrame:
    points = with_derived(all_points(study, store))
    if points.empty:
        raise NothingToShow(f"store {store.path} has no anchors or simulated points for study {study.name!r}; "
                            f"run `pareto-atlas measure` (or `build`) first")
    return points


def study_regimes(study: Study, points: pd.DataFrame):
    return regimes_from_study([r.model_dump(exclude_none=True) for r in study.regimes] or None, points,
                              quality_floor=study.quality.floor, kld_max=study.quality.kld_max)


def confirm_ref(study: Study) -> StudyRef:
    """How confirm commands name this study and its arms (by quality key, the baseline first)."""
    arms: dict[str, str] = {}
    for a in sorted(study.arms, key=lambda a: a.name != study.baseline.name):
        arms.setdefault(a.knobs().quality_key(), a.name)
    return StudyRef(study_ref(study), arms)


def study_winners(study: Study, points: pd.DataFrame, regs=None) -> pd.DataFrame:
    """The regime winners of a study's points, under its quality guard and evidence rule."""
    regs = regs if regs is not None else study_regimes(study, points)
    return winners(points, regs, allow_priors=study.quality.allow_priors, study_ref=confirm_ref(study))


def _v(x, nd: int = 1) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def print_winners(cells: pd.DataFrame, console: Console, hardware: str = "all") -> None:
    t = Table(title=f"Dominant configuration per regime ({'all hardware' if hardware == 'all' else hardware})")
    for col in ("regime", "winner", "hardware", "speed", "quality (rel) [95 %]", "rests on", "TPOT p99 ms", "tok/s",
                "$/Mtok", "note"):
        t.add_column(col)
    projected = []
    for _, c in cells[cells.hardware == hardware].iterrows():
        if isinstance(c.get("projected_label"), str) and c.get("projected_label"):
            projected.append(c)
        if not c.label:
            t.add_row(c.regime, "—", "", "", "", "", "", "", "", c.note or "")
            continue
        err = c.get("lat_rel_err")
        prov = c.provenance + ("" if c.provenance == "measured" or err is None or err != err else f" ±{100 * err:.0f}%")
        note = "stack beats every single" if c.stack_beats_singles else (c.note or "")
        kl = c.get("kld")
        kl = "" if kl is None or kl != kl else f", KL {kl:.3g}"
        t.add_row(c.regime, c.label, str(c.get("win_hardware", "")), prov,
                  f"{_v(c.quality_rel, 3)} [{_v(c.quality_rel_lo, 2)}–{_v(c.quality_rel_hi, 2)}]{kl}",
                  f"{c.evidence} ({c.quality_provenance})", _v(c.tpot_p99_ms), _v(c.throughput_tok_s),
                  _v(c.cost_per_mtok, 3), note)
    console.print(t)
    for c in projected:
        console.print(f"  projected — measure to confirm ({c.regime}): {c.projected_label} on {c.projected_hardware}, "
                      f"{c.objective} {c.projected_value:.4g} vs the winner's {_v(c.value, 4) if c.label else '—'}; "
                      f"{c.projected_evidence}\n    confirm: {c.confirm_command}", highlight=False, soft_wrap=True,
                      markup=False)    # the commands hold TOML tables ([[arms]]), not rich markup


def print_quality_evidence(study: Study, store: Store, console: Console) -> pd.DataFrame:
    """Per measured quality configuration: GSM8K paired against the baseline, KL divergence and
    top-1 agreement, each with its interval, and the guard's verdict on each axis."""
    from pareto_atlas.atlas.regimes import kld_status, task_status
    from pareto_atlas.store.quality import arm_quality_table

    tab = arm_quality_table(study, store)
    if tab.empty:
        return tab
    q = study.quality
    tab["task_guard"] = task_status(tab["rel_lo"].to_numpy(float), tab["rel_hi"].to_numpy(float),
                                    tab["rel"].to_numpy(float), q.floor)
    tab["kld_guard"] = kld_status(tab, q.kld_max)
    t = Table(title=f"Quality evidence per configuration, against the baseline '{study.baseline.name}' "
                    f"(95 % intervals; floor {q.floor:g} of the baseline, KL <= {q.kld_max or '—'} nats/token)")
    for col in ("arm", "GSM8K", "difference [95 %] (McNemar p)", "vs floor", "KL divergence [95 %]",
                "same top-1 token", "vs KL limit"):
        t.add_column(col)
    for r in tab.itertuples():
        gsm = "—" if r.n is None or r.n != r.n else f"{int(r.k)}/{int(r.n)}"
        diff = ("baseline" if r.baseline else "—" if r.diff != r.diff else
                f"{r.diff:+.2f} [{r.diff_lo:+.2f}, {r.diff_hi:+.2f}] (p={r.mcnemar_p:.2f})")
        kl = "—" if r.kld != r.kld else f"{r.kld:.4f} [{r.kld_lo:.4f}, {r.kld_hi:.4f}]"
        top1 = "—" if r.top1 != r.top1 else f"{100 * r.top1:.1f} % [{100 * r.top1_lo:.1f}, {100 * r.top1_hi:.1f}]"
        t.add_row(str(r.arm), gsm, diff, "in" if r.baseline else (r.task_guard or "—"), kl, top1,
                  "in" if r.baseline else (r.kld_guard or "—"))
    console.print(t)
    return tab


def atlas_study(study: Study, store: Store, console: Console) -> pd.DataFrame:
    points = study_points(study, store)
    regs = study_regimes(study, points)
    cells = study_winners(study, points, regs)
    hw_of = dict(zip(points.point_id, points.hardware))
    cells["win_hardware"] = cells.point_id.map(hw_of).fillna("")
    n_meas = int((points.provenance == "measured").sum())
    console.print(f"[bold]atlas[/] {study.name}: {len(points)} points ({n_meas} measured, "
                  f"{len(points) - n_meas} simulated or prior), {len(regs)} regimes, "
                  f"quality floor {study.quality.floor:.0%} of the baseline arm '{study.baseline.name}' on the 95 % "
                  f"interval" + (f", KL divergence <= {study.quality.kld_max:g} where measured" if study.quality.kld_max else "")
                  + ("; priors may win (allow_priors)" if study.quality.allow_priors else
                     "; winners need measured evidence (priors are listed as projected)"))
    print_quality_evidence(study, store, console)
    print_winners(cells, console, "all")
    if "this-cpu" in set(cells.hardware):
        print_winners(cells, console, "this-cpu")
    return cells


def _prices(items: list[str]) -> dict[str, float]:
    from pareto_atlas.spec.bounds import parse_prices

    return parse_prices(items, "--price")


def pick_study(study: Study, store: Store, console: Console, constraint: str, objective: str, maximize: bool,
               prices: list[str], allow_priors: bool = False) -> None:
    points = study_points(study, store)
    price_map = _prices(prices)
    unknown = sorted(set(price_map) - set(points.hardware))
    if unknown:
        raise ValueError(f"--price {unknown[0]!r}: no points on that hardware; known: {', '.join(sorted(set(points.hardware)))}")
    res = pick(points, constraint or None, objective, direction="max" if maximize else None, prices=price_map,
               price_date=date.today().isoformat() if price_map else "", quality_floor=study.quality.floor,
               allow_priors=allow_priors or study.quality.allow_priors, kld_max=study.quality.kld_max,
               study_ref=confirm_ref(study))
    console.print(res.summary(), highlight=False, markup=False)   # confirm commands hold [[arms]]
    console.print(f"(answered in {res.elapsed_s * 1e3:.0f} ms from {len(points)} stored points; nothing re-measured)")
