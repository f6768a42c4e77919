"""Request traces: when each request arrives and how long its prompt and output are.

A trace is part of a workload (DESIGN: "arrival process, traces"): the load generator replays it
under the exact token-count contract and the simulator replays the same rows, so a measured trace
anchor and its simulated twin see one load. A study names a trace by a shipped name
(`spec/traces/<name>.csv`) or a path; an anchor records the trace's name and sha256.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

COLUMNS = {
    "arrival_s": ("arrival_s", "arrival", "timestamp", "time"),
    "prompt_tokens": ("prompt_tokens", "input_tokens", "input_len", "prompt_len", "input_length"),
    "output_tokens": ("output_tokens", "output_len", "max_tokens", "completion_tokens", "output_length"),
}
SUFFIXES = (".csv", ".jsonl", ".json")
GZIP = ".gz"  # any of them gzipped (a public trace of a few MB ships compressed)
# A row may name its prompt's blocks (the Mooncake trace format, kvcache-ai/Mooncake FAST25-release/traces:
# `hash_ids`, one id per block of this many prompt tokens, the last one partial; equal ids, equal tokens).
HASH_BLOCK_TOKENS = 512
HASH_COLUMN = "hash_ids"


class TraceError(ValueError):
    """A trace file is missing, unreadable or breaks the format; the message names file, row and column."""


@dataclass(frozen=True)
class TraceRow:
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()  # the prompt's blocks of HASH_BLOCK_TOKENS, where the trace names them


MAX_ROWS = 100_000  # requests one trace replays (spec.bounds.MAX_REQUESTS)
MAX_BYTES = 64 * 2**20


def _format(path: Path) -> str:
    """The table format of a trace file: its suffix, under a .gz one."""
    suffixes = [s.lower() for s in path.suffixes]
    return suffixes[-2] if suffixes[-1:] == [GZIP] and len(suffixes) >= 2 else (suffixes[-1] if suffixes else "")


def _stem(path: Path) -> str:
    """A trace's name: its file name less the format's suffix (and .gz)."""
    name = path.name[: -len(GZIP)] if path.name.lower().endswith(GZIP) else path.name
    return Path(name).stem


def _read_text(path: Path) -> str:
    """The file's text, decompressed where it is gzipped (its decompressed size bounded as a plain file's)."""
    if path.suffix.lower() != GZIP:
        return path.read_text()
    with gzip.open(path, "rb") as f:
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise TraceError(f"trace {path.name}: over {MAX_BYTES // 2**20} MiB decompressed")
    return data.decode()


def _records(path: Path) -> tuple[list[tuple[int, object]], int]:
    """The file's rows with their line numbers. Lines starting with '#' are comments (a trace says
    where its figures come from)."""
    try:
        if path.stat().st_size > MAX_BYTES:
            raise TraceError(f"trace {path.name}: {path.stat().st_size} bytes; at most {MAX_BYTES // 2**20} MiB")
        text = _read_text(path)
    except (OSError, UnicodeDecodeError, EOFError) as e:
        raise TraceError(
            f"trace {path.name}: cannot read ({type(e).__name__}: {str(e).splitlines()[0][:100]})"
        ) from None
    lines = [(i, s) for i, s in enumerate(text.splitlines(), start=1) if s.strip() and not s.lstrip().startswith("#")]
    if _format(path) in (".jsonl", ".json"):
        out = []
        for i, s in lines:
            try:
                out.append((i, json.loads(s)))
            except ValueError as e:
                raise TraceError(
                    f"trace {path.name} line {i}: not a JSON object ({str(e).splitlines()[0][:80]})"
                ) from None
        return out, 1
    if not lines:
        return [], 2
    try:
        reader = csv.DictReader([s for _, s in lines])
        return [(i, r) for (i, _), r in zip(lines[1:], reader)], 2
    except csv.Error as e:
        raise TraceError(f"trace {path.name}: not a CSV table ({e})") from None


def _value(path: Path, lineno: int, field: str, raw) -> float | int:
    """One cell as a finite number within bounds: arrival_s in seconds, token counts integers >= 1."""
    from pareto_atlas.spec.bounds import MAX_ARRIVALS_S, MAX_CTX, show

    where = f"trace {path.name} line {lineno}: {field}"
    try:
        v = float(raw) if not isinstance(raw, bool) and isinstance(raw, (int, float, str)) else None
    except ValueError:
        v = None
    if field == "arrival_s":
        if v is None or not 0 <= v <= MAX_ARRIVALS_S:
            raise TraceError(f"{where} = {show(raw)} is not allowed: seconds >= 0 and <= {MAX_ARRIVALS_S:g}")
        return v
    if v is None or not (1 <= v <= MAX_CTX) or v != int(v):
        raise TraceError(f"{where} = {show(raw)} is not allowed: an integer 1..{MAX_CTX} (tokens)")
    return int(v)


def load_trace(path: str | Path) -> list[TraceRow]:
    """Rows of a trace file, CSV (header row) or JSONL, sorted by arrival; arrivals are shifted
    so the first request arrives at 0. Columns: arrival_s, prompt_tokens, output_tokens (common
    aliases such as timestamp / input_len / output_len are accepted). A bad file: TraceError."""
    path = Path(path)
    if not path.exists():
        raise TraceError(f"trace: {path} does not exist")
    raw, _ = _records(path)
    if len(raw) > MAX_ROWS:
        raise TraceError(f"trace {path.name}: {len(raw)} rows; at most {MAX_ROWS} requests")
    rows = []
    for lineno, r in raw:
        if not isinstance(r, dict):
            raise TraceError(
                f"trace {path.name} line {lineno}: a row must be an object of "
                f"{', '.join(COLUMNS)}, not {type(r).__name__}"
            )
        vals = {}
        for field, aliases in COLUMNS.items():
            key = next((a for a in aliases if a in r and r[a] is not None), None)
            if key is None:
                raise TraceError(
                    f"trace {path.name} line {lineno}: missing column {field!r} "
                    f"(also accepted: {', '.join(aliases[1:])})"
                )
            raw = r[key]
            if field == "arrival_s" and key == "timestamp" and "input_length" in r and isinstance(raw, (int, float)):
                raw = raw / 1e3  # the Mooncake format's timestamps are milliseconds
            vals[field] = _value(path, lineno, field, raw)
        if r.get(HASH_COLUMN) is not None:
            vals["hash_ids"] = _hash_ids(path, lineno, r[HASH_COLUMN], vals["prompt_tokens"])
        rows.append(TraceRow(**vals))
    if 0 < sum(1 for r in rows if r.hash_ids) < len(rows):
        raise TraceError(f"trace {path.name}: {HASH_COLUMN} on some rows only; give it on every row or none")
    rows.sort(key=lambda t: t.arrival_s)
    t0 = rows[0].arrival_s if rows else 0.0
    return [TraceRow(r.arrival_s - t0, r.prompt_tokens, r.output_tokens, r.hash_ids) for r in rows]


def _hash_ids(path: Path, lineno: int, raw, prompt_tokens: int) -> tuple[int, ...]:
    """A row's block ids: integers >= 0, one per HASH_BLOCK_TOKENS prompt tokens (the last partial). A
    CSV cell holds them separated by spaces or semicolons."""
    where = f"trace {path.name} line {lineno}: {HASH_COLUMN}"
    if isinstance(raw, str):
        raw = [x for x in raw.replace(";", " ").replace(",", " ").strip("[] ").split() if x]
    try:
        ids = tuple(int(x) for x in raw if not isinstance(x, bool) and float(x) == int(x) and int(x) >= 0)
        ok = len(ids) == len(raw)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise TraceError(f"{where} is not allowed: a list of integer block ids >= 0")
    need = -(-prompt_tokens // HASH_BLOCK_TOKENS)
    if len(ids) != need:
        raise TraceError(
            f"{where}: {len(ids)} block ids is not allowed: the prompt's {prompt_tokens} tokens are "
            f"{need} block(s) of {HASH_BLOCK_TOKENS} (the last one partial)"
        )
    return ids


def shipped_traces() -> dict[str, Path]:
    """Traces that come with the package, by name (file stem)."""
    folder = resources.files("pareto_atlas.spec").joinpath("traces")
    return {_stem(Path(str(f))): Path(str(f)) for f in folder.iterdir() if _format(Path(str(f))) in SUFFIXES}


def resolve_trace(value: str, base: Path | None = None) -> str:
    """A trace setting as stored in a study: a shipped name as it is, a path made absolute
    (relative to `base`, the study file's folder, else the current one). One-line ValueError
    otherwise, saying what is allowed."""
    shipped = shipped_traces()
    if value in shipped:
        return value
    path = Path(value).expanduser()
    if not path.is_absolute():
        path = (base or Path.cwd()) / path
    if not path.is_file() or _format(path) not in SUFFIXES:
        raise ValueError(
            f"{value!r} is not allowed: a shipped trace ({', '.join(sorted(shipped)) or 'none'}) or an "
            f"existing {'/'.join(SUFFIXES)} file (or one gzipped) of arrival_s, prompt_tokens, output_tokens"
        )
    rows = trace_rows(str(path.resolve()))
    if len(rows) < 2:
        raise ValueError(f"{value!r}: a trace needs at least 2 requests, found {len(rows)}")
    return str(path.resolve())


def trace_path(value: str) -> Path:
    """The file of a resolved trace setting (see resolve_trace)."""
    return shipped_traces().get(value) or Path(value)


def trace_name(value: str) -> str:
    return _stem(trace_path(value))


@lru_cache(maxsize=32)
def trace_rows(value: str) -> tuple[TraceRow, ...]:
    return tuple(load_trace(trace_path(value)))


@lru_cache(maxsize=32)
def trace_sha256(value: str) -> str:
    return hashlib.sha256(trace_path(value).read_bytes()).hexdigest()


def typical_lengths(rows: tuple[TraceRow, ...] | list[TraceRow]) -> tuple[int, int]:
    """(prompt, output) tokens standing for the trace in one-number places (the points table's
    columns): the rounded means, so tokens per request times requests is the trace's total."""
    return (
        int(round(float(np.mean([r.prompt_tokens for r in rows])))),
        int(round(float(np.mean([r.output_tokens for r in rows])))),
    )


def identity(value: str) -> dict:
    """What keys an anchor of this trace: its name and content, never where the file lies."""
    return {"trace": trace_name(value), "trace_sha256": trace_sha256(value)}


def with_trace(data, info=None, fill: bool = True):
    """A workload's or arm's raw fields (before validation) with its trace resolved, and for a
    workload (`fill`) its lengths filled from the trace; info.context["base"]: the study's folder.
    Lengths given beside a trace are an error unless they are the trace's own (a dumped spec)."""
    if not isinstance(data, dict) or data.get("trace") is None:
        return data
    base = (getattr(info, "context", None) or {}).get("base")
    try:
        value = resolve_trace(str(data["trace"]), base)
    except (ValueError, OSError) as e:
        raise ValueError(f"trace: {e}") from None
    own = dict(zip(("prompt_tokens", "output_tokens"), typical_lengths(trace_rows(value))))
    for k, v in own.items():
        if data.get(k) is not None and (not fill or data[k] != v):
            raise ValueError(f"{k}: the trace's rows give the lengths; leave {k} out beside trace")
    return {**data, "trace": value, **(own if fill else {})}
