"""What a study serves and how it drives it: the model, the engine, the workload, the load."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from pareto_atlas.spec import bounds as B
from pareto_atlas.spec.bounds import Bool, Int, Name, Real
from pareto_atlas.spec.cards import CardError, inline_model_card
from pareto_atlas.spec.study.base import Frozen, check_hardware
from pareto_atlas.spec.sharing import Sharing, sharing
from pareto_atlas.spec.think import check_think
from pareto_atlas.spec.trace import TraceRow, trace_rows, with_trace

if TYPE_CHECKING:
    from pareto_atlas.spec.study.arms import ArmSpec


class ModelSpec(Frozen):
    name: Name  # a known source (measure.weights.SOURCES), a .gguf path, or a label
    # The architecture card: a shipped card name, a Hugging Face config.json (or a directory holding
    # one; relative paths from the study's folder), or the fields inline ([model.card] n_layers = ...);
    # default: read from the GGUF. An attached endpoint (engine "openai") reads nothing local: a model
    # the package does not ship needs one.
    card: str | dict[str, int | bool | str] | None = None
    chat: Bool = True
    draft: str | None = None  # draft model for spec="draft" arms
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
            try:
                inline_model_card(v)
            except (CardError, TypeError) as e:
                raise ValueError(str(e)) from None
            return v
        if v is None or base is None or not (v.endswith(".json") or "/" in v):
            return v
        p = Path(v)
        return str(p if p.is_absolute() else Path(base) / p)


class EngineSpec(Frozen):
    name: Name = "llamacpp"
    # The hardware card the arms measure on (an arm's own `hardware` wins): a shipped card of
    # spec/hardware.toml or this-cpu. Through Ray, each anchor runs on a node offering `hw:<card>`.
    hardware: str = "this-cpu"
    threads: Int(1, B.MAX_THREADS, "threads one host runs") = 2
    # tokens of one request's context: every length of the study (prompt + output) must fit in it
    n_ctx: Int(256, B.MAX_CTX, "tokens of one request's context") = 2048
    base_url: str | None = None  # for engine = "openai"
    api_key_env: str | None = None  # name of the env var holding the key; the key is never stored
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
            raise ValueError(
                "is not the name of an environment variable (letters, digits, _): give the name of "
                "the variable holding the key, never the key itself"
            )
        return v

    @field_validator("hardware")
    @classmethod
    def _hardware(cls, v: str) -> str:
        return check_hardware(v)


class WorkloadSpec(Frozen):
    name: Name = "chat-128-32"
    prompt_tokens: Int(8, B.MAX_CTX, "tokens; with output_tokens within engine.n_ctx") = 128
    output_tokens: Int(2, B.MAX_CTX, "tokens; with prompt_tokens within engine.n_ctx") = 32
    api: Literal["completions", "chat"] = "completions"
    # A trace replayed instead of fixed lengths and a load pattern (spec.trace): a shipped name or a
    # CSV/JSONL path (relative to the study file) of arrival_s, prompt_tokens, output_tokens. Its
    # rounded mean lengths then fill prompt_tokens/output_tokens, which the study must leave out.
    trace: str | None = None
    # What the requests share (spec.sharing): a shipped pattern (system-prompt, agent-shared-preamble,
    # chat-multiturn) or a table of prefix_tokens (or prefix_share), groups, turns, turn_tokens. Unset:
    # every prompt unique. A trace states its own sharing by its rows' hash_ids.
    share: str | dict[str, int | float] | None = None

    @model_validator(mode="before")
    @classmethod
    def _trace(cls, data, info: ValidationInfo):
        return with_trace(data, info)

    @model_validator(mode="after")
    def _share(self) -> "WorkloadSpec":
        if self.share is not None and self.trace:
            raise ValueError("share: a trace states what it shares by its rows' hash_ids; leave share out beside trace")
        self.sharing()  # one-line ValueError naming the field
        return self

    def sharing(self) -> Sharing | None:
        return sharing(self.share, self.prompt_tokens)

    def shares(self) -> bool:
        """Whether the requests share anything a prefix cache can reuse."""
        return self.share is not None or any(r.hash_ids for r in self.trace_rows()[:1])

    def longest_prompt(self) -> int:
        """The longest prompt of one request: a session's last turn where turns grow it."""
        s = self.sharing()
        return s.longest(self.prompt_tokens, self.output_tokens) if s else self.prompt_tokens

    def trace_rows(self) -> tuple[TraceRow, ...]:
        return trace_rows(self.trace) if self.trace else ()


class LoadSpec(Frozen):
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
            return check_think(v, "ms", field="")  # pydantic names the field
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
