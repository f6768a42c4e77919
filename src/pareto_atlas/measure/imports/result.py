"""What an imported result file becomes, whatever tool wrote it: anchors (speed) or quality
evidence, each figure in the project's own definitions (docs/metrics.md) with the tool's original name,
unit and percentile method kept beside it, and the token-count contract level it can show."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# How far a file can show that every request generated exactly the tokens it asked for:
#   verified   per-request output lengths (server usage), every one equal to the requested length
#   aggregate  totals consistent with the requested length, no per-request data
#   unverified the file cannot show the contract was met (dataset lengths, no requested length)
# A file whose outputs break it (shorter or longer than asked, lengths drawn from a range) is rejected.
CONTRACT_LEVELS = ("verified", "aggregate", "unverified")
STATS = ("mean", "p50", "p90", "p99")
METRICS = ("ttft", "tpot", "itl_chunk", "e2e")  # the project's names (ms); itl_chunk: per streamed chunk


class ImportFileError(ValueError):
    """An imported file cannot be trusted or read; one line naming the file and the field."""


def reject(path: str, field_name: str, why: str) -> ImportFileError:
    return ImportFileError(f"{path}: field {field_name!r}: {why}")


@dataclass(frozen=True)
class Original:
    """Where one imported figure came from: the tool's own name, unit and statistic."""

    name: str
    unit: str
    stat: str  # mean, p50, ... as the tool labels it (e.g. "median", "p99")
    method: str  # how the tool computed its percentiles

    def to_dict(self) -> dict:
        return {"name": self.name, "unit": self.unit, "stat": self.stat, "method": self.method}


@dataclass
class ImportedAnchor:
    """One measured configuration and load of an imported file."""

    label: str  # e.g. "request rate 1 req/s", "concurrency 4"
    load: str  # concurrency | rate | burst (all sent at once) | batch
    load_value: float  # clients, req/s, or requests sent together
    n_requests: int  # measured requests (completed + failed)
    n_failed: int
    prompt_tokens: float | None  # mean per request (the requested length where fixed)
    output_tokens: float | None
    contract: str  # one of CONTRACT_LEVELS
    contract_note: str
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)  # METRICS -> STATS -> ms
    throughput_tok_s: float | None = None  # output tokens / run duration
    request_rate_rps: float | None = None
    duration_s: float | None = None
    original: dict[str, Original] = field(default_factory=dict)  # "ttft.p50" -> where it came from
    notes: list[str] = field(default_factory=list)
    records: list[dict] = field(default_factory=list)  # RequestRecord dicts, where the file has requests
    settings: dict[str, Any] = field(default_factory=dict)  # the run's own settings, as written

    def __post_init__(self) -> None:
        if self.contract not in CONTRACT_LEVELS:
            raise ValueError(f"contract {self.contract!r}: allowed {', '.join(CONTRACT_LEVELS)}")

    def put(self, metric: str, stat: str, value_ms: float | None, original: Original) -> None:
        """Keep one figure (ms) and where it came from; a missing one is left out, not zero."""
        if value_ms is None:
            return
        self.metrics.setdefault(metric, {})[stat] = float(value_ms)
        self.original[f"{metric}.{stat}"] = original


@dataclass(frozen=True)
class QualityEvidence:
    """One task score of an evaluation harness, as evidence for the knobs the importer names."""

    task: str
    metric: str  # the harness's name, e.g. "acc,none", "exact_match,strict-match"
    value: float
    stderr: float | None
    n: int  # items scored
    n_original: int | None  # items in the task
    settings: dict[str, Any]  # n-shot, generation settings, model arguments, limit


@dataclass
class ImportedFile:
    """One file, read: the tool and version its shape shows, and what it holds."""

    path: str
    sha256: str
    tool: str
    version: str
    kind: str  # speed | quality
    anchors: list[ImportedAnchor] = field(default_factory=list)
    quality: list[QualityEvidence] = field(default_factory=list)
    model_published: str | None = None  # the model as the file names it
    engine: str | None = None  # the serving engine, where the file says
    hardware_published: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def source(self) -> str:
        return f"imported:{self.tool}@{self.version}:{self.sha256}"
