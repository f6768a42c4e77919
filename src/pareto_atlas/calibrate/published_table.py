"""Published GPU measurements as calibration input: the shipped table (spec/published_anchors.csv)
plus any a user adds, validated row by row, and turned into the anchor rows the fit reads."""

from __future__ import annotations

from functools import lru_cache

import csv
import hashlib
import io
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from pareto_atlas.simulate.space import GPU_KV, GPU_WEIGHTS
from pareto_atlas.spec.bounds import MAX_CTX, show
from pareto_atlas.spec.cards import shipped_hardware, shipped_models

SHIPPED = "published_anchors.csv"
SHIPPED_MULTIGPU = "published_multigpu.csv"  # rows on several GPUs (and their sources' one-GPU rows)
ENGINES = ("vllm", "trtllm", "sglang", "lmdeploy", "tgi")
# How the published run loaded the engine: one static batch of load_value requests sent together
# ("batch"), load_value closed-loop clients ("concurrency"), a Poisson rate of load_value req/s
# ("rate"), or load_value requests all queued at once for maximum throughput ("offline").
LOADS = ("batch", "concurrency", "rate", "offline")
# The statistic of the row's latency columns; "unstated" where the source does not say (aiconfigurator's
# silicon_sample.csv), held against the simulated median like a mean.
STATS = ("mean", "p50", "p99", "unstated", "-")
LATENCY = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
METRICS = LATENCY + ("out_tok_s",)
COLUMNS = (
    (
        "source_id",
        "source",
        "date",
        "engine",
        "engine_version",
        "gpu",
        "gpu_published",
        "model",
        "model_published",
        "weights",
        "weights_published",
        "kv",
        "prompt_tokens",
        "output_tokens",
        "load",
        "load_value",
        "n_requests",
        "stat",
    )
    + METRICS
    + ("notes",)
)
REQUIRED = (
    "source_id",
    "source",
    "date",
    "engine",
    "gpu",
    "model",
    "weights",
    "kv",
    "prompt_tokens",
    "output_tokens",
    "load",
    "load_value",
    "stat",
)
# Where the row ran. Aggregated (prefill_workers = decode_workers = 0): `replicas` copies of a
# tp x pp engine (data parallel, or attention-DP), n_gpus = tp * pp * replicas. Disaggregated: prefill
# workers of prefill_tp GPUs each and decode workers of tp x pp each (replicas 1), n_gpus =
# prefill_workers * prefill_tp + decode_workers * tp * pp. A table without these columns (the
# single-GPU one) reads as one GPU: the defaults.
PARALLEL = ("tp", "pp", "replicas", "prefill_workers", "prefill_tp", "decode_workers", "n_gpus")
PARALLEL_DEFAULT = {
    "tp": "1",
    "pp": "1",
    "replicas": "1",
    "prefill_workers": "0",
    "prefill_tp": "0",
    "decode_workers": "0",
    "n_gpus": "1",
}
MAX_PARALLEL = 256  # GPUs of one published deployment, at most (a typo is an error)
DATE = re.compile(r"^(undated|\d{4}(-\d{2}(-\d{2})?)?)$")
UNSTATED_KV = "unstated"
OFFLINE_WAVES = 3  # full batches simulated for an "offline" (all queued) row


class PublishedTableError(ValueError):
    """A row of a published-anchor table breaks the format; the message names file, line and field."""


@dataclass(frozen=True)
class PublishedTable:
    rows: pd.DataFrame  # one validated row per published setup, plus `origin` (file:line)
    paths: tuple[str, ...]
    sha256: str  # of the rows as read: the key any cached calibration is stored under

    def only(self, engines: list[str]) -> "PublishedTable":
        """The rows measured on these engines (a fit per engine), keyed by their own hash."""
        rows = self.rows[self.rows.engine.isin(engines)].reset_index(drop=True)
        if rows.empty:
            raise PublishedTableError(
                f"no published anchor on engine {', '.join(engines)}; tables have "
                f"{', '.join(sorted(set(self.rows.engine)))}"
            )
        return PublishedTable(rows, self.paths, _sha(rows))


def _sha(rows: pd.DataFrame) -> str:
    # a one-GPU table hashes as it did before the parallelism columns, so its cached fits stay valid
    cols = list(COLUMNS)
    if any(c in rows and (rows[c] != PARALLEL_DEFAULT[c]).any() for c in PARALLEL):
        cols += list(PARALLEL)
    return hashlib.sha256(rows[cols].to_csv(index=False).encode()).hexdigest()


def _allowed(field: str, value: str, allowed) -> str:
    return f"field {field!r}: {show(value)} is not allowed; allowed: {', '.join(allowed)}"


# Upper bounds a published setup stays within (a typo is an error, not an anchor): lengths within
# the longest context (spec.bounds.MAX_CTX), a batch, clients or requests one simulated run holds,
# latencies within three hours, throughput within ten million tokens/s.
MAX = {
    "prompt_tokens": MAX_CTX,
    "output_tokens": MAX_CTX,
    "load_value": 100_000,
    "n_requests": 1_000_000,
    "out_tok_s": 1e7,
    **{m: 1e7 for m in LATENCY},
}


def _number(field: str, value: str, integer: bool) -> str:
    try:
        v = int(value) if integer else float(value)
    except ValueError:
        return f"field {field!r}: {show(value)} is not {'an integer' if integer else 'a number'}"
    hi = MAX[field]
    return "" if 0 < v <= hi and np.isfinite(v) else f"field {field!r}: {show(value)} must be > 0 and <= {hi:g}"


def parallel_error(r: dict[str, str]) -> str:
    """Why the row's parallelism columns are invalid ("" when valid); empty or absent ones are defaults."""
    v = {}
    for f in PARALLEL:
        raw = r.get(f, "").strip() or PARALLEL_DEFAULT[f]
        lo = int(PARALLEL_DEFAULT[f])
        try:
            v[f] = int(raw)
        except ValueError:
            return f"field {f!r}: {show(raw)} is not an integer"
        if not lo <= v[f] <= MAX_PARALLEL:
            return f"field {f!r}: {show(raw)} must be >= {lo} and <= {MAX_PARALLEL}"
    pw, dw = v["prefill_workers"], v["decode_workers"]
    if (pw > 0) != (dw > 0):
        return (
            f"fields 'prefill_workers' {pw} and 'decode_workers' {dw}: both 0 (aggregated) or both >= 1 (disaggregated)"
        )
    if pw == 0:
        if v["prefill_tp"]:
            return f"field 'prefill_tp': {v['prefill_tp']} on an aggregated row (prefill_workers 0); allowed: 0"
        want, how = v["tp"] * v["pp"] * v["replicas"], "tp * pp * replicas"
    else:
        if v["prefill_tp"] < 1 or v["replicas"] != 1:
            return "a disaggregated row needs prefill_tp >= 1 and replicas 1 (tp and pp are each decode worker's)"
        want, how = (
            pw * v["prefill_tp"] + dw * v["tp"] * v["pp"],
            "prefill_workers * prefill_tp + decode_workers * tp * pp",
        )
    if v["n_gpus"] != want:
        return f"field 'n_gpus': {v['n_gpus']} but {how} = {want}"
    return ""


@lru_cache(maxsize=1)
def _shipped_names() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The shipped GPU cards' and model cards' names, sorted: read once per process, not once per row (a
    table of a thousand rows built every card a thousand times)."""
    gpus = tuple(sorted(n for n, h in shipped_hardware().items() if h.kind == "gpu"))
    return gpus, tuple(sorted(shipped_models()))


def row_error(r: dict[str, str]) -> str:
    """Why this row is invalid ("" when it is valid): the first broken field and what it allows."""
    for f in REQUIRED:
        if not r.get(f, "").strip():
            return f"field {f!r} is empty (required: {', '.join(REQUIRED)})"
    gpus, models = _shipped_names()
    checks = (
        ("engine", ENGINES),
        ("gpu", gpus),
        ("model", models),
        ("weights", GPU_WEIGHTS),
        ("kv", GPU_KV + (UNSTATED_KV,)),
        ("load", LOADS),
        ("stat", STATS),
    )
    for f, allowed in checks:
        if r[f] not in allowed:
            return _allowed(f, r[f], allowed)
    if not DATE.match(r["date"]):
        return f"field 'date': {show(r['date'])} is not YYYY, YYYY-MM, YYYY-MM-DD or undated"
    for f, integer in (("prompt_tokens", True), ("output_tokens", True), ("load_value", r["load"] != "rate")):
        if err := _number(f, r[f], integer):
            return err
    for f in ("n_requests",) + METRICS:
        if r.get(f, "").strip() and (err := _number(f, r[f], f == "n_requests")):
            return err
    if not any(r.get(m, "").strip() for m in METRICS):
        return f"no metric: give at least one of {', '.join(METRICS)}"
    lat = [m for m in LATENCY if r.get(m, "").strip()]
    if lat and r["stat"] == "-":
        return f"field 'stat': '-' but {', '.join(lat)} given; say which statistic: mean, p50 or p99"
    if r.get("e2e_ms", "").strip() and r["load"] != "batch":
        return "field 'e2e_ms': only for load 'batch' (one batch's end-to-end latency)"
    return parallel_error(r)


def read_table(path: Path | str | None = None, shipped: str = SHIPPED) -> list[dict[str, str]]:
    """The rows of one CSV table (the shipped one named `shipped` when path is None), each with its
    `origin` and its parallelism (the defaults where the table has no such column)."""
    if path is None:
        text, name = resources.files("pareto_atlas.spec").joinpath(shipped).read_text(), f"spec/{shipped}"
    else:
        if not Path(path).is_file():
            raise FileNotFoundError(f"published table {path}: no such file")
        try:
            text, name = Path(path).read_text(), str(path)
        except (OSError, UnicodeDecodeError) as e:
            raise PublishedTableError(f"{path}: cannot read ({type(e).__name__})") from None
    reader = csv.DictReader(io.StringIO(text))
    rows = []
    try:
        missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
        if missing:
            raise PublishedTableError(f"{name}:1: missing columns {', '.join(missing)}; columns: {', '.join(COLUMNS)}")
        for r in reader:
            line = reader.line_num  # the row's last physical line: a quoted field may span lines
            r = {k: (v or "").strip() for k, v in r.items() if isinstance(k, str) and isinstance(v, (str, type(None)))}
            if err := row_error(r):
                raise PublishedTableError(f"{name}:{line}: {err}")
            rows.append(
                {
                    **{c: r.get(c, "") for c in COLUMNS},
                    **{c: r.get(c, "") or PARALLEL_DEFAULT[c] for c in PARALLEL},
                    "origin": f"{name}:{line}",
                }
            )
    except csv.Error as e:
        raise PublishedTableError(f"{name}:{reader.line_num}: not a CSV table ({e})") from None
    return rows


def load_published(paths: list[Path | str] | None = None, shipped: bool = True) -> PublishedTable:
    """The shipped table (unless shipped=False) and the user's tables, validated, as one table: the
    one-GPU fit's input, so a row on several GPUs is an error here (load_multigpu reads those)."""
    sources = ([None] if shipped else []) + list(paths or [])
    rows = [r for p in sources for r in read_table(p)]
    if not rows:
        raise PublishedTableError("no published anchors: the tables given are empty")
    if multi := next((r for r in rows if r["n_gpus"] != "1"), None):
        raise PublishedTableError(
            f"{multi['origin']}: field 'n_gpus': {multi['n_gpus']}; the one-GPU fit reads "
            f"rows on 1 GPU (several-GPU rows go in a table like spec/{SHIPPED_MULTIGPU})"
        )
    df = pd.DataFrame(rows)
    return PublishedTable(df, tuple("spec/" + SHIPPED if p is None else str(p) for p in sources), _sha(df))


def load_multigpu(paths: list[Path | str] | None = None, shipped: bool = True) -> PublishedTable:
    """The shipped multi-GPU table (spec/published_multigpu.csv, unless shipped=False) and the user's,
    validated, as one table."""
    sources = ([None] if shipped else []) + list(paths or [])
    rows = [r for p in sources for r in read_table(p, SHIPPED_MULTIGPU)]
    if not rows:
        raise PublishedTableError("no published multi-GPU rows: the tables given are empty")
    df = pd.DataFrame(rows)
    return PublishedTable(df, tuple("spec/" + SHIPPED_MULTIGPU if p is None else str(p) for p in sources), _sha(df))


def _num(v: str) -> float:
    return float(v) if v else np.nan


def published_metrics(r: pd.Series) -> str:
    """The row's metrics as the source printed them, e.g. "ttft_ms 27.0, itl_ms 5.1 (p50)"."""
    stat = f" ({r['stat']})" if r["stat"] != "-" else ""
    return ", ".join(f"{m} {r[m]}" for m in METRICS if r[m]) + stat


def batch1_speed(r: pd.Series) -> bool:
    """Whether the row is one request's speed: a batch of 1, several output tokens, an end-to-end
    latency or output tokens/s published and no TPOT or ITL. Its e2e / output tokens (1000 / out_tok_s)
    is then that request's latency per output token, prefill included: decode-dominated where the
    output is long beside the prompt, and reported beside TPOT only under that name ("batch-1 decode
    speed"), never as a published TPOT. Its fit target stays the throughput, output / e2e."""
    return (
        r["load"] == "batch"
        and float(r["load_value"]) == 1
        and int(r["output_tokens"]) > 1
        and not (r["tpot_ms"] or r["itl_ms"])
        and bool(r["e2e_ms"] or r["out_tok_s"])
    )


def target_values(r: pd.Series) -> dict[str, float]:
    """The fit's targets (calibrate.fit.TARGETS) from one row's published metrics: means are held
    against the simulated median (fixed-length requests make them near equal), ITL stands for TPOT
    where TPOT is not published (no speculation here: the same gaps), and a batch's end-to-end
    latency gives its throughput, batch x output tokens / latency (the batch leaves together)."""
    pct = "p99" if r["stat"] == "p99" else "p50"
    out = {
        f"ttft_{pct}_ms": _num(r["ttft_ms"]),
        f"tpot_{pct}_ms": _num(r["tpot_ms"] or r["itl_ms"]),
        "throughput_tok_s": _num(r["out_tok_s"]),
    }
    if np.isnan(out["throughput_tok_s"]) and r["e2e_ms"]:
        out["throughput_tok_s"] = float(r["load_value"]) * int(r["output_tokens"]) / (float(r["e2e_ms"]) / 1e3)
    return {k: v for k, v in out.items() if not np.isnan(v)}


def parallel_knobs(r: pd.Series | dict) -> dict:
    """The Knobs fields of the row's parallelism, only those that are not one GPU's defaults (so a
    one-GPU row's anchor is what it was): tp, pp, replicas, or a disaggregated row's pools."""
    v = {f: int(r.get(f) or PARALLEL_DEFAULT[f]) for f in PARALLEL}
    out = {f: v[f] for f in ("tp", "pp", "replicas") if v[f] != 1}
    if v["prefill_workers"]:
        out.update(
            batching="disagg",
            prefill_workers=v["prefill_workers"],
            prefill_tp=v["prefill_tp"],
            decode_workers=v["decode_workers"],
        )
    return out


def anchor_row(r: pd.Series, max_seqs: int | None = None, policy: tuple[str, int, int] | None = None) -> dict:
    """One published row as an anchor row of the fit: knobs, lengths, load and targets.

    policy: the engine's default scheduler on the card (simulate.schedulers.default_policy: batching,
    prefill token budget, sequences it runs together). A served row (clients, a rate, an offline
    queue) runs under it, as the atlas's GPU points do, so what is fitted is what is predicted; a
    static batch stays one batch. None: `continuous` (an engine without a modelled scheduler).

    A batch, and an offline run, send every request at once: they are replayed as sends at t = 0
    (a closed loop would start its clients a moment apart, and a static batch would then leave
    out all but the first). An offline run's batch holds the full-length sequences that fit
    (max_seqs, from the memory plan): its engine reserves a request's whole KV cache when it
    admits it (TensorRT-LLM's default scheduler), and with equal lengths every wave of a full
    batch is the same, so OFFLINE_WAVES of them give the throughput of thousands of requests at a
    fraction of the simulation's time. An unstated KV dtype runs as f16 (the engines' default).
    """
    load, v = r["load"], float(r["load_value"])
    n = int(r["n_requests"]) if r["n_requests"] else 0
    kv = "f16" if r["kv"] == UNSTATED_KV else r["kv"]
    batching, chunk, cap = policy or ("continuous", 0, 1 << 30)
    if load == "batch":
        batching, chunk, cap = "static", 0, 1 << 30
    row = {
        "weights": r["weights"],
        "kv": kv,
        "batching": batching,
        "chunk_tokens": chunk,
        "prompt_tokens": int(r["prompt_tokens"]),
        "output_tokens": int(r["output_tokens"]),
        "concurrency": 0,
        "rate_rps": np.nan,
        "send_offsets": None,
    }
    if load == "rate":
        row.update(slots=min(1024, cap), rate_rps=v, n_requests=n or 200)
    elif load == "concurrency":
        # a closed loop's sample: the published count, or enough requests per client for a median
        row.update(slots=min(int(v), cap), concurrency=int(v), n_requests=n or max(8 * int(v), 32))
    elif load == "offline" and max_seqs:
        k = min(int(v), OFFLINE_WAVES * max_seqs)
        row.update(slots=min(k, max_seqs, cap), n_requests=k, send_offsets=[0.0] * k)
    else:
        row.update(slots=min(int(v), cap), n_requests=int(v), send_offsets=[0.0] * int(v))
    return {**row, **parallel_knobs(r), **target_values(r)}
