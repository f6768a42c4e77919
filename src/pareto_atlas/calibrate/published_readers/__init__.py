"""Readers of published multi-GPU measurements, one module per source format: each turns the text
of a file its publisher ships (repository, path, commit) into rows of the published table
(calibrate.published_table: COLUMNS + PARALLEL), keeping each figure's name, unit and statistic, and
counts what it leaves out and why. scripts/read_published.py runs them and writes
spec/published_multigpu.csv."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from pareto_atlas.calibrate.published_table import COLUMNS, PARALLEL, PARALLEL_DEFAULT


@dataclass(frozen=True)
class SourceFile:
    repo: str  # owner/name
    path: str  # inside the repository
    commit: str  # 40 hex digits: the version read
    text: str

    @property
    def url(self) -> str:
        return f"https://github.com/{self.repo}/blob/{self.commit}/{self.path}"


@dataclass
class ReadResult:
    rows: list[dict[str, str]] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)  # reason -> rows of the source left out

    def skip(self, reason: str) -> None:
        self.skipped[reason] += 1


def table_row(**values: str | int | float) -> dict[str, str]:
    """One row with every column of the table: the values given (as text), "" for the other metric
    and note columns, the one-GPU defaults for parallelism not given."""
    unknown = set(values) - set(COLUMNS) - set(PARALLEL)
    if unknown:
        raise KeyError(f"not a published-table column: {', '.join(sorted(unknown))}")
    row = {c: "" for c in COLUMNS} | dict(PARALLEL_DEFAULT)
    return row | {k: str(v) for k, v in values.items()}


def markdown_cells(line: str) -> list[str]:
    """The cells of one markdown table line, stripped ("| a | b |" -> ["a", "b"])."""
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|"):
        s = s[:-1]
    return [c.strip() for c in s.split("|")]


def number(cell: str) -> str:
    """A published figure as printed, thousands separators dropped ("11,147" -> "11147"); "" if none."""
    v = cell.replace(",", "").replace("*", "").strip()
    try:
        float(v)
    except ValueError:
        return ""
    return v
