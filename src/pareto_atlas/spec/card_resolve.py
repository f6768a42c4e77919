"""The model card a study's [model] table names: a shipped card, a config.json or GGUF path, or inline
fields. Reading the card of a model that names none (from the GGUF the host serves) is
measure.model_card's: it reads the machine."""

from __future__ import annotations

from pareto_atlas.spec.cards import CardError, ModelCard, inline_model_card, resolve_model_card, shipped_models
from pareto_atlas.spec.study import ModelSpec, Study


def named_card(spec: ModelSpec) -> ModelCard:
    """The card a [model] table's `card` names; a bad one is one line naming `model.card`."""
    ref = spec.card
    try:
        if isinstance(ref, dict):
            return inline_model_card(ref, spec.name)
        return resolve_model_card(ref, name=None if ref in shipped_models() else spec.name)
    except CardError as e:
        raise ValueError(f"model.card: {e}") from None


def study_model_card(study: Study) -> ModelCard:
    """The card a study names: a shipped card, a config.json path, or inline fields."""
    return named_card(study.model)
