"""MLPerf Inference loadgen logs: `mlperf_log_summary.txt` (text) and `mlperf_log_detail.txt`
(`:::MLLOG {json}` lines), Server and Offline scenarios.

Latencies are in ns. In the Offline scenario every sample is sent in one query, so its latency
is that whole query's, not a request's: it is kept under its own name, never offered as a request
latency (an Offline file without a throughput is rejected). Server latencies are per query (one
sample each): first-token latency is TTFT, time to output token is TPOT (LLM benchmarks). A run
loadgen marks INVALID (constraints unmet) is rejected. Throughput is in samples/s (a sample is
an image for SDXL): tokens/s only where loadgen reports tokens.
"""

from __future__ import annotations

import json
import re

from pareto_atlas.measure.imports.parse import CEILING
from pareto_atlas.measure.imports.result import ImportedAnchor, ImportFileError, Original, reject

METHOD = "MLPerf loadgen percentile (nearest rank over the query latencies)"
SUMMARY_HEAD = "MLPerf Results Summary"
# summary line / detail key -> (family, stat)
_PCT = r"(\d+\.\d+) percentile"
SUMMARY_PATTERNS = (
    (re.compile(r"^Mean latency \(ns\)$"), ("latency", "mean")),
    (re.compile(rf"^{_PCT} latency \(ns\)$"), ("latency", None)),
    (re.compile(r"^Mean First Token latency \(ns\)$", re.I), ("first_token", "mean")),
    (re.compile(rf"^{_PCT} first token latency \(ns\)$", re.I), ("first_token", None)),
    (re.compile(r"^Mean Time to Output Token \(ns\)$", re.I), ("tpot", "mean")),
    (re.compile(rf"^{_PCT} time to output token \(ns\)$", re.I), ("tpot", None)),
)
DETAIL_PATTERNS = (
    (re.compile(r"^result_mean_latency_ns$"), ("latency", "mean")),
    (re.compile(r"^result_(\d+\.\d+)_percentile_latency_ns$"), ("latency", None)),
    (re.compile(r"^result_first_token_mean_latency_ns$"), ("first_token", "mean")),
    (re.compile(r"^result_first_token_(\d+\.\d+)_percentile_latency_ns$"), ("first_token", None)),
    (re.compile(r"^result_time_to_output_token_mean(?:_ns)?$"), ("tpot", "mean")),
    (re.compile(r"^result_time_to_output_token_(\d+\.\d+)_percentile(?:_ns)?$"), ("tpot", None)),
)
STAT_OF = {"50.00": "p50", "90.00": "p90", "99.00": "p99"}
OURS = {"latency": "e2e", "first_token": "ttft", "tpot": "tpot"}


def is_summary(text: str) -> bool:
    return SUMMARY_HEAD in text[:400]


def is_detail(text: str) -> bool:
    return text.lstrip().startswith(":::MLLOG")


def _number(path: str, key: str, v: object) -> float:
    try:
        x = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise reject(path, key, f"{v!r} is not a number") from None
    if x != x or not 0 <= x <= CEILING:
        raise reject(path, key, f"{v!r} is not a finite number in [0, {CEILING:g}]")
    return x


def read_summary(path: str, text: str) -> dict:
    out: dict = {"lat": {}}
    for line in text.splitlines():
        if ":" not in line:
            continue
        k, v = (s.strip() for s in line.split(":", 1))
        if k == "Scenario":
            out["scenario"] = v
        elif k == "Result is":
            out["validity"] = v
        elif k in ("Samples per second", "Completed samples per second"):
            out["samples_per_s"] = _number(path, k, v)
        elif k in ("Tokens per second", "Completed tokens per second"):
            out["tokens_per_s"] = _number(path, k, v)
        for pat, (family, stat) in SUMMARY_PATTERNS:
            m = pat.match(k)
            if m:
                out["lat"][(family, stat or m.group(1))] = (_number(path, k, v), k)
    return out


def read_detail(path: str, text: str) -> dict:
    out: dict = {"lat": {}}
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.startswith(":::MLLOG"):
            continue
        try:
            d = json.loads(line[len(":::MLLOG") :])
        except (json.JSONDecodeError, RecursionError):
            raise ImportFileError(f"{path}:{i}: not an MLLOG JSON line") from None
        if not isinstance(d, dict) or not isinstance(d.get("key"), str):
            raise ImportFileError(f"{path}:{i}: an MLLOG line without a key")
        k, v = d["key"], d.get("value")
        if k == "loadgen_version":
            out["version"] = str(v)
        elif k == "effective_scenario":
            out["scenario"] = str(v)
        elif k == "result_validity":
            out["validity"] = str(v)
        elif k in ("result_samples_per_second", "result_completed_samples_per_sec"):
            out["samples_per_s"] = _number(path, k, v)
        elif k in ("result_tokens_per_second", "result_completed_tokens_per_sec"):
            out["tokens_per_s"] = _number(path, k, v)
        for pat, (family, stat) in DETAIL_PATTERNS:
            m = pat.match(k)
            if m:
                out["lat"][(family, stat or m.group(1))] = (_number(path, k, v), k)
    return out


def parse(path: str, text: str, detail: bool) -> tuple[str, list[ImportedAnchor]]:
    r = read_detail(path, text) if detail else read_summary(path, text)
    scenario = r.get("scenario")
    if scenario is None:
        raise reject(path, "Scenario", "missing")
    if r.get("validity") != "VALID":
        raise reject(path, "Result is", f"{r.get('validity')!r}: loadgen marks the run invalid (constraints unmet)")
    if scenario not in ("Offline", "Server", "SingleStream"):
        raise reject(path, "Scenario", f"{scenario!r}: allowed Offline, Server, SingleStream")
    samples, tokens = r.get("samples_per_s"), r.get("tokens_per_s")
    a = ImportedAnchor(
        label=f"MLPerf {scenario}",
        load="burst" if scenario == "Offline" else ("concurrency" if scenario == "SingleStream" else "rate"),
        load_value=1.0,
        n_requests=0,
        n_failed=0,
        prompt_tokens=None,
        output_tokens=None,
        contract="unverified",
        contract_note="loadgen logs hold no per-sample token counts",
        throughput_tok_s=tokens,
        request_rate_rps=samples,
    )
    a.settings = {"scenario": scenario, "samples_per_second": samples, "tokens_per_second": tokens}
    for (family, stat), (v, name) in sorted(r["lat"].items()):
        ours = STAT_OF.get(stat, stat if stat == "mean" else None)
        if scenario == "Offline":
            a.settings[f"offline_query_{family}_{stat}_ms"] = v / 1e6
        elif ours is not None:
            a.put(OURS[family], ours, v / 1e6, Original(name, "ns", stat, METHOD))
    if scenario == "Offline":
        if samples is None and tokens is None:
            raise reject(
                path,
                "Samples per second",
                "an Offline run without a throughput: its latency is the "
                "whole query's, not a request latency, and is not imported as one",
            )
        a.notes.append(
            "Offline: one query holds every sample, so its latency is the query's, not a request's; "
            "kept as offline_query_* only"
        )
    elif not a.metrics:
        raise reject(path, "latency", f"a {scenario} run without latency figures")
    if tokens is None:
        a.notes.append("throughput in samples/s only (a sample is not a token): tokens/s not established")
    version = r.get("version") or "loadgen (version not in the summary)"
    return version, [a]
