"""The published-quality table: the shipped rows (spec/published_quality.csv) and the user's
tables with the same columns, validated row by row with one-line errors naming the file, the line,
the field and what it allows. `quality.published` reads the rows as evidence with intervals."""

from __future__ import annotations

import csv
import io
import math
import re
from importlib import resources
from pathlib import Path
from typing import Sequence

import pandas as pd

from pareto_atlas.spec.cards import shipped_models
from pareto_atlas.spec.knobs import EVICTION

SHIPPED = "published_quality.csv"
COLUMNS = (
    "source",
    "source_date",
    "publisher",
    "model",
    "checkpoint",
    "baseline_checkpoint",
    "method",
    "weights",
    "kv",
    "eviction",
    "kv_budget",
    "benchmark",
    "shots",
    "metric",
    "n_items",
    "score",
    "baseline_score",
    "score_stderr",
    "baseline_stderr",
    "scale",
    "harness",
    "proxy_for",
    "notes",
    "kv_scales",
    "kv_granularity",
    "kv_engine",
)
REQUIRED = (
    "source",
    "source_date",
    "publisher",
    "model",
    "checkpoint",
    "baseline_checkpoint",
    "method",
    "kv",
    "eviction",
    "benchmark",
    "metric",
    "score",
    "baseline_score",
    "scale",
)
OWN_PRECISION = ("F16", "BF16")  # the model as shipped: the baseline itself
# FP4 formats (spec.fp4): NVFP4 W4A4 (e.g. NVIDIA's TensorRT Model Optimizer checkpoints), NVFP4A16
# weight-only, MXFP4 (gpt-oss ships in it: its released checkpoint is its own reference, a row whose
# checkpoint is its baseline_checkpoint, scored against itself)
WEIGHTS = OWN_PRECISION + ("FP8", "AWQ4", "W8A8", "W8A16", "W4A16", "NVFP4", "NVFP4A16", "MXFP4")
KV = ("f16", "bf16", "fp8", "int8", "int4", "int2", "q8_0", "q4_0")
SCALES = ("percent", "proportion", "perplexity", "score")
PROPORTION = ("percent", "proportion")
# How a quantized KV cache's scales were set, as the row's own document states it: "calibrated"
# (static scales measured on calibration data), "dynamic" (computed from the tensor as it is
# written), "default" (unit scales, no calibration); "unstated" where the document does not say.
# With the granularity and the implementation (kv_engine) it names the method a score is evidence for.
KV_SCALES = ("calibrated", "dynamic", "default", "unstated")
KV_GRANULARITY = ("per-tensor", "per-head", "per-channel", "per-token", "per-group", "unstated")
SOURCE = re.compile(r"^(https?://\S+|[\w.-]+/[\w.-]+:\S+@[0-9a-f]{40})$")
DATE = re.compile(r"^\d{4}-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?$")
BENCHMARK = re.compile(r"^[a-z0-9_]+$")


class PublishedQualityError(ValueError):
    """A row of a published-quality table breaks the format; the message names file, line and field."""


def _allowed(field: str, value: str, allowed: Sequence[str]) -> str:
    return f"field {field!r}: {value!r} is not allowed; allowed: {', '.join(allowed)}"


def _number(field: str, value: str, kind: str) -> tuple[float | None, str]:
    """(value, "") or (None, why): kind is 'int>0', 'int>=0', 'num>=0' or 'num>0'."""
    try:
        v = float(int(value)) if kind.startswith("int") else float(value)
    except ValueError:
        return None, f"field {field!r}: {value!r} is not {'an integer' if kind.startswith('int') else 'a number'}"
    bad = not math.isfinite(v) or (v <= 0 if kind.endswith(">0") else v < 0)
    return (None, f"field {field!r}: {value!r} must be {kind[kind.index('>') :]} 0") if bad else (v, "")


def row_error(r: dict[str, str], models: Sequence[str]) -> str:
    """Why this row is invalid ("" when it is valid): the first broken field and what it allows."""
    for f in REQUIRED:
        if not r.get(f, ""):
            return f"field {f!r} is empty (required: {', '.join(REQUIRED)})"
    if not SOURCE.match(r["source"]):
        return f"field 'source': {r['source']!r} is not a URL or owner/repo:path@<40-hex commit>"
    if not DATE.match(r["source_date"]):
        return f"field 'source_date': {r['source_date']!r} is not YYYY-MM-DD or YYYY-MM"
    for f, allowed in (("model", models), ("kv", KV), ("eviction", EVICTION), ("scale", SCALES)):
        if r[f] not in allowed:
            return _allowed(f, r[f], allowed)
    if r.get("weights") and r["weights"] not in WEIGHTS:
        return _allowed("weights", r["weights"], WEIGHTS + ("(blank)",))
    for f, allowed in (("kv_scales", KV_SCALES), ("kv_granularity", KV_GRANULARITY)):
        if r.get(f) and r[f] not in allowed:
            return _allowed(f, r[f], allowed + ("(blank: unstated)",))
    if not BENCHMARK.match(r["benchmark"]):
        return f"field 'benchmark': {r['benchmark']!r} must be lower-case letters, digits and _ (e.g. gsm8k)"
    if r["eviction"] == "none" and r.get("kv_budget"):
        return f"field 'kv_budget': {r['kv_budget']!r} given but eviction is 'none'; leave it blank"
    if r["eviction"] != "none" and not r.get("kv_budget"):
        return f"field 'kv_budget' is empty; eviction {r['eviction']!r} needs the budget (tokens, or a ratio <= 1)"
    checks = [("score", "num>=0"), ("baseline_score", "num>=0")] + [
        (f, k)
        for f, k in (
            ("n_items", "int>0"),
            ("shots", "int>=0"),
            ("kv_budget", "num>0"),
            ("score_stderr", "num>=0"),
            ("baseline_stderr", "num>=0"),
        )
        if r.get(f)
    ]
    for f, kind in checks:
        if err := _number(f, r[f], kind)[1]:
            return err
    if r["checkpoint"] == r["baseline_checkpoint"] and float(r["score"]) != float(r["baseline_score"]):
        return (
            f"field 'baseline_score': {r['baseline_score']} differs from score {r['score']}, yet checkpoint "
            f"{r['checkpoint']!r} is its own baseline (a released reference scored against itself)"
        )
    top = {"percent": 100.0, "proportion": 1.0}.get(r["scale"])
    for f in ("score", "baseline_score"):
        if top is not None and float(r[f]) > top:
            return f"field {f!r}: {r[f]} is above {top:g}, the top of scale {r['scale']!r}"
        if r["scale"] == "perplexity" and float(r[f]) <= 0:
            return f"field {f!r}: {r[f]} must be > 0 for scale 'perplexity'"
    return ""


def _baseline_clash(rows: list[dict]) -> str:
    """A document prints one baseline per benchmark setting: two rows of one source that disagree
    on it were not both copied from that document."""
    seen: dict[tuple, dict] = {}
    for r in rows:
        key = (r["source"], r["model"], r["baseline_checkpoint"], r["benchmark"], r["metric"], r["shots"])
        first = seen.setdefault(key, r)
        if float(first["baseline_score"]) != float(r["baseline_score"]):
            return (
                f"{r['origin']}: field 'baseline_score': {r['baseline_score']} differs from "
                f"{first['baseline_score']} at {first['origin']} (same source, model, baseline, benchmark)"
            )
    return ""


def read_quality_table(path: Path | str | None = None) -> list[dict[str, str]]:
    """The rows of one table (the shipped one when path is None), validated, each with its `origin`."""
    if path is None:
        text, name = resources.files("pareto_atlas.spec").joinpath(SHIPPED).read_text(), f"spec/{SHIPPED}"
    else:
        if not Path(path).is_file():
            raise PublishedQualityError(f"published quality table {path}: no such file")
        try:  # as calibrate.published_table.read_table: a user's file that is not text is one line
            text, name = Path(path).read_text(), str(path)
        except (OSError, UnicodeDecodeError) as e:
            raise PublishedQualityError(f"{path}: cannot read ({type(e).__name__})") from None
    reader = csv.DictReader(io.StringIO(text))
    try:
        return _rows(reader, name)
    except csv.Error as e:
        raise PublishedQualityError(f"{name}:{reader.line_num}: not a CSV table ({e})") from None


def _rows(reader: csv.DictReader, name: str) -> list[dict[str, str]]:
    header = [c.strip() for c in reader.fieldnames or []]
    missing = [c for c in REQUIRED if c not in header]
    unknown = [c for c in header if c not in COLUMNS]
    if missing or unknown:
        what = f"missing columns {', '.join(missing)}" if missing else f"unknown columns {', '.join(unknown)}"
        raise PublishedQualityError(f"{name}:1: {what}; columns: {', '.join(COLUMNS)}")
    models = sorted(shipped_models())
    rows = []
    for raw in reader:
        line = reader.line_num  # the row's last physical line: a quoted field may span lines
        r = {(k or "").strip(): (v or "").strip() for k, v in raw.items() if k is not None and not isinstance(v, list)}
        if err := row_error(r, models):
            raise PublishedQualityError(f"{name}:{line}: {err}")
        row = {**{c: r.get(c, "") for c in COLUMNS}, "origin": f"{name}:{line}"}
        if row["kv"] not in ("f16", "bf16"):  # a quantized KV cache's method: unknown stays "unstated"
            row.update({f: row[f] or "unstated" for f in ("kv_scales", "kv_granularity", "kv_engine")})
        rows.append(row)
    if err := _baseline_clash(rows):
        raise PublishedQualityError(err)
    return rows


def load_published_quality(paths: Sequence[Path] = ()) -> pd.DataFrame:
    """The shipped table first, then the user's tables (same columns), as one validated frame."""
    rows = [r for p in [None, *paths] for r in read_quality_table(p)]
    return pd.DataFrame(rows, columns=[*COLUMNS, "origin"])
