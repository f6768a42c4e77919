"""A served model's card: the one its [model] table names, else read from the GGUF this host serves,
with the bits per weight of the files its anchors served (which the cost model then uses instead of the
formats' nominal bits)."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from pareto_atlas.measure.weights import source_file
from pareto_atlas.spec.card_resolve import named_card
from pareto_atlas.spec.cards import ModelCard, model_card_from_gguf
from pareto_atlas.spec.study import ModelSpec, Study


def model_card(study: Study, anchors: pd.DataFrame | None = None) -> ModelCard:
    """The study's model card; with its measured anchors, it also carries the bits per weight of
    the files they served (which the cost model then uses instead of the formats' nominal bits).
    Anchors of an arm's own model (spec.study.ArmSpec.model) are not the study model's: left out."""
    return spec_card(study.model, of_model(anchors, study.model.name, study.model.name))


def spec_card(spec: ModelSpec, anchors: pd.DataFrame | None = None) -> ModelCard:
    """A [model] table's card (shipped, a config.json path or inline fields, else read from its GGUF's
    header), with the measured bits per weight of the files `anchors` (of that model) served."""
    if spec.card:
        card = named_card(spec)
    else:
        card = model_card_from_gguf(str(source_file(spec.name)[0]), spec.name)
    if anchors is not None and "weights_bpw" in anchors and anchors["weights_bpw"].notna().any():
        bits = anchors.dropna(subset=["weights_bpw"]).groupby("weights")["weights_bpw"].median()
        card = replace(card, file_bits=tuple(sorted((str(w), float(b)) for w, b in bits.items())))
    return card


def decode_read_share(spec: ModelSpec) -> float:
    """The share of a model's stored matmul weights one decode step of one sequence reads: all of a
    dense model's; a mixture of experts' always-run weights and the experts_per_token experts a layer
    its token runs (card.active_params / matmul_params), where the card is named (a GGUF's header is
    not read for this: its share stays 1)."""
    if spec.card is None:
        return 1.0
    card = named_card(spec)
    return card.active_params / card.matmul_params if card.is_moe else 1.0


def of_model(anchors: pd.DataFrame | None, model: str, default: str) -> pd.DataFrame | None:
    """The anchors of one served model (anchors stored before the column: the study's)."""
    if anchors is None or not len(anchors) or "model" not in anchors:
        return anchors
    return anchors[anchors["model"].fillna(default) == model]


def anchor_cards(study: Study, anchors: pd.DataFrame) -> list[ModelCard]:
    """Each anchor's own model card, in the anchors' order: the study's [model] or an arm's own
    `model`, so that one fit sees several model sizes (calibrate.sizes)."""
    specs = {study.model.name: study.model} | {a.model.name: a.model for a in study.arms if a.model is not None}
    names = (
        anchors["model"].fillna(study.model.name)
        if "model" in anchors
        else pd.Series(study.model.name, index=anchors.index)
    )
    unknown = sorted(set(names) - set(specs))
    if unknown:
        raise ValueError(
            f"calibrate: anchors of model {unknown[0]!r}, which neither [model] nor any arm's model "
            f"of study {study.name!r} names"
        )
    cards = {m: spec_card(specs[m], of_model(anchors, m, study.model.name)) for m in dict.fromkeys(names)}
    return [cards[m] for m in names]
