"""The models an atlas answers for (a study's [[targets]]), each resolved to a card, the hardware
it is answered on, its workloads and the error bar its speed carries on each card.

The measured model is evidence for the others, never a stand-in: a target's speed is simulated
from its own card with each hardware card's calibration; where that calibration never saw the
target's architecture, the point carries the calibration's transfer error (the fit's
leave-one-model-out error, `CalibParams.xfer_*`), not its within-model one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from pareto_atlas.simulate.params import CalibParams
from pareto_atlas.simulate.space import Workload
from pareto_atlas.spec.cards import HardwareCard, ModelCard, resolve_model_card
from pareto_atlas.spec.sharing import sharing
from pareto_atlas.spec.study import Study

# Where a card's calibration saw one model size, how far it carries to another is not measured: such
# a point's speed is projected (atlas.evidence reads this phrase in its calibration's provenance),
# never carried with an invented bar, and says what would measure a second size.
SPEED_PROJECTED = "speed projected"


@dataclass(frozen=True)
class Target:
    """One model the atlas answers for."""

    name: str  # the points table's `model` column
    card: ModelCard
    hardware: tuple[HardwareCard, ...]
    workloads: tuple[Workload, ...]
    measured: bool  # the study's own [model]: its quality is measured here
    tasks: tuple[str, ...] = ()  # the quality task guarding each workload (default: the study's)
    max_configs: int | None = None  # its own budget (TargetSpec.max_configs); None: a share of the study's

    @property
    def family(self) -> str:
        return self.card.family

    def task_of(self, workload: str, default: str) -> str:
        """The quality task that guards `workload`'s winners."""
        return dict(zip((w.name for w in self.workloads), self.tasks)).get(workload) or default


def study_targets(
    study: Study, measured_card: ModelCard, hardware: list[HardwareCard], measured_workloads: list[Workload]
) -> list[Target]:
    """The study's targets, resolved; without [[targets]], the measured model on every card at every
    measured shape (what a study answered for before models were an axis)."""
    by_name = {h.name: h for h in hardware}
    own = measured_card
    # a study without arms measured nothing: its own model is answered for like any other target
    if not study.targets:
        return [Target(study.model.name, own, tuple(hardware), tuple(measured_workloads), study.measures)]
    default = study.quality.task
    out = []
    for t in study.targets:
        measured = t.card is None and study.measures
        if t.card is None:
            card = replace(own, family=t.family or own.family)
        else:
            card = resolve_model_card(t.card, None, name=t.name, family=t.family or "")
            if not card.family and t.family is None:
                card = replace(card, family=_shipped_family(t.card))
        hw = tuple(by_name[h] for h in (t.hardware or [h.name for h in hardware]))
        wls = (
            tuple(
                Workload(w.name, w.prompt_tokens, w.output_tokens, (), sharing(w.share, w.prompt_tokens))
                for w in t.workloads
            )
            if t.workloads
            else tuple(measured_workloads)
        )
        tasks = tuple(w.task or default for w in t.workloads) if t.workloads else (default,) * len(wls)
        out.append(Target(t.name, card, hw, wls, measured, tasks, t.max_configs))
    return out


def _shipped_family(ref: str) -> str:
    from pareto_atlas.spec.cards import shipped_models

    card = shipped_models().get(Path(ref).name)
    return card.family if card else ""


def carried_params(
    params: CalibParams, target: Target, fitted_models: set[str], hw: str = "", study: str = "STUDY"
) -> CalibParams:
    """The calibration a target's points on one card are simulated with: the card's own, with its
    error bar widened to the measured transfer error where the fit never saw the target's model;
    where that error was not measured (the fit saw one size), the points are projected."""
    from pareto_atlas.spec.cards import same_architecture_cards

    seen = target.card.name in fitted_models or bool(set(same_architecture_cards(target.card)) & fitted_models)
    if target.measured or seen:
        return params
    xl, xt = getattr(params, "xfer_lat_rel_err", math.nan), getattr(params, "xfer_thr_rel_err", math.nan)
    if xl == xl and xt == xt:
        lat, thr = max(params.lat_rel_err, xl), max(params.thr_rel_err, xt)
        how = f"transfer error ±{lat:.0%} / ±{thr:.0%} (leave-one-model-out)"
        return replace(
            params,
            lat_rel_err=lat,
            thr_rel_err=thr,
            provenance=f"{params.provenance}; carried to {target.name} ({how})",
        )
    # the bar kept is the measured model's, shown as such: no transfer error stands behind it
    return replace(
        params,
        provenance=f"{params.provenance}; {SPEED_PROJECTED} for {target.name}: the fit saw "
        f"{len(fitted_models)} model size(s) ({', '.join(sorted(fitted_models)) or 'none'}), so its error on a model "
        f"it did not see is not measured (the ±{params.lat_rel_err:.0%} shown is the fitted model's own); "
        + second_size_hint(hw, study),
    )


def second_size_hint(hw: str, study: str = "STUDY") -> str:
    """What would measure a second model size on card `hw`, so its fit reports a leave-one-model-out error."""
    if hw in ("", "this-cpu"):
        return (
            'measure a second size: add [[arms]] name = "smol-q4_0", weights = "Q4_0", model = { name = '
            f'"smollm2-135m-instruct", card = "smollm2-135m" }} to {study}, then pareto-atlas measure {study} '
            f"--arm smol-q4_0 && pareto-atlas calibrate {study}"
        )
    return (
        f"measure a second size on {hw}: published rows of another model on {hw} "
        f"(pareto-atlas calibrate {study} --published --table ROWS.csv)"
    )
