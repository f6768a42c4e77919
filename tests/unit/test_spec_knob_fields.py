"""An arm's and a grid's knob fields are derived from `Knobs`: every knob is one of them or named as left
out, so a knob added to Knobs becomes a study field without being spelled out again."""

from __future__ import annotations

from dataclasses import fields

import pytest

from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.spec.study import ArmSpec, GridSpec, StudyError, parse_study
from pareto_atlas.spec.study.arms import ARM_KNOBS, NOT_ARM_KNOBS
from pareto_atlas.spec.study.space import GRID_KNOBS, NOT_GRID_KNOBS

KNOBS = [f.name for f in fields(Knobs)]


def test_every_knob_is_an_arm_field_or_named_as_left_out():
    assert sorted([*ARM_KNOBS, *NOT_ARM_KNOBS]) == sorted(KNOBS)
    assert [k for k in ArmSpec.model_fields if k in KNOBS] == list(ARM_KNOBS)
    assert ArmSpec(name="a", weights="Q8_0").knobs() == Knobs(
        **{"weights": "Q8_0"} | {k: getattr(Knobs(), k) for k in ARM_KNOBS if k != "weights"}
    )


def test_every_knob_is_a_grid_field_or_named_as_left_out():
    assert sorted([*GRID_KNOBS, *NOT_GRID_KNOBS]) == sorted(KNOBS)
    assert list(GridSpec.model_fields) == list(GRID_KNOBS)
    assert GridSpec(weights=["Q8_0"]).keeps(Knobs(weights="Q8_0")) and not GridSpec(slots=[2]).keeps(Knobs())


def test_a_knob_an_arm_is_not_told_is_an_unknown_field():
    text = 'name = "s"\n[model]\nname = "m"\n[[arms]]\nname = "a"\neviction = "h2o"\n'
    with pytest.raises(StudyError, match=r"arms.0.eviction: unknown field; allowed: name, weights"):
        parse_study(text)
