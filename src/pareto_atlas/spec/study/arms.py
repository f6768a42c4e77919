"""A study's arms: the configurations measured on the engine. An arm's knob fields are the fields of
`Knobs` (spec/knobs.py) an engine can be told, derived from it, so a knob added there is a field here."""

from __future__ import annotations

import typing
from dataclasses import MISSING, fields

from pydantic import ValidationError, BaseModel, Field, ValidationInfo, create_model, field_validator, model_validator

from pareto_atlas.spec import bounds as B
from pareto_atlas.spec.bounds import Bool, Int, Name, Real
from pareto_atlas.spec.knobs import PARALLEL_DEFAULTS, Knobs
from pareto_atlas.spec.study.base import Frozen, check_hardware
from pareto_atlas.spec.study.serving import LoadSpec, ModelSpec, WorkloadSpec
from pareto_atlas.spec.trace import trace_name, with_trace

# Knobs no engine is told: eviction is measured in transformers by `evict`, sparse attention and an
# acceptance rate are simulated (the acceptance an arm reaches is measured, not set).
NOT_ARM_KNOBS = ("kv_keep", "eviction", "spec_accept", "sparse_budget")
ARM_KNOBS = tuple(f.name for f in fields(Knobs) if f.name not in NOT_ARM_KNOBS)
# An arm's defaults where they differ from Knobs' baseline: a GGUF as llama.cpp users serve it.
ARM_DEFAULTS = {"weights": "Q4_K_M"}
# What one host may be asked, by knob (bounds.py); a knob without an entry takes its type's check
# here and Knobs' own when the arm builds its knobs.
ARM_BOUNDS = {
    "spec_k": Int(0, 64, "tokens drafted a step"),
    "slots": Int(1, B.MAX_SLOTS, "sequences one host's engine decodes together"),
    "chunk_tokens": Int(0, B.MAX_CTX, "tokens; within engine.n_ctx"),  # vllm: "chunked" = chunked prefill
}
_KNOB_TYPES = typing.get_type_hints(Knobs)


def _check_of(tp: typing.Any, what: str) -> typing.Any:
    """A strict pydantic type for a knob of type `tp` that has no bound of its own."""
    if tp is int:
        return Int(0, 1_000_000, what)
    if tp is float:
        return Real(0.0, 1e9, what)
    return tp


def _arm_knob_fields() -> dict[str, tuple]:
    out = {}
    for f in fields(Knobs):
        if f.name in ARM_KNOBS:
            default = ARM_DEFAULTS.get(f.name, f.default if f.default is not MISSING else f.default_factory())
            out[f.name] = (ARM_BOUNDS.get(f.name) or _check_of(_KNOB_TYPES[f.name], f"knob {f.name}"), default)
    return out


# A parallel degree counts GPUs or workers: 1 or more (prefill_tp's 0 is "the decode workers' tp");
# Knobs itself then says which values it takes (tp a power of two, ...).
ARM_BOUNDS |= {
    name: Int(0 if name == "prefill_tp" else 1, 1_000_000, f"knob {name}")
    for name in PARALLEL_DEFAULTS
    if name not in ARM_BOUNDS
}


def _share_name(share: str | dict) -> str:
    """A sharing pattern in a workload's name: a preset's name, or its fields (prefix64-g2-t1)."""
    if isinstance(share, str):
        return share
    short = {"prefix_tokens": "prefix", "prefix_share": "share", "groups": "g", "turns": "t", "turn_tokens": "u"}
    return "-".join(f"{short.get(k, k)}{v:g}" for k, v in sorted(share.items()))


class _Named(Frozen):
    name: Name


# name first, then the knobs in Knobs' order, then the rest: the order an unknown field's error lists
_ArmKnobs: type[BaseModel] = create_model("_ArmKnobs", __base__=_Named, **_arm_knob_fields())


class ArmSpec(_ArmKnobs):
    concurrency: Int(1, B.MAX_CLIENTS, "clients one host's load generator runs") = 1
    rate_rps: Real(B.MIN_RATE_RPS, B.MAX_RATE_RPS, "requests/s one host sends", optional=True) = None
    quality: Bool = False  # also run the quality arm for this configuration
    # measure this arm more often than load.repeats (repeat spread)
    repeats: Int(1, 100, "repeats of one anchor", optional=True) = None
    # requests for this arm instead of load.requests: a closed loop of c clients needs about as many
    # rounds as one client for its percentiles to settle, so c times the requests
    requests: Int(2, B.MAX_REQUESTS, "requests of one anchor one host sends", optional=True) = None
    # Options of this arm's engine that are not Knobs because the simulator has no physics for them
    # (vllm's prefix caching, enforce_eager): they key the anchor and are in its provenance.
    engine_options: dict[str, str | int | float | bool] = Field(default_factory=dict)
    # This arm's own lengths or trace instead of the workload's (see WorkloadSpec; `workload()`).
    prompt_tokens: Int(8, B.MAX_CTX, "tokens; with output_tokens within engine.n_ctx", optional=True) = None
    output_tokens: Int(2, B.MAX_CTX, "tokens; with prompt_tokens within engine.n_ctx", optional=True) = None
    trace: str | None = None
    # This arm's own sharing pattern instead of the workload's (WorkloadSpec.share): anchors at two or
    # more sharing levels, with prefix_cache on and off, in one study.
    share: str | dict[str, int | float] | None = None
    hardware: str | None = None  # the card this arm measures on; default: engine.hardware
    # Another model than the study's [model] for this arm's speed anchors (`Study.model_for`): anchors
    # of several sizes in one fit split a step's fixed cost from the cost per weight streamed. Its
    # quality is not scored (quality runs are the study model's), so `quality` must stay off.
    model: ModelSpec | None = None

    @model_validator(mode="before")
    @classmethod
    def _trace(cls, data, info: ValidationInfo):
        return with_trace(data, info, fill=False)

    @field_validator("hardware")
    @classmethod
    def _hardware(cls, v: str | None) -> str | None:
        return v if v is None else check_hardware(v)

    def workload(self, study_workload: WorkloadSpec) -> WorkloadSpec:
        """The workload this arm runs: the study's, or its own trace or lengths under their own name."""
        wl = study_workload
        if self.trace:
            return WorkloadSpec(name=trace_name(self.trace), trace=self.trace, api=wl.api)
        P, N = self.prompt_tokens or wl.prompt_tokens, self.output_tokens or wl.output_tokens
        share = self.share if self.share is not None else wl.share
        if (P, N, share) == (wl.prompt_tokens, wl.output_tokens, wl.share):
            return wl
        name = f"p{P}-n{N}" if share is None or share == wl.share else f"p{P}-n{N}-{_share_name(share)}"
        try:
            return WorkloadSpec(name=name, prompt_tokens=P, output_tokens=N, api=wl.api, share=share)
        except ValidationError as e:
            # one line naming the arm: its share (or lengths) against its prompt
            raise ValueError(f"arms.{self.name}.{e.errors()[0]['msg'].removeprefix('Value error, ')}") from None

    def n_requests(self, load: "LoadSpec", workload: WorkloadSpec | None = None) -> int:
        """Measured requests: this arm's or the load's count; a trace's rows (its first `requests` if set)."""
        rows = len(workload.trace_rows()) if workload is not None and workload.trace else 0
        if rows:
            return min(self.requests or rows, rows)
        return self.requests or load.requests

    def knobs(self) -> Knobs:
        return Knobs(**{name: getattr(self, name) for name in ARM_KNOBS})

    @model_validator(mode="after")
    def _check(self) -> "ArmSpec":
        try:
            self.knobs()  # raises ValueError naming the knob and its allowed values
        except ValueError as e:  # named as the arm's field, as every other arm error is
            raise ValueError(f"arms.{self.name}.{str(e).removeprefix('knobs.')}") from None
        if self.share is not None and self.trace:
            raise ValueError(
                f"arms.{self.name}.share: a trace states what it shares by its rows' hash_ids; "
                f"leave share out beside trace"
            )
        if self.model is not None and self.quality:
            raise ValueError(
                f"arms.{self.name}.quality: an arm with its own model measures speed only (quality "
                f"runs score the study's [model]); set quality = false or measure it in its own study"
            )
        return self
