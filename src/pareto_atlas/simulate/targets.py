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

# Where a card's calibration never saw the target's size and no transfer error was measured, the
# within-model bar is widened by this stated factor (a labelled assumption, printed with the point).
UNMEASURED_TRANSFER_WIDENING = 2.0


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


def carried_params(params: CalibParams, target: Target, fitted_models: set[str]) -> CalibParams:
    """The calibration a target's points on one card are simulated with: the card's own, with its
    error bar widened to the measured transfer error where the fit never saw the target's model."""
    from pareto_atlas.spec.cards import same_architecture_cards

    seen = target.card.name in fitted_models or bool(set(same_architecture_cards(target.card)) & fitted_models)
    if target.measured or seen:
        return params
    xl, xt = getattr(params, "xfer_lat_rel_err", math.nan), getattr(params, "xfer_thr_rel_err", math.nan)
    if xl == xl and xt == xt:
        lat, thr = max(params.lat_rel_err, xl), max(params.thr_rel_err, xt)
        how = f"transfer error ±{lat:.0%} / ±{thr:.0%} (leave-one-model-out)"
    else:
        f = UNMEASURED_TRANSFER_WIDENING
        lat, thr = params.lat_rel_err * f, params.thr_rel_err * f
        how = f"transfer error not measured: the within-model bar x{f:g} stands for it"
    return replace(
        params, lat_rel_err=lat, thr_rel_err=thr, provenance=f"{params.provenance}; carried to {target.name} ({how})"
    )
