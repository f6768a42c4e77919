"""The study: what to measure, what to simulate, and how to judge it, with the checks across its tables.

Checks that need this host (a checkpoint's format, the engine's options, the models the package ships)
are measure.resolve's: spec imports nothing above it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from pareto_atlas.spec import bounds as B
from pareto_atlas.spec.bounds import Price, Slug
from pareto_atlas.spec.study.arms import ArmSpec
from pareto_atlas.spec.study.base import Frozen, known_hardware
from pareto_atlas.spec.study.errors import StudyError
from pareto_atlas.spec.study.quality import EvictionSpec, QualitySpec
from pareto_atlas.spec.study.serving import EngineSpec, LoadSpec, ModelSpec, WorkloadSpec
from pareto_atlas.spec.study.space import RegimeSpec, SimulateSpec, TargetSpec
from pareto_atlas.spec.study.tasks import TABLES


class Study(Frozen):
    name: Slug  # names atlas-out/<name>: a folder name, never a path
    description: str = Field("", max_length=10_000)
    model: ModelSpec
    engine: EngineSpec = EngineSpec()
    workload: WorkloadSpec = WorkloadSpec()
    load: LoadSpec = LoadSpec()
    # The configurations measured on the engine. None: the study measures nothing, and `build` runs
    # simulate -> atlas -> report on published evidence alone (GPU speed from the published anchors'
    # fits, quality from spec/published_quality.csv); [engine] then names the engine simulated.
    arms: list[ArmSpec] = Field(default_factory=list)
    quality: QualitySpec = QualitySpec()
    eviction: EvictionSpec = EvictionSpec()
    simulate: SimulateSpec = SimulateSpec()
    # The models the atlas answers for (see TargetSpec); none: the measured model on every card.
    targets: list[TargetSpec] = Field(default_factory=list)
    regimes: list[RegimeSpec] = Field(default_factory=list)
    prices: dict[str, Price] = Field(default_factory=dict)  # $/hour overrides by hardware name
    price_date: str = Field("2026-07", pattern=r"^\d{4}(-\d{2}(-\d{2})?)?$")
    cpu_price_per_hour: Price = 0.0835  # this machine's assumed rental price
    # Another study (built-in name or TOML path) on the same hardware: this study's anchors go into
    # its store, and this study's calibration and atlas see its measured anchors beside its own, so
    # two engines are compared on one machine (vllm-cpu names default).
    compare_with: str | None = None
    # A published atlas whose claims `build` prints beside this study's answers, claim by claim
    # (report.claims): "paper", the seed paper's (its numbers in the references file report.claims reads).
    claims: Literal["paper"] | None = None

    @field_validator("arms")
    @classmethod
    def _unique_arms(cls, arms: list[ArmSpec]) -> list[ArmSpec]:
        names = [a.name for a in arms]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"arm name {dup[0]!r} is used twice; arm names must be unique")
        return arms

    @model_validator(mode="after")
    def _baseline_exists(self) -> "Study":
        b = self.quality.baseline_arm
        if b is not None and b not in {a.name for a in self.arms}:
            raise ValueError(f"quality.baseline_arm {b!r} is not an arm; arms: {', '.join(a.name for a in self.arms)}")
        return self

    @model_validator(mode="after")
    def _trace_arms(self) -> "Study":
        # a trace is the arrival process: no second load pattern on top, no lengths beside it
        for a in self.arms:
            if not (a.trace or self.workload.trace):
                continue
            if a.rate_rps is not None or a.concurrency != 1:
                raise ValueError(f"arms.{a.name}: a trace gives the arrivals; leave concurrency and rate_rps out")
            if self.workload.trace and (a.prompt_tokens or a.output_tokens):
                raise ValueError(
                    f"arms.{a.name}: the workload replays a trace, whose rows give the lengths; "
                    f"leave prompt_tokens and output_tokens out (or name another trace in the arm)"
                )
        return self

    @model_validator(mode="after")
    def _within_context(self) -> "Study":
        # one request's prompt and output must fit the engine's context: else every request of the
        # arm fails at the engine, after the engine has started
        ctx = self.engine.n_ctx
        for where, wl in [("workload", self.workload)] + [
            (f"arms.{a.name}", a.workload(self.workload)) for a in self.arms
        ]:
            rows = wl.trace_rows()
            p, n = (
                max((r.prompt_tokens + r.output_tokens, r.prompt_tokens, r.output_tokens) for r in rows)[1:]
                if rows
                else (wl.longest_prompt(), wl.output_tokens)
            )
            if p + n > ctx:
                what = (
                    "its trace's longest request"
                    if rows
                    else "a session's last turn"
                    if wl.share is not None and p > wl.prompt_tokens
                    else "prompt_tokens + output_tokens"
                )
                raise ValueError(f"{where}: {what} = {p} + {n} tokens is not allowed: within engine.n_ctx = {ctx}")
        for a in self.arms:
            if a.chunk_tokens > ctx:
                raise ValueError(
                    f"arms.{a.name}.chunk_tokens: {a.chunk_tokens} is not allowed: within engine.n_ctx = {ctx}"
                )
            n = a.n_requests(self.load, a.workload(self.workload))
            if a.rate_rps and n / a.rate_rps > B.MAX_ARRIVALS_S:
                raise ValueError(
                    f"arms.{a.name}.rate_rps: {a.rate_rps:g} is not allowed: {n} requests at that rate "
                    f"arrive over {n / a.rate_rps / 3600:.0f} h; at most {B.MAX_ARRIVALS_S / 3600:.0f} h"
                )
        q = self.quality
        for task in q.all_tasks():  # every task the quality stage scores must fit one request
            longest, what = TABLES[task].longest_request(q)
            if longest > ctx:
                raise ValueError(f"quality: {what} = {longest} tokens is not allowed: within engine.n_ctx = {ctx}")
        return self

    @model_validator(mode="after")
    def _names(self) -> "Study":
        B.unique([r.name for r in self.regimes], "regimes: name")
        try:
            known_hardware(list(self.prices))
        except ValueError as e:
            raise ValueError(f"prices: {e}") from None
        return self

    @model_validator(mode="after")
    def _targets(self) -> "Study":
        names = [t.name for t in self.targets]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"targets: {dup[0]!r} is named twice; target names must be unique")
        for i, t in enumerate(self.targets):
            if t.card is None and t.name != self.model.name:
                raise ValueError(
                    f"targets.{i}.card: {t.name!r} is not the measured model ({self.model.name!r}); "
                    f"give its card (a shipped card, a config.json or a .gguf path)"
                )
            bad = sorted(set(t.hardware or ()) - set(self.simulate.hardware))
            if bad:
                raise ValueError(
                    f"targets.{i}.hardware: {bad[0]!r} is not in [simulate] hardware "
                    f"({', '.join(self.simulate.hardware)})"
                )
            scored = self.quality.all_tasks()
            for j, w in enumerate(t.workloads or ()):
                # the measured model's workloads are guarded by what the quality stage scores; another
                # model's may rest on published scores for any task
                if w.task is not None and t.card is None and self.measures and w.task not in scored:
                    raise ValueError(
                        f"targets.{i}.workloads.{j}.task: {w.task!r} is not scored by this study; "
                        f"allowed: {', '.join(scored)} (or add it to [quality] tasks)"
                    )
        return self

    def hardware_of(self, arm: ArmSpec) -> str:
        """The hardware card `arm` measures on: its own, else the engine's."""
        return arm.hardware or self.engine.hardware

    @model_validator(mode="after")
    def _arm_models(self) -> "Study":
        if self.baseline.model is not None:
            raise ValueError(
                f"quality.baseline_arm: {self.baseline.name!r} serves its own model; the baseline "
                f"(by default the first arm) must serve the study's [model] ({self.model.name!r})"
            )
        for a in self.arms:
            if a.spec == "draft" and not self.model_for(a).draft:
                where = f"arms.{a.name}.model.draft" if a.model is not None else "model.draft"
                raise ValueError(
                    f"{where}: arm {a.name!r} has spec = 'draft' and needs a draft model "
                    f"(a known source or a .gguf path sharing the target's tokenizer)"
                )
        return self

    def model_for(self, arm: ArmSpec) -> ModelSpec:
        """The model an arm serves: its own `model`, else the study's."""
        return arm.model or self.model

    @property
    def measures(self) -> bool:
        """Whether the study has anything to measure on its engine (a study without arms has not)."""
        return bool(self.arms)

    @property
    def baseline(self) -> ArmSpec:
        """The arm quality is relative to; a study without arms: its model at 16-bit, never measured
        (the precision its published scores' baselines were served at)."""
        if not self.arms:
            return ArmSpec(name="reference", weights="F16")
        name = self.quality.baseline_arm or self.arms[0].name
        return next(a for a in self.arms if a.name == name)

    def arm(self, name: str) -> ArmSpec:
        for a in self.arms:
            if a.name == name:
                return a
        raise StudyError(f"arm {name!r} is not in study {self.name!r}; arms: {', '.join(a.name for a in self.arms)}")
