"""The project's own anchors written in a peer tool's format (`export --format vllm-bench|guidellm`),
so its figures read in the tools people already use, and read back by this package unchanged.

Figures are derived from the anchor's raw records with the project's definitions; the peer's names
are used only where the peer means the same quantity (vLLM's TPOT is the project's; GuideLLM's
time_per_output_token includes the first token, and is written that way). Percentiles are numpy's
linear, as both tools compute them. One file per anchor.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import numpy as np

from pareto_atlas import __version__
from pareto_atlas.measure.records import RequestRecord
from pareto_atlas.store import Store

FORMATS = ("vllm-bench", "guidellm")
PCTS = (
    ("p001", 0.1),
    ("p01", 1),
    ("p05", 5),
    ("p10", 10),
    ("p25", 25),
    ("p50", 50),
    ("p75", 75),
    ("p90", 90),
    ("p95", 95),
    ("p99", 99),
    ("p999", 99.9),
)


def _ok(records: list[dict]) -> list[RequestRecord]:
    recs = [RequestRecord.from_dict(r) for r in records if not r.get("warmup")]
    return [r for r in recs if r.ok and r.first_token_ts is not None and r.end_ts is not None]


def _stats(values: list[float], stem: str) -> dict:
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return {f"{k}_{stem}_ms": 0.0 for k in ("mean", "median", "std", "p99")}
    return {
        f"mean_{stem}_ms": float(v.mean()),
        f"median_{stem}_ms": float(np.median(v)),
        f"std_{stem}_ms": float(v.std()),
        f"p99_{stem}_ms": float(np.percentile(v, 99)),
    }


def _duration(recs: list[RequestRecord]) -> float:
    return max(r.end_ts for r in recs) - min(r.send_ts for r in recs) if recs else 0.0


def vllm_result(anchor: dict, records: list[dict]) -> dict:
    """One anchor as `vllm bench serve --save-result --save-detailed` writes a run."""
    load, recs = json.loads(anchor["load_json"]), _ok(records)
    all_recs = [r for r in records if not r.get("warmup")]
    ttft = [r.ttft_s * 1e3 for r in recs]
    tpot = [r.tpot_s * 1e3 for r in recs if r.tpot_s is not None]
    itl = [g * 1e3 for r in recs for g in np.diff(r.chunk_ts)]
    e2e = [r.e2e_s * 1e3 for r in recs]
    dur = _duration(recs)
    n_in, n_out = sum(r.prompt_tokens or 0 for r in recs), sum(r.completion_tokens or 0 for r in recs)
    rate = load.get("rate_rps")
    out = {
        "date": datetime.now().strftime("%Y%m%d-%H%M%S"),
        "endpoint_type": "openai",
        "backend": "openai",
        "label": f"pareto-atlas {anchor['arm']}",
        "model_id": anchor["model"],
        "tokenizer_id": anchor["model"],
        "num_prompts": len(all_recs),
        "request_rate": rate if rate else "inf",
        "burstiness": 1.0,
        "max_concurrency": load.get("concurrency") or None,
        "duration": dur,
        "completed": len(recs),
        "failed": len(all_recs) - len(recs),
        "total_input_tokens": n_in,
        "total_output_tokens": n_out,
        "request_throughput": len(recs) / dur if dur else 0.0,
        "request_goodput": None,
        "output_throughput": n_out / dur if dur else 0.0,
        "total_token_throughput": (n_in + n_out) / dur if dur else 0.0,
        **_stats(ttft, "ttft"),
        **_stats(tpot, "tpot"),
        **_stats(itl, "itl"),
        **_stats(e2e, "e2el"),
        "input_lens": [r.prompt_tokens or 0 for r in recs],
        "output_lens": [r.completion_tokens or 0 for r in recs],
        "ttfts": [r.ttft_s for r in recs],
        "itls": [np.diff(r.chunk_ts).tolist() for r in recs],
        # not a vLLM key: each request's end-to-end latency (s), so TPOT read back is the one measured
        # (vLLM's own reader ignores unknown keys)
        "e2els": [r.e2e_s for r in recs],
        "generated_texts": [""] * len(recs),
        "errors": [""] * len(recs),
        "pareto_atlas": {
            "version": __version__,
            "anchor_id": anchor["anchor_id"],
            "study": anchor["study"],
            "hardware": anchor["hardware"],
            "engine": anchor["engine"],
            "knobs": json.loads(anchor["knobs_json"]),
        },
    }
    return out


def _dist(values: list[float]) -> dict:
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return {"mean": 0.0, "median": 0.0, "count": 0, "total_sum": 0.0, "percentiles": {k: 0.0 for k, _ in PCTS}}
    return {
        "mean": float(v.mean()),
        "median": float(np.median(v)),
        "mode": float(v[0]),
        "variance": float(v.var()),
        "std_dev": float(v.std()),
        "min": float(v.min()),
        "max": float(v.max()),
        "count": int(v.size),
        "total_sum": float(v.sum()),
        "percentiles": {k: float(np.percentile(v, q)) for k, q in PCTS},
        "pdf": None,
    }


def _block(values: list[float]) -> dict:
    zero = _dist([])
    return {"successful": _dist(values), "errored": zero, "incomplete": zero, "total": _dist(values)}


def guidellm_benchmark(anchor: dict, records: list[dict]) -> dict:
    """One anchor as one benchmark of a GuideLLM (>= 0.4) report."""
    load, recs = json.loads(anchor["load_json"]), _ok(records)
    wl = json.loads(anchor["workload_json"])
    n_all = len([r for r in records if not r.get("warmup")])
    conc, rate = load.get("concurrency") or 0, load.get("rate_rps")
    strategy = (
        {"type_": "constant", "rate": rate}
        if rate
        else {"type_": "synchronous"}
        if conc <= 1
        else {"type_": "concurrent", "max_concurrency": conc, "streams": conc}
    )
    asked = json.dumps({"body": {"max_tokens": wl.get("output_tokens"), "ignore_eos": True}})
    reqs = [
        {
            "type_": "generative_request_stats",
            "request_args": asked,
            "request_start_time": r.send_ts,
            "request_end_time": r.end_ts,
            "request_latency": r.e2e_s,
            "prompt_tokens": r.prompt_tokens,
            "output_tokens": r.completion_tokens,
            "time_to_first_token_ms": r.ttft_s * 1e3,
            "inter_token_latency_ms": r.tpot_s * 1e3 if r.tpot_s is not None else None,
            "time_per_output_token_ms": r.e2e_s * 1e3 / r.completion_tokens if r.completion_tokens else None,
        }
        for r in recs
    ]
    metrics = {
        "request_totals": {"successful": len(recs), "errored": n_all - len(recs), "incomplete": 0, "total": n_all},
        "time_to_first_token_ms": _block([r.ttft_s * 1e3 for r in recs]),
        "inter_token_latency_ms": _block([r.tpot_s * 1e3 for r in recs if r.tpot_s is not None]),
        # GuideLLM's meaning: latency / output tokens, first token included
        "time_per_output_token_ms": _block([r.e2e_s * 1e3 / r.completion_tokens for r in recs if r.completion_tokens]),
        "request_latency": _block([r.e2e_s for r in recs]),
        "output_token_count": _block([float(r.completion_tokens or 0) for r in recs]),
        "prompt_token_count": _block([float(r.prompt_tokens or 0) for r in recs]),
    }
    return {
        "type_": "generative_benchmark",
        "config": {"strategy": strategy},
        "metrics": metrics,
        "requests": {"successful": reqs, "errored": [], "incomplete": []},
        "duration": _duration(recs),
        "pareto_atlas": {"anchor_id": anchor["anchor_id"], "study": anchor["study"], "arm": anchor["arm"]},
    }


def export_peer(store: Store, study: str, out_dir: Path, fmt: str) -> list[Path]:
    """Every finished anchor the study measured itself (not imported ones), with raw records, one
    file each, in `fmt`."""
    if fmt not in FORMATS:
        raise ValueError(f"export format {fmt!r}: allowed {', '.join(FORMATS)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for _, a in store.anchors(study).iterrows():
        if json.loads(a.provenance_json or "{}").get("origin") == "imported":
            continue  # a peer's figures go back to their own file, not out as the project's
        records = store.requests(a.anchor_id)
        if not _ok(records):
            continue
        row = a.to_dict()
        if fmt == "vllm-bench":
            doc = vllm_result(row, records)
        else:
            doc = {
                "metadata": {
                    "version": 1,
                    "guidellm_version": f"report-schema (written by pareto-atlas "
                    f"{__version__}; percentiles numpy linear)",
                },
                "benchmarks": [guidellm_benchmark(row, records)],
            }
        p = out_dir / f"{a.anchor_id}.{fmt}.json"
        p.write_text(json.dumps(doc, indent=1))
        paths.append(p)
    return paths
