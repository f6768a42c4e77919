"""The engine options an arm launches with: the study's, the arm's own over them, and an endpoint's
address, key variable and model. One merge, read by the campaign that launches and by the consent
check that must judge exactly what will be launched (measure.consent)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pareto_atlas.spec.study import ArmSpec, Study


def launch_extra(study: Study, arm: ArmSpec) -> dict:
    """The engine options an arm launches with; measure.consent checks the same merge."""
    extra = {**study.engine.options, **arm.engine_options}  # the arm's own options win
    if study.engine.name == "openai":  # the study's endpoint and the arm's model, unless its options name their own
        extra = {
            k: v
            for k, v in (
                ("base_url", study.engine.base_url),
                ("api_key_env", study.engine.api_key_env),
                ("model", study.model_for(arm).served),  # an arm's own model is served under its own id
            )
            if v
        } | extra
    return extra
