"""The study file: what to measure, what to simulate, and how to judge it.

Loaded from TOML into frozen pydantic models; any error is one line naming the file, the field
and what is allowed.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.spec.think import check_think
from pareto_atlas.spec.trace import TraceRow, trace_name, trace_rows, with_trace


class StudyError(ValueError):
    """The study file is missing, unreadable or invalid."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ModelSpec(_Frozen):
    name: str                                   # a known source (measure.weights.SOURCES) or a .gguf path
    card: str | None = None                     # shipped card name; default: read from the GGUF
    chat: bool = True
    draft: str | None = None                    # draft model for spec="draft" arms
    # Engines that read Hugging Face directories (vllm): a local directory to serve as it is;
    # default: the source GGUF converted once (measure.hf_model), cached by its sha256.
    hf_dir: str | None = None


class EngineSpec(_Frozen):
    name: str = "llamacpp"
    threads: int = Field(2, ge=1)
    n_ctx: int = Field(2048, ge=256)
    base_url: str | None = None                 # for engine = "openai"
    api_key_env: str | None = None              # name of the env var holding the key; the key is never stored
    # Engine-specific launch options for every arm (an arm's engine_options override them); each
    # engine names the keys it takes (e.g. vllm: enforce_eager, kv_cache_space_gib, prefix_caching).
    options: dict[str, str | int | float | bool] = Field(default_factory=dict)


class WorkloadSpec(_Frozen):
    name: str = "chat-128-32"
    prompt_tokens: int = Field(128, ge=8)
    output_tokens: int = Field(32, ge=2)
    api: Literal["completions", "chat"] = "completions"
    # A trace replayed instead of fixed lengths and a load pattern (spec.trace): a shipped name or a
    # CSV/JSONL path (relative to the study file) of arrival_s, prompt_tokens, output_tokens. Its
    # rounded mean lengths then fill prompt_tokens/output_tokens, which the study must leave out.
    trace: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _trace(cls, data, info: ValidationInfo):
        return with_trace(data, info)

    def trace_rows(self) -> tuple[TraceRow, ...]:
        return trace_rows(self.trace) if self.trace else ()


class LoadSpec(_Frozen):
    requests: int = Field(8, ge=2)
    warmup: int = Field(1, ge=0)
    timeout_s: float = Field(120.0, gt=0)
    repeats: int = Field(1, ge=1)
    # Closed loops of two or more clients: the mean of each client's seeded exponential pause (ms)
    # before each request; "auto": the warm-up's TTFT (one prefill). Identical requests sent in the
    # same instant race the engine's loop and stay phase-locked on its outcome; pauses on the scale
    # of a prefill give every request a fresh phase (see measure.loadgen.run_load). 0: no pause.
    think_ms: float | str = "auto"

    @field_validator("think_ms", mode="before")
    @classmethod
    def _think(cls, v):
        return check_think(v, "ms", field="")     # pydantic names the field

    @property
    def think(self) -> float | str:
        """think_ms in seconds ("auto" as it is): what the load generator and the simulator take."""
        return self.think_ms if isinstance(self.think_ms, str) else self.think_ms / 1e3

    def think_for(self, arm: "ArmSpec") -> float | str:
        """The think setting a run of this arm uses (s or "auto"): none for one client or open loops."""
        if arm.concurrency < 2 or arm.rate_rps:
            return 0.0
        return self.think


class ArmSpec(_Frozen):
    name: str
    weights: str = "Q4_K_M"
    kv: str = "f16"
    spec: str = "none"
    spec_k: int = 0
    slots: int = Field(1, ge=1)
    batching: str = "continuous"                # vllm: "chunked" = chunked prefill with chunk_tokens a step
    chunk_tokens: int = Field(0, ge=0)
    concurrency: int = Field(1, ge=1)
    rate_rps: float | None = None
    quality: bool = False                       # also run the quality arm for this configuration
    repeats: int | None = Field(None, ge=1)     # measure this arm more often than load.repeats (repeat spread)
    # requests for this arm instead of load.requests: a closed loop of c clients needs about as many
    # rounds as one client for its percentiles to settle, so c times the requests
    requests: int | None = Field(None, ge=2)
    # Options of this arm's engine that are not Knobs because the simulator has no physics for them
    # (vllm's prefix caching, enforce_eager): they key the anchor and are in its provenance.
    engine_options: dict[str, str | int | float | bool] = Field(default_factory=dict)
    # This arm's own lengths or trace instead of the workload's (see WorkloadSpec; `workload()`).
    prompt_tokens: int | None = Field(None, ge=8)
    output_tokens: int | None = Field(None, ge=2)
    trace: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _trace(cls, data, info: ValidationInfo):
        return with_trace(data, info, fill=False)

    def workload(self, study_workload: WorkloadSpec) -> WorkloadSpec:
        """The workload this arm runs: the study's, or its own trace or lengths under their own name."""
        wl = study_workload
        if self.trace:
            return WorkloadSpec(name=trace_name(self.trace), trace=self.trace, api=wl.api)
        P, N = self.prompt_tokens or wl.prompt_tokens, self.output_tokens or wl.output_tokens
        if (P, N) == (wl.prompt_tokens, wl.output_tokens):
            return wl
        return WorkloadSpec(name=f"p{P}-n{N}", prompt_tokens=P, output_tokens=N, api=wl.api)

    def n_requests(self, load: "LoadSpec", workload: WorkloadSpec | None = None) -> int:
        """Measured requests: this arm's or the load's count; a trace's rows (its first `requests` if set)."""
        rows = len(workload.trace_rows()) if workload is not None and workload.trace else 0
        if rows:
            return min(self.requests or rows, rows)
        return self.requests or load.requests

    def knobs(self) -> Knobs:
        return Knobs(weights=self.weights, kv=self.kv, spec=self.spec, spec_k=self.spec_k, slots=self.slots,
                     batching=self.batching, chunk_tokens=self.chunk_tokens)

    @model_validator(mode="after")
    def _check(self) -> "ArmSpec":
        self.knobs()    # raises ValueError naming the knob and its allowed values
        return self


class QualitySpec(_Frozen):
    # gsm8k: the headline task; retrieval: needle-in-a-haystack at retrieval_lengths (per_cell items
    # per length and depth) — what KV compression and eviction damage first.
    task: Literal["gsm8k", "retrieval"] = "gsm8k"
    mode: Literal["chat-0shot", "lm-eval-5shot"] = "chat-0shot"
    n: int = Field(10, ge=1, le=1319)
    seed: int = 1234
    max_tokens: int = Field(256, ge=16)
    baseline_arm: str | None = None
    floor: float = Field(0.95, gt=0, le=1.5)
    # Mean token-level KL divergence from the baseline (nats/token, quality.kld) a configuration may
    # add where it was measured: the guard's high-power axis (atlas.regimes); none: not used.
    kld_max: float | None = Field(0.05, gt=0)
    # Let configurations whose quality or speed rests only on priors win regimes (default: they are
    # listed as "projected — measure to confirm", with the command that would measure them).
    allow_priors: bool = False
    retrieval_lengths: list[int] = Field(default_factory=lambda: [512, 1024])
    retrieval_per_cell: int = Field(2, ge=1)
    # Tokens scored per configuration by `pareto-atlas kld` (quality.kld), in whole chunks of 255
    # (llama-perplexity at ctx 512); the baseline's saved logits take ~300 kB a token while it runs.
    # 2040 (8 chunks, ~1 min a configuration on 2 cores) already separates Q8_0, Q4_0 and a q4_0 KV
    # cache of the default study by non-overlapping chunk-clustered intervals (README).
    kld_tokens: int = 2040
    # `build` runs the KL stage (building llama-perplexity in the background the first time);
    # `pareto-atlas kld` runs it whatever this says.
    kld: bool = True

    @field_validator("kld_tokens")
    @classmethod
    def _kld_tokens(cls, v: int) -> int:
        if not 255 <= v <= 65280:
            raise ValueError(f"{v} is not allowed; between 255 (one chunk of 512 scores 255 tokens) and 65280 "
                             f"(256 chunks: the baseline's logits file then takes ~20 GB)")
        return v


class EvictionSpec(_Frozen):
    """The KV-eviction sweep `pareto-atlas evict` runs on the real model in transformers (llama.cpp
    has no eviction): every policy at every keep ratio, plus the full cache on the same items."""

    policies: list[str] = Field(default_factory=lambda: ["streaming", "h2o", "snapkv"])
    keeps: list[float] = Field(default_factory=lambda: [0.5, 0.25])   # KV budget / prompt length
    task: Literal["gsm8k", "retrieval"] | None = None   # default: the study's quality task
    n: int | None = Field(None, ge=1)     # GSM8K items, or retrieval items per (length, depth); default: [quality]'s
    chunk: int = Field(128, ge=0)         # prefill chunk compressed after each (0: the whole prompt at once)

    @field_validator("policies")
    @classmethod
    def _policies(cls, policies: list[str]) -> list[str]:
        # policies.py is numpy only; imported here so that spec stays free of it until a study asks
        from pareto_atlas.quality.eviction.policies import canonical_policy

        if not policies:
            raise ValueError("at least one policy is required")
        return list(dict.fromkeys(canonical_policy(p) for p in policies))

    @field_validator("keeps")
    @classmethod
    def _keeps(cls, keeps: list[float]) -> list[float]:
        if not keeps:
            raise ValueError("at least one keep ratio is required")
        for k in keeps:
            if not 0.0 < k < 1.0:
                raise ValueError(f"{k} must be in (0, 1); the full cache (1.0) is always run as the reference")
        return sorted(set(keeps), reverse=True)

    def with_overrides(self, **overrides) -> "EvictionSpec":
        """This sweep with the given fields replaced (None: keep), validated like the study file."""
        data = self.model_dump() | {k: v for k, v in overrides.items() if v is not None}
        try:
            return EvictionSpec.model_validate(data)
        except ValidationError as e:
            raise StudyError(f"evict options: {_describe(e)}") from None


class GridSpec(_Frozen):
    """A study's own knob grid: the shipped grid per hardware kind (simulate.space.default_knobs)
    restricted to the listed values of each knob; a knob left out keeps every value the shipped
    grid has. The study's arms are always simulated, whatever this lists."""

    weights: list[str] | None = None
    kv: list[str] | None = None
    eviction: list[str] | None = None           # "none" keeps the full cache
    spec: list[str] | None = None
    batching: list[str] | None = None
    slots: list[Annotated[int, Field(ge=1)]] | None = None
    sparse_budget: list[Annotated[float, Field(gt=0.0, le=1.0)]] | None = None   # 1.0: dense attention

    @model_validator(mode="after")
    def _known(self) -> "GridSpec":
        from pareto_atlas.spec.knobs import BATCHING, EVICTION, KV_TYPES, SPEC, WEIGHT_TYPES

        for name, allowed in (("weights", WEIGHT_TYPES), ("kv", KV_TYPES), ("eviction", EVICTION), ("spec", SPEC),
                              ("batching", BATCHING)):
            values = getattr(self, name)
            if values is not None and not values:
                raise ValueError(f"{name}: an empty list keeps no configuration; leave it out to keep every value")
            bad = [v for v in values or () if v not in allowed]
            if bad:
                raise ValueError(f"{name}: {bad[0]!r} is not one of {', '.join(allowed)}")
        return self

    def keeps(self, knobs: Knobs) -> bool:
        """Whether a grid configuration is in this study's grid."""
        return all(getattr(self, f) is None or getattr(knobs, f) in getattr(self, f)
                   for f in ("weights", "kv", "eviction", "spec", "batching", "slots", "sparse_budget"))


class SimulateSpec(_Frozen):
    hardware: list[str] = Field(default_factory=lambda: ["this-cpu"])
    concurrency: list[int] = Field(default_factory=lambda: [1, 2, 4, 8])
    # Poisson open loops at these fractions of each configuration's capacity (its completion rate
    # with every slot busy), beside the closed loops: P99 under random arrivals, at any card's scale.
    utilization: list[Annotated[float, Field(gt=0.0, le=1.0)]] = Field(default_factory=list)
    n_requests: int = Field(200, ge=10)
    max_configs: int = Field(20000, ge=1)
    grid: GridSpec = GridSpec()


class ShapeSpec(_Frozen):
    """A workload shape a target model is answered for: fixed prompt and output lengths."""

    name: str = Field(min_length=1, max_length=80)
    prompt_tokens: int = Field(ge=8, le=1_048_576)
    output_tokens: int = Field(ge=2, le=1_048_576)


class TargetSpec(_Frozen):
    """A model the atlas answers for: its own frontier, regimes and winners per workload (the seed
    paper's "for each (model, workload)"). The measured model is evidence for it, never a stand-in:
    its speed is simulated from its card with each card's calibration, its quality comes from the
    evidence ladder (measured, published, carried from a measured model of its family, prior)."""

    name: str = Field(min_length=1, max_length=120)
    # A shipped card, a Hugging Face config.json (or a directory holding one), or a .gguf header;
    # relative paths are read from the study's folder. Default: the measured model's own card, when
    # `name` is the study's [model] name.
    card: str | None = None
    family: str | None = None                   # default: the card's (spec/models.toml)
    hardware: list[str] | None = None           # default: [simulate] hardware
    workloads: list[ShapeSpec] | None = None    # default: the shapes the arms measured

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


class RegimeSpec(_Frozen):
    name: str
    objective: str
    direction: Literal["min", "max"] = "min"
    constraints: dict[str, list] = Field(default_factory=dict)   # column -> [op, value]
    quality_floor: float | None = None


class Study(_Frozen):
    name: str
    description: str = ""
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
    prices: dict[str, float] = Field(default_factory=dict)       # $/hour overrides by hardware name
    price_date: str = "2026-07"
    cpu_price_per_hour: float = Field(0.0835, gt=0)              # this machine's assumed rental price
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
    def _engine_options(self) -> "Study":
        # checked here, not at launch, so a misspelt option fails before any engine starts
        from pareto_atlas.measure.engines import option_keys

        allowed = option_keys(self.engine.name)
        for where, opts in [("engine.options", self.engine.options)] + [
                (f"arms.{a.name}.engine_options", a.engine_options) for a in self.arms]:
            bad = sorted(set(opts) - set(allowed))
            if bad:
                raise ValueError(f"{where}: {bad[0]!r} is not an option of engine {self.engine.name!r}; "
                                 f"allowed: {', '.join(allowed) or 'none'}")
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
                raise ValueError(f"arms.{a.name}: the workload replays a trace, whose rows give the lengths; "
                                 f"leave prompt_tokens and output_tokens out (or name another trace in the arm)")
        return self

    @model_validator(mode="after")
    def _targets(self) -> "Study":
        names = [t.name for t in self.targets]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"targets: {dup[0]!r} is named twice; target names must be unique")
        for i, t in enumerate(self.targets):
            if t.card is None and t.name != self.model.name:
                raise ValueError(f"targets.{i}.card: {t.name!r} is not the measured model ({self.model.name!r}); "
                                 f"give its card (a shipped card, a config.json or a .gguf path)")
            bad = sorted(set(t.hardware or ()) - set(self.simulate.hardware))
            if bad:
                raise ValueError(f"targets.{i}.hardware: {bad[0]!r} is not in [simulate] hardware "
                                 f"({', '.join(self.simulate.hardware)})")
        return self

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


def _describe(err: ValidationError) -> str:
    e = err.errors()[0]
    where = ".".join(str(p) for p in e["loc"]) or "(top level)"
    msg = e["msg"].removeprefix("Value error, ")
    return f"{where}: {msg}"


def parse_study(text: str, origin: str = "<study>", base: Path | None = None) -> Study:
    """A study from TOML text; `base`: the folder its relative paths (a trace) are read from."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise StudyError(f"{origin}: not valid TOML: {e}") from None
    try:
        return Study.model_validate(raw, context={"base": base})
    except ValidationError as e:
        raise StudyError(f"{origin}: {_describe(e)}") from None


BUILTIN = {"default": "default_study.toml", "tiny": "tiny_study.toml", "ladder": "ladder_study.toml",
           "vllm-cpu": "vllm_cpu_study.toml", "paper": "paper_study.toml"}


def load_study(path_or_name: str | Path | None = None) -> Study:
    """A study from a TOML path, or a built-in by name (`default`, `tiny`, `ladder`, `vllm-cpu`, `paper`)."""
    if path_or_name is None or str(path_or_name) in BUILTIN:
        fname = BUILTIN[str(path_or_name or "default")]
        return parse_study(resources.files("pareto_atlas.spec").joinpath(fname).read_text(), f"built-in:{fname}")
    path = Path(path_or_name)
    if not path.exists():
        raise StudyError(f"study file {path} does not exist; built-in studies: {', '.join(BUILTIN)}")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise StudyError(f"{path}: cannot read: {e}") from None
    return parse_study(text, str(path), path.resolve().parent)


def study_ref(study: Study) -> str:
    """How a command line names this study: its built-in name (`default`), else `<name>.toml`."""
    import tomllib

    for key, fname in BUILTIN.items():
        try:
            if tomllib.loads(resources.files("pareto_atlas.spec").joinpath(fname).read_text()).get("name") == study.name:
                return key
        except (OSError, tomllib.TOMLDecodeError):
            continue
    return f"{study.name}.toml"
