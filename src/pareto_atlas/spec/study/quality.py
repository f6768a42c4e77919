"""How a study judges quality: the tasks it scores ([quality]) and the KV-eviction sweep ([eviction])."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationError, field_validator

from pareto_atlas.spec import bounds as B
from pareto_atlas.spec.bounds import Bool, Int, Real
from pareto_atlas.spec.eviction_policies import canonical_policy
from pareto_atlas.spec.study.base import Frozen
from pareto_atlas.spec.study.errors import StudyError, describe
from pareto_atlas.spec.study.tasks import EvictableTask, QualityTask  # one module each in quality.tasks


class QualitySpec(Frozen):
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
        default_factory=lambda: [512, 1024], min_length=1, max_length=32
    )
    retrieval_per_cell: Int(1, 1000, "items per length and depth") = 2
    # Each length holds a whole request (prompt, chat template and answer), as RULER's max_seq_length.
    ruler_lengths: list[Int(512, B.MAX_CTX, "tokens of a whole request; within engine.n_ctx")] = Field(
        default_factory=lambda: [1024, 2048], min_length=1, max_length=32
    )
    ruler_per_cell: Int(1, 1000, "items per subtask and length") = 2
    ruler_subtasks: list[Literal["niah_single_1", "niah_multikey_2", "niah_multikey_3", "vt", "cwe"]] = Field(
        default_factory=lambda: ["niah_single_1", "niah_multikey_2", "niah_multikey_3", "vt", "cwe"],
        min_length=1,
        max_length=5,
    )
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
        B.unique(list(v), "the value")  # one item id per (subtask, length, index)
        return v

    @field_validator("kld_tokens", mode="before")
    @classmethod
    def _kld_tokens(cls, v) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or not 255 <= v <= 65280:
            raise ValueError(
                f"{B.show(v)} is not allowed; an integer between 255 (one chunk of 512 scores 255 tokens) "
                f"and 65280 (256 chunks: the baseline's logits file then takes ~20 GB)"
            )
        return v


class EvictionSpec(Frozen):
    """The KV-eviction sweep `pareto-atlas evict` runs on the real model in transformers (llama.cpp
    has no eviction): every policy at every keep ratio, plus the full cache on the same items."""

    policies: list[str] = Field(default_factory=lambda: ["streaming", "h2o", "snapkv"])
    keeps: list[float] = Field(default_factory=lambda: [0.5, 0.25])  # KV budget / prompt length
    task: EvictableTask | None = None  # default: the study's quality task
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
            raise StudyError(f"evict options: {describe(e, EvictionSpec)}") from None
