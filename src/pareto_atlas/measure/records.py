"""Raw per-request records (contract 2: measure -> store).

Metrics are always derived from these records, never stored in place of them; times are
`time.monotonic()` seconds of the machine that ran the load generator.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pareto_atlas.spec.fields import check_fields


@dataclass(frozen=True)
class RequestRecord:
    idx: int  # position in the run (warm-up requests first)
    warmup: bool  # warm-up requests are kept raw but never enter metrics
    send_ts: float  # monotonic s when the request's first bytes left
    chunk_ts: tuple[float, ...] = ()  # every streamed event carrying generated text
    first_token_ts: float | None = None  # = chunk_ts[0] when any
    end_ts: float | None = None  # stream finished (or failed)
    prompt_tokens: int | None = None  # server usage
    completion_tokens: int | None = None  # server usage
    ok: bool = False  # completed and met the token-count contract
    reject_reason: str | None = None  # contract broken (the request completed)
    error: str | None = None  # transport/HTTP/timeout failure (one line)
    server_timings: dict | None = field(default=None, compare=False)
    think_s: float = 0.0  # closed loop: the client waited this long before sending
    # prompt tokens the server served from its prefix cache, as it reports them (llama.cpp's
    # timings.cache_n, vLLM's usage.prompt_tokens_details.cached_tokens); None where it reports none
    cached_tokens: int | None = None

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_token_ts is None else self.first_token_ts - self.send_ts

    @property
    def e2e_s(self) -> float | None:
        return None if self.end_ts is None else self.end_ts - self.send_ts

    @property
    def tpot_s(self) -> float | None:
        """(E2E - TTFT) / (completion_tokens - 1); None for one-token or unfinished requests."""
        if self.ttft_s is None or self.e2e_s is None or not self.completion_tokens or self.completion_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.completion_tokens - 1)

    @staticmethod
    def cached_of(usage: dict | None, timings: dict | None) -> int | None:
        """The cached prompt tokens a response reports, in either engine's words."""
        details = (usage or {}).get("prompt_tokens_details") or {}
        for v in ((timings or {}).get("cache_n"), details.get("cached_tokens") if isinstance(details, dict) else None):
            if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
                return v
        return None

    def with_verdict(self, ok: bool, reject_reason: str | None) -> "RequestRecord":
        return replace(self, ok=ok, reject_reason=reject_reason)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["chunk_ts"] = list(self.chunk_ts)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "RequestRecord":
        check_fields(cls, d, "RequestRecord")
        d = dict(d)
        d["chunk_ts"] = tuple(d.get("chunk_ts") or ())
        return cls(**d)
