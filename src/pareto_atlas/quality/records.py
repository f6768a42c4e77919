"""The quality stage's two value types: an item to ask, and the raw record of one answer.

Records are what gets saved (store) and everything else is derived from them: scores, agreement,
guards. `rescore` (scoring.py) recomputes extraction from `output` alone and never re-generates.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping

ENDPOINTS = ("completions", "chat")


@dataclass(frozen=True)
class QualityItem:
    """One prompt, as sent: the same item gives the same `prompt_sha256` on every arm."""

    item_id: str  # stable across arms, e.g. "gsm8k/test/0042"
    task: str  # a quality task's name (quality.tasks: gsm8k, retrieval, humaneval, ifeval, ruler)
    variant: str  # scoring rules: "lm-eval-5shot" | "chat-0shot" | "niah"
    target: str  # reference answer (GSM8K: the number after "#### ")
    prompt: str | None = None  # for /v1/completions
    messages: tuple[tuple[str, str], ...] | None = None  # (role, content) for /v1/chat/completions
    stop: tuple[str, ...] = ()
    max_tokens: int = 256
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError(f"quality item {self.item_id}: give exactly one of prompt or messages")
        if self.max_tokens < 1:
            raise ValueError(f"quality item {self.item_id}: max_tokens {self.max_tokens} must be >= 1")

    @property
    def endpoint(self) -> str:
        return "completions" if self.prompt is not None else "chat"

    def prompt_sha256(self) -> str:
        body = self.prompt if self.prompt is not None else json.dumps([list(m) for m in self.messages])
        return hashlib.sha256(f"{self.endpoint}\0{body}".encode()).hexdigest()


@dataclass(frozen=True)
class QualityRecord:
    """One generated answer and its scoring. Errors are kept (error set, correct False)."""

    item_id: str
    task: str
    variant: str
    prompt_sha256: str
    target: str
    output: str  # text exactly as the server returned it
    extracted_strict: str
    extracted_flexible: str
    correct_strict: bool
    correct_flexible: bool
    latency_s: float  # send to full response, monotonic clock
    stop: tuple[str, ...] = ()  # stop strings re-applied by scoring
    token_ids: tuple[int, ...] | None = None  # generated ids when the server returns them
    token_logprobs: tuple[float, ...] | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None  # server usage
    completion_tokens: int | None = None
    error: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (tuples become lists) for the store."""
        d = asdict(self)
        d["meta"] = dict(self.meta)
        for k in ("stop", "token_ids", "token_logprobs"):
            if d[k] is not None:
                d[k] = list(d[k])
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "QualityRecord":
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"quality record: unknown field {unknown[0]!r}; allowed: {', '.join(sorted(names))}")
        d = dict(d)
        for k in ("stop", "token_ids", "token_logprobs"):
            if d.get(k) is not None:
                d[k] = tuple(d[k])
        d["meta"] = dict(d.get("meta") or {})
        return cls(**d)
