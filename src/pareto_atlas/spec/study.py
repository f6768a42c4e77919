"""The study file: what to measure, what to simulate, and how to judge it.

Loaded from TOML into frozen pydantic models; any error is one line naming the file, the field
and what is allowed.
"""

from __future__ import annotations

import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from pareto_atlas.spec import bounds as B
from pareto_atlas.spec.bounds import Bool, Int, Name, Price, Real, Slug
from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.spec.think import check_think
from pareto_atlas.spec.trace import TraceRow, trace_name, trace_rows, with_trace


class StudyError(ValueError):
    """The study file is missing, unreadable or invalid."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ModelSpec(_Frozen):
    name: Name                                  # a known source (measure.weights.SOURCES), a .gguf path, or a label
    # The architecture card: a shipped card name, a Hugging Face config.json (or a directory holding
    # one; relative paths from the study's folder), or the fields inline ([model.card] n_layers = ...);
    # default: read from the GGUF. An attached endpoint (engine "openai") reads nothing local: a model
    # the package does not ship needs one.
    card: str | dict[str, int | bool | str] | None = None
    chat: Bool = True
    draft: str | None = None                    # draft model for spec="draft" arms
    # Engines that read Hugging Face directories (vllm): a local directory to serve as it is, or a
    # model id ("org/name") in the measuring host's Hugging Face cache; default: the source GGUF
    # converted once (measure.hf_model), cached by its sha256.
    hf_dir: str | None = None
    # engine "openai": the model id the endpoint serves (its /v1/models id); default: its first one
    served: str | None = None

    @field_validator("card")
    @classmethod
    def _card(cls, v, info: ValidationInfo):
        base = (info.context or {}).get("base")
        if isinstance(v, dict):
            from pareto_atlas.spec.cards import CardError, inline_model_card

            try:
                inline_model_card(v)
            except (CardError, TypeError) as e:
                raise ValueError(str(e)) from None
            return v
        if v is None or base is None or not (v.endswith(".json") or "/" in v):
            return v
        p = Path(v)
        return str(p if p.is_absolute() else Path(base) / p)


class EngineSpec(_Frozen):
    name: Name = "llamacpp"
    # The hardware card the arms measure on (an arm's own `hardware` wins): a shipped card of
    # spec/hardware.toml or this-cpu. Through Ray, each anchor runs on a node offering `hw:<card>`.
    hardware: str = "this-cpu"
    threads: Int(1, B.MAX_THREADS, "threads one host runs") = 2
    # tokens of one request's context: every length of the study (prompt + output) must fit in it
    n_ctx: Int(256, B.MAX_CTX, "tokens of one request's context") = 2048
    base_url: str | None = None                 # for engine = "openai"
    api_key_env: str | None = None              # name of the env var holding the key; the key is never stored
    # Engine-specific launch options for every arm (an arm's engine_options override them); each
    # engine names the keys it takes (e.g. vllm: enforce_eager, kv_cache_space_gib, prefix_caching).
    options: dict[str, str | int | float | bool] = Field(default_factory=dict)

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^https?://[^\s/?#]+(/[^\s]*)?$", v):
            raise ValueError(f"{B.show(v)} is not allowed: an http:// or https:// URL of the endpoint")
        return v

    @field_validator("api_key_env")
    @classmethod
    def _key_env(cls, v: str | None) -> str | None:
        # a name, never the key: a value that looks like a key is refused before it is stored anywhere
        if v is not None and not re.match(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$", v):
            raise ValueError("is not the name of an environment variable (letters, digits, _): give the name of "
                             "the variable holding the key, never the key itself")
        return v

    @field_validator("hardware")
    @classmethod
    def _hardware(cls, v: str) -> str:
        return check_hardware(v)


class WorkloadSpec(_Frozen):
    name: Name = "chat-128-32"
    prompt_tokens: Int(8, B.MAX_CTX, "tokens; with output_tokens within engine.n_ctx") = 128
    output_tokens: Int(2, B.MAX_CTX, "tokens; with prompt_tokens within engine.n_ctx") = 32
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
    requests: Int(2, B.MAX_REQUESTS, "requests of one anchor one host sends") = 8
    warmup: Int(0, 1000, "warm-up requests") = 1
    timeout_s: Real(0.0, B.MAX_TIMEOUT_S, "seconds one request may take", lo_open=True) = 120.0
    repeats: Int(1, 100, "repeats of one anchor") = 1
    # Closed loops of two or more clients: the mean of each client's seeded exponential pause (ms)
    # before each request; "auto": the warm-up's TTFT (one prefill). Identical requests sent in the
    # same instant race the engine's loop and stay phase-locked on its outcome; pauses on the scale
    # of a prefill give every request a fresh phase (see measure.loadgen.run_load). 0: no pause.
    think_ms: float | str = "auto"

    @field_validator("think_ms", mode="before")
    @classmethod
    def _think(cls, v):
        if v == "auto" or isinstance(v, str):
            return check_think(v, "ms", field="")     # pydantic names the field
        return B.check_real(v, 0.0, B.MAX_THINK_MS, "ms of one client's mean pause, or 'auto'")

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
    name: Name
    weights: str = "Q4_K_M"
    kv: str = "f16"
    spec: str = "none"
    spec_k: Int(0, 64, "tokens drafted a step") = 0
    slots: Int(1, B.MAX_SLOTS, "sequences one host's engine decodes together") = 1
    batching: str = "continuous"                # vllm: "chunked" = chunked prefill with chunk_tokens a step
    chunk_tokens: Int(0, B.MAX_CTX, "tokens; within engine.n_ctx") = 0
    concurrency: Int(1, B.MAX_CLIENTS, "clients one host's load generator runs") = 1
    rate_rps: Real(B.MIN_RATE_RPS, B.MAX_RATE_RPS, "requests/s one host sends", optional=True) = None
    quality: Bool = False                       # also run the quality arm for this configuration
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
    hardware: str | None = None                 # the card this arm measures on; default: engine.hardware
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
        if self.model is not None and self.quality:
            raise ValueError(f"arms.{self.name}.quality: an arm with its own model measures speed only (quality "
                             f"runs score the study's [model]); set quality = false or measure it in its own study")
        return self


def check_hardware(name: str) -> str:
    """A hardware card a study may measure on: this-cpu or a shipped card (spec/hardware.toml)."""
    from pareto_atlas.spec.cards import shipped_hardware

    known = ["this-cpu", *shipped_hardware()]
    if name not in known:
        raise ValueError(f"{name!r} is not a hardware card; allowed: {', '.join(known)}")
    return name


# The quality tasks a study can score (quality.campaign), each guarding the workloads that name it.
QualityTask = Literal["gsm8k", "retrieval", "humaneval", "ifeval", "ruler"]


class QualitySpec(_Frozen):
    # gsm8k: the headline task; retrieval: needle-in-a-haystack at retrieval_lengths (per_cell items
    # per length and depth) — what KV compression and eviction damage first.
    # humaneval: pass@1 of 164 problems, each answer run in quality.sandbox; ifeval: 541
    # instruction-following prompts, strict and loose. Both take `n` seeded items (their size: all).
    # ruler: RULER's synthetic long-context subtasks (quality.ruler) at ruler_lengths, per_cell items
    # per subtask and length.
    task: QualityTask = "gsm8k"
    mode: Literal["chat-0shot", "lm-eval-5shot"] = "chat-0shot"
    n: Int(1, 1319, "GSM8K test items") = 10
    seed: Int(0, 2**31 - 1, "a sampling seed") = 1234
    max_tokens: Int(16, B.MAX_CTX, "tokens generated per item; within engine.n_ctx") = 256
    baseline_arm: str | None = None
    floor: Real(0.0, 1.5, "quality relative to the baseline", lo_open=True) = 0.95
    # Mean token-level KL divergence from the baseline (nats/token, quality.kld) a configuration may
    # add where it was measured: the guard's high-power axis (atlas.regimes); none: not used.
    kld_max: Real(0.0, 100.0, "nats/token", lo_open=True, optional=True) = 0.05
    # Let configurations whose quality or speed rests only on priors win regimes (default: they are
    # listed as "projected — measure to confirm", with the command that would measure them).
    allow_priors: Bool = False
    retrieval_lengths: list[Int(64, B.MAX_CTX, "tokens of a haystack; within engine.n_ctx")] = Field(
        default_factory=lambda: [512, 1024], min_length=1, max_length=32)
    retrieval_per_cell: Int(1, 1000, "items per length and depth") = 2
    # Each length holds a whole request (prompt, chat template and answer), as RULER's max_seq_length.
    ruler_lengths: list[Int(512, B.MAX_CTX, "tokens of a whole request; within engine.n_ctx")] = Field(
        default_factory=lambda: [1024, 2048], min_length=1, max_length=32)
    ruler_per_cell: Int(1, 1000, "items per subtask and length") = 2
    ruler_subtasks: list[Literal["niah_single_1", "niah_multikey_2", "niah_multikey_3", "vt", "cwe"]] = Field(
        default_factory=lambda: ["niah_single_1", "niah_multikey_2", "niah_multikey_3", "vt", "cwe"],
        min_length=1, max_length=5)
    # Tokens scored per configuration by `pareto-atlas kld` (quality.kld), in whole chunks of 255
    # (llama-perplexity at ctx 512); the baseline's saved logits take ~300 kB a token while it runs.
    # 2040 (8 chunks, ~1 min a configuration on 2 cores) already separates Q8_0, Q4_0 and a q4_0 KV
    # cache of the default study by non-overlapping chunk-clustered intervals (README).
    kld_tokens: int = 2040
    # `build` runs the KL stage (building llama-perplexity in the background the first time);
    # `pareto-atlas kld` runs it whatever this says.
    kld: Bool = True
    # Further tasks the quality stage scores on every quality arm, each with its item count (a
    # retrieval count is per length and depth), so that each workload is guarded by its own task
    # (a [[targets]] workload's `task`; the others by `task` above): { humaneval = 40, ifeval = 60 }.
    tasks: dict[QualityTask, Int(1, 1319, "items of the task")] = Field(default_factory=dict, max_length=8)

    def all_tasks(self) -> list[str]:
        """The study's task first, then the further ones, each once."""
        return list(dict.fromkeys([self.task, *self.tasks]))

    @field_validator("ruler_lengths", "ruler_subtasks")
    @classmethod
    def _ruler_unique(cls, v: list):
        B.unique(list(v), "the value")   # one item id per (subtask, length, index)
        return v

    @field_validator("kld_tokens", mode="before")
    @classmethod
    def _kld_tokens(cls, v) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or not 255 <= v <= 65280:
            raise ValueError(f"{B.show(v)} is not allowed; an integer between 255 (one chunk of 512 scores 255 tokens) "
                             f"and 65280 (256 chunks: the baseline's logits file then takes ~20 GB)")
        return v


class EvictionSpec(_Frozen):
    """The KV-eviction sweep `pareto-atlas evict` runs on the real model in transformers (llama.cpp
    has no eviction): every policy at every keep ratio, plus the full cache on the same items."""

    policies: list[str] = Field(default_factory=lambda: ["streaming", "h2o", "snapkv"])
    keeps: list[float] = Field(default_factory=lambda: [0.5, 0.25])   # KV budget / prompt length
    task: Literal["gsm8k", "retrieval", "ruler"] | None = None   # default: the study's quality task
    # GSM8K items, or retrieval items per (length, depth); default: [quality]'s
    n: Int(1, 1319, "items", optional=True) = None
    # prefill chunk compressed after each (0: the whole prompt at once)
    chunk: Int(0, B.MAX_CTX, "tokens") = 128
    # the context lengths of retrieval or RULER items the sweep asks (default: [quality]'s); a dense
    # model in transformers on a CPU pays for every token of a long prompt
    lengths: list[Int(64, B.MAX_CTX, "tokens of a long-context item")] | None = Field(None, min_length=1, max_length=32)
    # also run the sweep in `pareto-atlas build`, after the quality stages (needs the eviction extra:
    # without torch the stage is skipped with a note, and eviction stays projected)
    build: Bool = False

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
    # Parallel layouts (simulate.space.parallel_variants): naming any of these opts a study into the
    # shipped layouts whose fields all take listed values; none named keeps the one-GPU space.
    tp: list[Annotated[int, Field(ge=1, le=64)]] | None = None
    pp: list[Annotated[int, Field(ge=1, le=64)]] | None = None
    replicas: list[Annotated[int, Field(ge=1, le=1024)]] | None = None
    prefill_workers: list[Annotated[int, Field(ge=1, le=64)]] | None = None
    prefill_tp: list[Annotated[int, Field(ge=0, le=64)]] | None = None     # 0: the decode workers' tp
    decode_workers: list[Annotated[int, Field(ge=1, le=64)]] | None = None

    @model_validator(mode="after")
    def _known(self) -> "GridSpec":
        from pareto_atlas.spec.knobs import BATCHING, EVICTION, KV_TYPES, SPEC, WEIGHT_TYPES

        for name in ("tp", "prefill_tp"):
            odd = [v for v in getattr(self, name) or () if v & (v - 1)]
            if odd:
                raise ValueError(f"{name}: {odd[0]} is not a power of two (1, 2, 4, 8{', or 0' if name == 'prefill_tp' else ''})")

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
    hardware: list[str] = Field(default_factory=lambda: ["this-cpu"], min_length=1, max_length=64)
    concurrency: list[Int(1, B.MAX_SIM_CLIENTS, "clients of a simulated closed loop")] = Field(
        default_factory=lambda: [1, 2, 4, 8], min_length=1, max_length=64)
    # Poisson open loops at these fractions of each configuration's capacity (its completion rate
    # with every slot busy), beside the closed loops: P99 under random arrivals, at any card's scale.
    utilization: list[Real(0.0, 1.0, "a fraction of capacity", lo_open=True)] = Field(default_factory=list,
                                                                                       max_length=64)
    n_requests: Int(10, 100_000, "requests of one simulated point") = 200
    max_configs: Int(1, 1_000_000, "configurations simulated") = 20000
    grid: GridSpec = GridSpec()

    @field_validator("hardware")
    @classmethod
    def _hardware(cls, v: list[str]) -> list[str]:
        B.unique(v, "hardware")
        return _known_hardware(v)


class ShapeSpec(_Frozen):
    """A workload shape a target model is answered for: fixed prompt and output lengths."""

    name: Name
    prompt_tokens: Int(8, B.MAX_CTX, "tokens")
    output_tokens: Int(2, B.MAX_CTX, "tokens")
    # The quality task that guards this workload's winners (code: humaneval; instruction following:
    # ifeval; long context: retrieval; math: gsm8k); default: the study's [quality] task.
    task: QualityTask | None = None


class TargetSpec(_Frozen):
    """A model the atlas answers for: its own frontier, regimes and winners per workload (the seed
    paper's "for each (model, workload)"). The measured model is evidence for it, never a stand-in:
    its speed is simulated from its card with each card's calibration, its quality comes from the
    evidence ladder (measured, published, carried from a measured model of its family, prior)."""

    name: Name
    # A shipped card, a Hugging Face config.json (or a directory holding one), or a .gguf header;
    # relative paths are read from the study's folder. Default: the measured model's own card, when
    # `name` is the study's [model] name.
    card: str | None = None
    family: Name | None = None                  # default: the card's (spec/models.toml)
    hardware: list[str] | None = None           # default: [simulate] hardware
    workloads: list[ShapeSpec] | None = Field(None, max_length=64)   # default: the shapes the arms measured

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


class RegimeSpec(_Frozen):
    name: Name
    objective: Name
    direction: Literal["min", "max"] = "min"
    constraints: dict[str, list] = Field(default_factory=dict)   # column -> [op, value]
    quality_floor: Real(0.0, 1.5, "quality relative to the baseline", lo_open=True, optional=True) = None


class Study(_Frozen):
    name: Slug                                  # names atlas-out/<name>: a folder name, never a path
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
    prices: dict[str, Price] = Field(default_factory=dict)       # $/hour overrides by hardware name
    price_date: str = Field("2026-07", pattern=r"^\d{4}(-\d{2}(-\d{2})?)?$")
    cpu_price_per_hour: Price = 0.0835                           # this machine's assumed rental price
    # Another study (built-in name or TOML path) on the same hardware: this study's anchors go into
    # its store, and this study's calibration and atlas see its measured anchors beside its own, so
    # two engines are compared on one machine (vllm-cpu names default).
    compare_with: str | None = None
    # A published atlas whose claims `build` prints beside this study's answers, claim by claim
    # (report.claims): "paper", the seed paper's (its numbers in the references file report.claims reads).
    claims: Literal["paper"] | None = None

    @model_validator(mode="before")
    @classmethod
    def _checkpoint_weights(cls, data):
        # vllm: each arm's weights read from, or checked against, its checkpoint's quantization_config
        from pareto_atlas.measure.hf_checkpoint import fill_arm_weights

        return fill_arm_weights(data) if isinstance(data, dict) else data

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
    def _within_context(self) -> "Study":
        # one request's prompt and output must fit the engine's context: else every request of the
        # arm fails at the engine, after the engine has started
        ctx = self.engine.n_ctx
        for where, wl in [("workload", self.workload)] + [(f"arms.{a.name}", a.workload(self.workload))
                                                          for a in self.arms]:
            rows = wl.trace_rows()
            p, n = (max((r.prompt_tokens + r.output_tokens, r.prompt_tokens, r.output_tokens) for r in rows)[1:]
                    if rows else (wl.prompt_tokens, wl.output_tokens))
            if p + n > ctx:
                what = "its trace's longest request" if rows else "prompt_tokens + output_tokens"
                raise ValueError(f"{where}: {what} = {p} + {n} tokens is not allowed: within engine.n_ctx = {ctx}")
        for a in self.arms:
            if a.chunk_tokens > ctx:
                raise ValueError(f"arms.{a.name}.chunk_tokens: {a.chunk_tokens} is not allowed: within engine.n_ctx = {ctx}")
            n = a.n_requests(self.load, a.workload(self.workload))
            if a.rate_rps and n / a.rate_rps > B.MAX_ARRIVALS_S:
                raise ValueError(f"arms.{a.name}.rate_rps: {a.rate_rps:g} is not allowed: {n} requests at that rate "
                                 f"arrive over {n / a.rate_rps / 3600:.0f} h; at most {B.MAX_ARRIVALS_S / 3600:.0f} h")
        q = self.quality
        for task in q.all_tasks():      # every task the quality stage scores must fit one request
            longest, what = {
                "retrieval": (q.max_tokens + max(q.retrieval_lengths), "max_tokens + the longest retrieval_lengths"),
                "ruler": (max(q.ruler_lengths), "the longest ruler_lengths (prompt and answer within it)"),
            }.get(task, (q.max_tokens, "max_tokens"))
            if longest > ctx:
                raise ValueError(f"quality: {what} = {longest} tokens is not allowed: within engine.n_ctx = {ctx}")
        return self

    @model_validator(mode="after")
    def _names(self) -> "Study":
        B.unique([r.name for r in self.regimes], "regimes: name")
        try:
            _known_hardware(list(self.prices))
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
                raise ValueError(f"targets.{i}.card: {t.name!r} is not the measured model ({self.model.name!r}); "
                                 f"give its card (a shipped card, a config.json or a .gguf path)")
            bad = sorted(set(t.hardware or ()) - set(self.simulate.hardware))
            if bad:
                raise ValueError(f"targets.{i}.hardware: {bad[0]!r} is not in [simulate] hardware "
                                 f"({', '.join(self.simulate.hardware)})")
            scored = self.quality.all_tasks()
            for j, w in enumerate(t.workloads or ()):
                # the measured model's workloads are guarded by what the quality stage scores; another
                # model's may rest on published scores for any task
                if w.task is not None and t.card is None and self.measures and w.task not in scored:
                    raise ValueError(f"targets.{i}.workloads.{j}.task: {w.task!r} is not scored by this study; "
                                     f"allowed: {', '.join(scored)} (or add it to [quality] tasks)")
        return self

    @model_validator(mode="after")
    def _served_model(self) -> "Study":
        # an endpoint serves the model: nothing local is read, so a model the package does not ship
        # needs its card from the study (the simulator's shapes)
        from pareto_atlas.measure.weights import SOURCES

        m = self.model
        if self.engine.name == "openai" and m.card is None and m.name not in SOURCES and not m.name.endswith(".gguf"):
            raise ValueError(f"model.card: engine 'openai' reads nothing local, and {m.name!r} is not a model the "
                             f"package ships; give a card (a shipped card name, a config.json path, or inline fields)")
        return self

    def hardware_of(self, arm: ArmSpec) -> str:
        """The hardware card `arm` measures on: its own, else the engine's."""
        return arm.hardware or self.engine.hardware

    @model_validator(mode="after")
    def _arm_models(self) -> "Study":
        if self.baseline.model is not None:
            raise ValueError(f"quality.baseline_arm: {self.baseline.name!r} serves its own model; the baseline "
                             f"(by default the first arm) must serve the study's [model] ({self.model.name!r})")
        for a in self.arms:
            if a.spec == "draft" and not self.model_for(a).draft:
                where = f"arms.{a.name}.model.draft" if a.model is not None else "model.draft"
                raise ValueError(f"{where}: arm {a.name!r} has spec = 'draft' and needs a draft model "
                                 f"(a known source or a .gguf path sharing the target's tokenizer)")
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


def _known_hardware(names: list[str]) -> list[str]:
    from pareto_atlas.spec.cards import shipped_hardware

    known = ["this-cpu", *shipped_hardware()]
    bad = [h for h in names if h not in known]
    if bad:
        raise ValueError(f"{B.show(bad[0])} is not a hardware card; known: {', '.join(known)}")
    return names


_UNION_TAG = re.compile(r"^(str|int|float|bool|none|(function-\w+|list|dict|union|nullable)\[.*\])$")


def _fields_at(loc: tuple) -> list[str]:
    """The field names of the table at `loc` (a path into Study), for an unknown field's error."""
    import typing

    model: type[BaseModel] = Study
    for part in loc:
        if isinstance(part, int):
            continue
        ann = model.model_fields[part].annotation if part in model.model_fields else None
        inner = [a for a in (typing.get_args(ann) or (ann,)) if isinstance(a, type) and issubclass(a, BaseModel)]
        inner += [b for a in typing.get_args(ann) for b in typing.get_args(a)
                  if isinstance(b, type) and issubclass(b, BaseModel)]
        if not inner:
            return []
        model = inner[0]
    return list(model.model_fields)


def _describe(err: ValidationError) -> str:
    """The first error as one line: where (dotted path), the value where pydantic's message lacks it, and why."""
    e = err.errors()[0]
    # pydantic names the member of a union it tried ("options.a.str"): not a place in the file
    where = ".".join(str(p) for p in e["loc"] if not _UNION_TAG.match(str(p)))
    msg = e["msg"].removeprefix("Value error, ")
    if e["type"] == "extra_forbidden":
        msg = f"unknown field; allowed: {', '.join(_fields_at(e['loc'][:-1]))}"
    elif e["type"] not in ("value_error", "missing") and "input" in e:
        msg = f"{B.show(e['input'])} is not allowed: {msg}"
    return " ".join((f"{where}: {msg}" if where else msg).split())     # a check across fields names its own


def parse_study(text: str, origin: str = "<study>", base: Path | None = None) -> Study:
    """A study from TOML text; `base`: the folder its relative paths (a trace) are read from."""
    try:
        raw = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError) as e:     # ValueError: an integer of over 4300 digits
        raise StudyError(f"{origin}: not valid TOML: {' '.join(str(e).split())[:200]}") from None
    return study_from_dict(raw, origin, base)


def study_from_dict(raw: dict, origin: str = "<study>", base: Path | None = None) -> Study:
    """A study from its parsed TOML tables; any error is one StudyError line."""
    try:
        return Study.model_validate(raw, context={"base": base})
    except ValidationError as e:
        raise StudyError(f"{origin}: {_describe(e)}") from None


BUILTIN = {"default": "default_study.toml", "full": "full_study.toml", "tiny": "tiny_study.toml", "ladder": "ladder_study.toml",
           "vllm-cpu": "vllm_cpu_study.toml", "sizes": "sizes_study.toml", "paper": "paper_study.toml",
           "workloads": "workloads_study.toml", "llama70b": "llama70b_study.toml"}


def load_study(path_or_name: str | Path | None = None) -> Study:
    """A study from a TOML path, or a built-in by name (`default`, `full`, `tiny`, `ladder`, `vllm-cpu`, `sizes`,
    `workloads`, `paper`, `llama70b`)."""
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

    # the default and the full study share a name (and so a store): the arms tell them apart
    arms = [a.name for a in study.arms]
    named = []
    for key, fname in BUILTIN.items():
        try:
            raw = tomllib.loads(resources.files("pareto_atlas.spec").joinpath(fname).read_text())
        except (OSError, tomllib.TOMLDecodeError):
            continue
        if raw.get("name") == study.name:
            if [a.get("name") for a in raw.get("arms", [])] == arms:
                return key
            named.append(key)
    return named[0] if named else f"{study.name}.toml"
