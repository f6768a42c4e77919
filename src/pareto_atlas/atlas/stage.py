"""The `atlas` and `pick` stages: a study's question put to its points, once derived, and the
answer printed (atlas.answer holds it, atlas.tables renders it, report.stage writes it)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import date

import pandas as pd
from rich.console import Console

from pareto_atlas.atlas import tables
from pareto_atlas.atlas.answer import Answer
from pareto_atlas.atlas.evidence import StudyRef
from pareto_atlas.atlas.infeasible import infeasible_summary
from pareto_atlas.atlas.objectives import with_derived
from pareto_atlas.atlas.question import Question
from pareto_atlas.atlas.regimes import regimes_from_study
from pareto_atlas.spec.study import Study, study_ref
from pareto_atlas.store import Store
from pareto_atlas.store.points import all_points


class NothingToShow(ValueError):
    """The store holds no points for this study yet."""


def study_points(study: Study, store: Store) -> pd.DataFrame:
    points = with_derived(all_points(study, store))
    if points.empty:
        raise NothingToShow(
            f"store {store.path} has no anchors or simulated points for study {study.name!r}; "
            f"run `pareto-atlas measure` (or `build`) first"
        )
    return points


def study_regimes(study: Study, points: pd.DataFrame):
    return regimes_from_study(
        [r.model_dump(exclude_none=True) for r in study.regimes] or None,
        points,
        quality_floor=study.quality.floor,
        kld_max=study.quality.kld_max,
    )


def confirm_ref(study: Study) -> StudyRef:
    """How confirm commands name this study and its arms (by quality key, the baseline first)."""
    arms: dict[str, str] = {}
    for a in sorted(study.arms, key=lambda a: a.name != study.baseline.name):
        arms.setdefault(a.knobs().quality_key(), a.name)
    return StudyRef(study_ref(study), arms, study.model.name)


def study_answer(study: Study, store: Store) -> Answer:
    """The study's atlas: its points read and derived once, its regimes, its guard and evidence rule."""
    points = study_points(study, store)
    return Answer.of(
        points, study_regimes(study, points), allow_priors=study.quality.allow_priors, study_ref=confirm_ref(study)
    )


def atlas_study(study: Study, store: Store, console: Console) -> pd.DataFrame:
    """Print the study's atlas (atlas.tables) and return its cells, each with the card it runs on."""
    from pareto_atlas.store.quality import arm_quality_table

    return tables.print_atlas(study, study_answer(study, store), arm_quality_table(study, store), console)


def study_question(
    study: Study,
    constraint: str = "",
    objective: str = "cost_per_mtok",
    maximize: bool = False,
    allow_priors: bool = False,
    model: str | None = None,
    workload: str | None = None,
) -> Question:
    """A `pick` question under the study's quality guard: its floor and KL limit, its priors rule."""
    return Question.make(
        constraint or None,
        objective,
        direction="max" if maximize else "",
        quality_floor=study.quality.floor,
        allow_priors=allow_priors or study.quality.allow_priors,
        kld_max=study.quality.kld_max,
        model=model,
        workload=workload,
    )


def pick_question(study: Study, store: Store, console: Console, question: Question, prices: Sequence[str] = ()) -> None:
    """Answer one question per (model, workload) the study's atlas answers for (or the one it is
    about), and, with new prices ("CARD=$/h"), say where the regime winners moved."""
    t0 = time.perf_counter()
    answer = study_answer(study, store)
    points = answer.points
    price_map = _prices(list(prices))
    unknown = sorted(set(price_map) - set(points.hardware))
    if unknown:
        raise ValueError(
            f"--price {unknown[0]!r}: no points on that hardware; known: {', '.join(sorted(set(points.hardware)))}"
        )
    question.select(points)  # an unknown model or workload fails before any work
    repriced = answer.repriced(price_map, date.today().isoformat()) if price_map else answer
    if price_map:
        console.print(
            "repriced: "
            + ", ".join(f"{k} ${v:g}/h" for k, v in price_map.items())
            + " (cost re-derived from throughput)",
            highlight=False,
        )
    t_read, planned = time.perf_counter() - t0, 0.0
    for m, wl in answer.pairs():
        if question.model not in (None, m) or question.workload not in (None, wl):
            continue
        about = question.about(model=m if m else None, workload=wl)
        res = repriced.pick(about)
        planned += res.elapsed_s
        tables.print_pick(res, m or study.model.name, wl, console)
        if res.winner is None:  # an empty answer says why its configurations were infeasible, as `atlas` does
            for inf in infeasible_summary(about.select(points)):
                console.print("\n".join(inf.lines()), highlight=False, markup=False)
    t_moved = time.perf_counter()
    if price_map:
        # every regime's best-card cell: cost is every ranking's tie-break, so any winner can move
        tables.print_moved(answer, repriced, price_map, console)
    moved_ms = f"; where the winners moved: {(time.perf_counter() - t_moved) * 1e3:.0f} ms" if price_map else ""
    console.print(
        f"(re-planned in {planned * 1e3:.0f} ms (the pick itself){moved_ms}; {len(points)} stored points read "
        f"in {t_read * 1e3:.0f} ms; {(time.perf_counter() - t0) * 1e3:.0f} ms in all; nothing re-measured)"
    )


def pick_study(
    study: Study,
    store: Store,
    console: Console,
    constraint: str,
    objective: str,
    maximize: bool,
    prices: list[str],
    allow_priors: bool = False,
    model: str | None = None,
    workload: str | None = None,
) -> None:
    """`pick_question` from the command's flags one by one, as stages.pick passes them; a caller that
    holds a Question (study_question) calls pick_question."""
    pick_question(
        study,
        store,
        console,
        study_question(study, constraint, objective, maximize, allow_priors, model, workload),
        prices,
    )


def _prices(items: list[str]) -> dict[str, float]:
    from pareto_atlas.spec.bounds import parse_prices

    return parse_prices(items, "--price")
