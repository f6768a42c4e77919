"""What a study simulates and answers for: its knob grid, the simulated cards and loads ([simulate]),
the models and workload shapes its atlas answers for ([[targets]]), and its regimes."""

from __future__ import annotations

import typing
from dataclasses import fields
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field, ValidationInfo, create_model, field_validator, model_validator

from pareto_atlas.spec import bounds as B
from pareto_atlas.spec.bounds import Int, Name, Real
from pareto_atlas.spec.knobs import (
    BATCHING,
    DISAGG_FIELDS,
    EVICTION,
    KV_TYPES,
    PARALLEL_FIELDS,
    SPEC,
    WEIGHT_TYPES,
    Knobs,
)
from pareto_atlas.spec.layout import check_grid_layouts
from pareto_atlas.spec.sharing import sharing
from pareto_atlas.spec.study.base import Frozen, known_hardware
from pareto_atlas.spec.study.tasks import QualityTask

# Knobs a grid does not list: each follows another knob's values in the shipped grid (kv_keep the
# eviction policy's, spec_k and spec_accept the speculation method's, chunk_tokens the batching policy's).
NOT_GRID_KNOBS = ("kv_keep", "spec_k", "spec_accept", "chunk_tokens")
GRID_KNOBS = tuple(f.name for f in fields(Knobs) if f.name not in NOT_GRID_KNOBS)
# The values a listed knob may take, where Knobs names them.
GRID_CHOICES = {"weights": WEIGHT_TYPES, "kv": KV_TYPES, "eviction": EVICTION, "spec": SPEC, "batching": BATCHING}
GRID_ITEMS = {
    "slots": Annotated[int, Field(ge=1)],
    "sparse_budget": Annotated[
        float, Field(gt=0.0, le=1.0)
    ],  # 1.0: dense attention ("eviction": "none" keeps the full cache)
}
_KNOB_TYPES = typing.get_type_hints(Knobs)


def _grid_fields() -> dict[str, tuple]:
    items = {int: Annotated[int, Field(ge=0)], float: Annotated[float, Field(ge=0.0)]}
    return {k: (list[GRID_ITEMS.get(k) or items.get(_KNOB_TYPES[k], _KNOB_TYPES[k])] | None, None) for k in GRID_KNOBS}


_GridKnobs: type[BaseModel] = create_model("_GridKnobs", __base__=Frozen, **_grid_fields())


class GridSpec(_GridKnobs):
    """A study's own knob grid: the shipped grid per hardware kind (simulate.space.default_knobs)
    restricted to the listed values of each knob; a knob left out keeps every value the shipped
    grid has. The study's arms are always simulated, whatever this lists. Its fields are the knobs of
    `Knobs` but those that follow another knob (NOT_GRID_KNOBS)."""

    @model_validator(mode="after")
    def _known(self) -> "GridSpec":
        for name in GRID_KNOBS:
            values = getattr(self, name)
            if values is not None and not values:
                raise ValueError(f"{name}: an empty list keeps no configuration; leave it out to keep every value")
            allowed = GRID_CHOICES.get(name)
            bad = [v for v in values or () if allowed is not None and v not in allowed]
            if bad:
                raise ValueError(f"{name}: {bad[0]!r} is not one of {', '.join(allowed)}")
            if allowed is None and name in PARALLEL_FIELDS:
                for v in values or ():  # each value as Knobs itself would take it (tp a power of two, ...)
                    try:
                        # ep alone must divide tp x attn_dp: taken beside an attention-DP of its own size
                        Knobs(
                            **{
                                name: v,
                                **(
                                    {"batching": "disagg"}
                                    if name in DISAGG_FIELDS
                                    else {"attn_dp": v}
                                    if name == "ep" and isinstance(v, int) and v > 0
                                    else {}
                                ),
                            }
                        )
                    except ValueError as e:
                        raise ValueError(f"{name}: {str(e).split(': ', 1)[-1]}") from None
        return self

    def keeps(self, knobs: Knobs) -> bool:
        """Whether a grid configuration is in this study's grid."""
        return all(getattr(self, f) is None or getattr(knobs, f) in getattr(self, f) for f in GRID_KNOBS)


class SimulateSpec(Frozen):
    hardware: list[str] = Field(default_factory=lambda: ["this-cpu"], min_length=1, max_length=64)
    concurrency: list[Int(1, B.MAX_SIM_CLIENTS, "clients of a simulated closed loop")] = Field(
        default_factory=lambda: [1, 2, 4, 8], min_length=1, max_length=64
    )
    # Poisson open loops at these fractions of each configuration's capacity (its completion rate
    # with every slot busy), beside the closed loops: P99 under random arrivals, at any card's scale.
    utilization: list[Real(0.0, 1.0, "a fraction of capacity", lo_open=True)] = Field(
        default_factory=list, max_length=64
    )
    n_requests: Int(10, 100_000, "requests of one simulated point") = 200
    max_configs: Int(1, 1_000_000, "configurations simulated") = 20000
    grid: GridSpec = GridSpec()

    @field_validator("hardware")
    @classmethod
    def _hardware(cls, v: list[str]) -> list[str]:
        B.unique(v, "hardware")
        return known_hardware(v)

    @model_validator(mode="after")
    def _layouts(self) -> "SimulateSpec":
        # a parallel value no searched layout takes would keep no configuration of its own (any model's
        # layouts count here, the MoE ones too; ep or attn_dp with dense models only: simulate.space.check_expert_grid)
        from pareto_atlas.spec.cards import shipped_hardware

        gpus = [c for n, c in shipped_hardware().items() if n in self.hardware and c.kind == "gpu"]
        if gpus:
            layouts = {f: getattr(self.grid, f) for f in PARALLEL_FIELDS}
            check_grid_layouts(layouts, max(c.gpus_per_node for c in gpus), where="grid")
        return self

    @model_validator(mode="after")
    def _fp4_cards(self) -> "SimulateSpec":
        # a W4A4 FP4 format no listed card can run would leave the grid's points silently empty
        from pareto_atlas.spec.cards import shipped_hardware
        from pareto_atlas.spec.fp4 import fp4_unserved

        cards = [c for n, c in shipped_hardware().items() if n in self.hardware]
        for w in self.grid.weights or ():
            whys = [fp4_unserved(w, c.name, c.tflops) for c in cards]
            if whys and all(whys):
                raise ValueError(f"grid.{whys[0]}; list a card that has them (e.g. B200) in hardware")
        return self


class ShapeSpec(Frozen):
    """A workload shape a target model is answered for: fixed prompt and output lengths."""

    name: Name
    prompt_tokens: Int(8, B.MAX_CTX, "tokens")
    output_tokens: Int(2, B.MAX_CTX, "tokens")
    # The quality task that guards this workload's winners (code: humaneval; instruction following:
    # ifeval; long context: retrieval; math: gsm8k); default: the study's [quality] task.
    task: QualityTask | None = None
    # What its requests share (spec.sharing; WorkloadSpec.share): a shipped pattern or a table
    share: str | dict[str, int | float] | None = None

    @model_validator(mode="after")
    def _share(self) -> "ShapeSpec":
        sharing(self.share, self.prompt_tokens)  # one-line ValueError naming the field
        return self


class TargetSpec(Frozen):
    """A model the atlas answers for: its own frontier, regimes and winners per workload (the seed
    paper's "for each (model, workload)"). The measured model is evidence for it, never a stand-in:
    its speed is simulated from its card with each card's calibration, its quality comes from the
    evidence ladder (measured, published, carried from a measured model of its family, prior)."""

    name: Name
    # A shipped card, a Hugging Face config.json (or a directory holding one), or a .gguf header;
    # relative paths are read from the study's folder. Default: the measured model's own card, when
    # `name` is the study's [model] name.
    card: str | None = None
    family: Name | None = None  # default: the card's (spec/models.toml)
    hardware: list[str] | None = None  # default: [simulate] hardware
    workloads: list[ShapeSpec] | None = Field(None, max_length=64)  # default: the shapes the arms measured
    # This target's own configuration budget, outside [simulate] max_configs (which the other targets
    # share as before): a target added to a study leaves the others' thinned grids as they were.
    max_configs: Int(1, 1_000_000, "configurations of this target", optional=True) = None

    @field_validator("workloads")
    @classmethod
    def _shapes(cls, v: list[ShapeSpec] | None) -> list[ShapeSpec] | None:
        if v is not None and not v:
            raise ValueError("an empty list answers for no workload; leave it out for the measured shapes")
        B.unique([w.name for w in v or ()], "workload name")
        return v

    @field_validator("card")
    @classmethod
    def _card_path(cls, v: str | None, info: ValidationInfo) -> str | None:
        base = (info.context or {}).get("base")
        if v is None or base is None or not (v.endswith((".json", ".gguf")) or "/" in v):
            return v
        p = Path(v)
        return str(p if p.is_absolute() else Path(base) / p)

    @field_validator("hardware")
    @classmethod
    def _hardware(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and not v:
            raise ValueError("an empty list answers on no hardware; leave it out for [simulate] hardware")
        if v is not None and len(set(v)) != len(v):
            raise ValueError(f"{sorted(h for h in v if v.count(h) > 1)[0]!r} is listed twice")
        return v


class RegimeSpec(Frozen):
    name: Name
    objective: Name
    direction: Literal["min", "max"] = "min"
    constraints: dict[str, list] = Field(default_factory=dict)  # column -> [op, value]
    quality_floor: Real(0.0, 1.5, "quality relative to the baseline", lo_open=True, optional=True) = None
