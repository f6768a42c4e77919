"""Writing imported files into a study's store: every file's anchors (with their per-request
records), its quality evidence and its bytes, all files in ONE transaction. A file already in the
study (same sha256) is skipped, so importing it twice changes nothing."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path

from pareto_atlas import __version__
from pareto_atlas.measure.imports.result import METRICS, STATS, ImportedAnchor, ImportedFile
from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.store import Store
from pareto_atlas.store.db import dumps, now

NAN = float("nan")
# the project's metric names in an anchor's metrics_json (measure.metrics.Metrics.to_dict)
STORED = {"ttft": "ttft", "tpot": "tpot", "itl_chunk": "itl", "e2e": "e2e"}


@dataclass
class Outcome:
    path: str
    tool: str
    version: str
    sha256: str
    status: str  # imported | already imported
    anchors: list[str] = field(default_factory=list)  # anchor ids
    lines: list[str] = field(default_factory=list)  # what to tell the user, one line each


def _dist(d: dict[str, float]) -> dict:
    # the shape of measure.metrics.Dist; what the file does not give is NaN, never 0
    return {"n": 0, **{s: d.get(s, NAN) for s in STATS}, "p99_lo": NAN, "p99_hi": NAN}


def _fmt(v: float | None, unit: str = "") -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4g}{unit}"


def anchor_row(
    f: ImportedFile,
    a: ImportedAnchor,
    i: int,
    study: str,
    knobs: Knobs,
    hardware: str | None,
    model: str | None,
    engine: str | None,
) -> dict:
    aid = hashlib.sha256(f"{study}|{f.sha256}|{i}".encode()).hexdigest()[:20]
    open_loop = a.load in ("rate", "burst")
    metrics = {STORED[m]: _dist(a.metrics.get(m, {})) for m in METRICS}
    metrics.update(
        n_measured=a.n_requests,
        n_ok=a.n_requests - a.n_failed,
        n_errors=a.n_failed,
        n_rejected=0,
        throughput_tok_s=a.throughput_tok_s if a.throughput_tok_s is not None else NAN,
        request_rate_rps=a.request_rate_rps,
        duration_s=a.duration_s,
        percentile_method="the tool's, per figure: see provenance.original",
    )
    p, n = (round(a.prompt_tokens) if a.prompt_tokens else 0), (round(a.output_tokens) if a.output_tokens else 0)
    prov = {
        "origin": "imported",
        "source": f.source,
        "tool": f.tool,
        "tool_version": f.version,
        "sha256": f.sha256,
        "file": Path(f.path).name,
        "label": a.label,
        "contract": a.contract,
        "contract_note": a.contract_note,
        "original": {k: o.to_dict() for k, o in a.original.items()},
        "notes": a.notes,
        "settings": a.settings,
        "lengths": "mean per request" if a.contract != "verified" else "as asked, every request",
        "model_published": f.model_published,
        "knobs_named_by": "importer (default: the baseline)",
    }
    return {
        "anchor_id": aid,
        "study": study,
        "arm": f"imported:{f.tool}:{a.label}",
        "repeat": 0,
        "campaign_id": f"import-{f.sha256[:12]}",
        "status": "ok",
        "reason": None,
        "knobs_json": dumps(knobs.to_dict()),
        "workload_json": dumps(
            {"name": f"imported-{p}-{n}", "prompt_tokens": p, "output_tokens": n, "source": f.source}
        ),
        "load_json": dumps(
            {
                "requests": a.n_requests,
                "concurrency": 0 if open_loop else int(a.load_value),
                "rate_rps": a.load_value if a.load == "rate" else None,
                "think_ms": 0,
                "load": a.load,
                "load_value": a.load_value,
                "repeats": 1,
                "warmup": 0,
            }
        ),
        "model": model or f"unmatched:{f.model_published or 'unstated'}",
        "model_file": f.path,
        "model_sha256": None,
        "engine": engine or f.engine or "unstated",
        "engine_version": None,
        "hardware": hardware or "unstated",
        "hardware_json": dumps({"card": hardware, "published": f.hardware_published, "named_by": "importer"}),
        "provenance_json": dumps(prov),
        "metrics_json": dumps(metrics),
        "started_at": now(),
        "finished_at": now(),
        "tool_version": __version__,
    }


def _lines(f: ImportedFile, a: ImportedAnchor) -> str:
    m = a.metrics
    return (
        f"  {a.label}: {a.n_requests - a.n_failed}/{a.n_requests} ok, "
        f"prompt {_fmt(a.prompt_tokens)} / output {_fmt(a.output_tokens)} tokens; TTFT p50 "
        f"{_fmt(m.get('ttft', {}).get('p50'), ' ms')}, TPOT p50 {_fmt(m.get('tpot', {}).get('p50'), ' ms')}, "
        f"{_fmt(a.throughput_tok_s, ' tok/s')}, {_fmt(a.request_rate_rps, ' req/s')}; "
        f"contract {a.contract}: {a.contract_note}"
    )


def write_imports(
    store: Store,
    study: str,
    files: list[ImportedFile],
    raws: list[bytes],
    *,
    hardware: str | None = None,
    model: str | None = None,
    engine: str | None = None,
    knobs: Knobs | None = None,
) -> list[Outcome]:
    """Write every file (skipping those the study already holds) in one transaction."""
    knobs = knobs or Knobs()
    have = {r[0] for r in store.con.execute("SELECT sha256 FROM import_files WHERE study = ?", [study]).fetchall()}
    outcomes, seen = [], set()
    with store.transaction():
        for f, raw in zip(files, raws):
            o = Outcome(f.path, f.tool, f.version, f.sha256, "imported")
            outcomes.append(o)
            if f.sha256 in have or f.sha256 in seen:
                o.status = "already imported"
                o.lines.append(f"  already in study {study!r} (sha256 {f.sha256[:12]}): nothing changed")
                continue
            seen.add(f.sha256)
            for i, a in enumerate(f.anchors):
                row = anchor_row(f, a, i, study, knobs, hardware, model, engine)
                cols = list(row)
                store.con.execute(
                    f"INSERT INTO anchors ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                    [row[c] for c in cols],
                )
                if a.records:
                    store.con.executemany(
                        "INSERT INTO requests VALUES (?, ?, ?, ?, ?)",
                        [(row["anchor_id"], r["idx"], False, bool(r["ok"]), dumps(r)) for r in a.records],
                    )
                o.anchors.append(row["anchor_id"])
                o.lines.append(_lines(f, a))
                o.lines.extend(f"    note: {n}" for n in a.notes)
            for q in f.quality:
                qid = hashlib.sha256(f"{study}|{f.sha256}|{q.task}|{q.metric}".encode()).hexdigest()[:20]
                store.con.execute(
                    "INSERT INTO imported_quality VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        qid,
                        study,
                        f.sha256,
                        q.task,
                        q.metric,
                        q.value,
                        q.stderr,
                        q.n,
                        q.n_original,
                        dumps(knobs.to_dict()),
                        model or f.model_published,
                        dumps(q.settings),
                        dumps({"origin": "imported", "source": f.source}),
                        now(),
                    ],
                )
                o.lines.append(
                    f"  {q.task} {q.metric} = {q.value:.4g}"
                    + (f" ± {q.stderr:.3g} (stderr)" if q.stderr is not None else "")
                    + f" on {q.n} items"
                    + (f" of {q.n_original}" if q.n_original else "")
                )
            summary = {
                "anchors": o.anchors,
                "quality": len(f.quality),
                "notes": f.notes,
                "contracts": [a.contract for a in f.anchors],
            }
            store.con.execute(
                "INSERT INTO import_files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    study,
                    f.sha256,
                    f.tool,
                    f.version,
                    Path(f.path).name,
                    len(raw),
                    raw,
                    dumps(summary),
                    now(),
                    __version__,
                ],
            )
    return outcomes
