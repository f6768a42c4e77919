"""vLLM's own counters (`/metrics`, Prometheus text) over one measured run: speculation's drafted
and accepted tokens, and the server-side latency histograms beside the client's figures.

vLLM reports no per-request timings in its responses (llama.cpp does), so the server's side of a
run is the difference of two scrapes: after the warm-up, and after the last measured request.
"""

from __future__ import annotations

import math
import re

import httpx

# name{labels} value  (labels ignored: one server, one model; label sets of a name are summed)
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{[^}]*\})?\s+([-+0-9.eEinfINFaN]+)(?:\s+\d+)?$")
SOURCE = "vllm /metrics: counter and histogram deltas over the measured requests (warm-up excluded)"


def parse_prometheus(text: str) -> dict[str, float]:
    """Every `vllm:` sample of an exposition, summed over label sets (histogram buckets dropped)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line.strip())
        if not m or not m.group(1).startswith("vllm:") or m.group(1).endswith("_bucket"):
            continue
        try:
            v = float(m.group(2))
        except ValueError:
            continue
        if math.isfinite(v):
            out[m.group(1)] = out.get(m.group(1), 0.0) + v
    return out


def scrape(base_url: str, timeout_s: float = 5.0) -> dict[str, float] | None:
    """The server's counters now; None when it has no /metrics (the run then goes without them)."""
    try:
        r = httpx.get(f"{base_url}/metrics", timeout=timeout_s)
        r.raise_for_status()
    except httpx.HTTPError:
        return None
    return parse_prometheus(r.text)


def _delta(before: dict, after: dict, name: str) -> float | None:
    if name not in after:
        return None
    return after[name] - before.get(name, 0.0)


def _mean_ms(before: dict, after: dict, hist: str) -> float | None:
    s, n = _delta(before, after, f"{hist}_sum"), _delta(before, after, f"{hist}_count")
    return 1e3 * s / n if s is not None and n else None


def run_summary(before: dict | None, after: dict | None) -> dict:
    """Server-side figures of the run between two scrapes, as metrics keys (absent when unscraped).

    spec_*: drafted and accepted tokens (vLLM's SpecDecoding counters), the measured acceptance per
    drafted token, and drafts per generated token (what the simulator's draft fraction needs).
    server_*_ms_mean: vLLM's histograms' means (TTFT, inter-token latency, prefill, decode, queue).
    server_prefix_*: prompt tokens its prefix cache looked up and found, and their ratio.
    """
    if before is None or after is None:
        return {}
    out: dict = {"server_counters_source": SOURCE}
    drafted = _delta(before, after, "vllm:spec_decode_num_draft_tokens_total")
    accepted = _delta(before, after, "vllm:spec_decode_num_accepted_tokens_total")
    generated = _delta(before, after, "vllm:generation_tokens_total")
    if drafted is not None:
        out["spec_draft_n"] = int(drafted)
        out["spec_draft_accepted"] = int(accepted or 0)
        out["spec_acceptance"] = (accepted or 0) / drafted if drafted else None
        out["spec_drafts"] = int(_delta(before, after, "vllm:spec_decode_num_drafts_total") or 0)
        out["spec_drafted_per_token"] = drafted / generated if generated else None
    for key, hist in (
        ("server_ttft_ms_mean", "vllm:time_to_first_token_seconds"),
        ("server_itl_ms_mean", "vllm:inter_token_latency_seconds"),
        ("server_prefill_ms_mean", "vllm:request_prefill_time_seconds"),
        ("server_decode_ms_mean", "vllm:request_decode_time_seconds"),
        ("server_queue_ms_mean", "vllm:request_queue_time_seconds"),
        ("server_e2e_ms_mean", "vllm:e2e_request_latency_seconds"),
    ):
        v = _mean_ms(before, after, hist)
        if v is not None:
            out[key] = v
    if generated is not None:
        out["server_generation_tokens"] = int(generated)
    # the prefix cache's own count (prompt tokens looked up, and found): the server's side of the hit
    # rate the responses report request by request (metrics.prefix_hit_rate)
    queries = _delta(before, after, "vllm:prefix_cache_queries_total")
    hits = _delta(before, after, "vllm:prefix_cache_hits_total")
    if queries is not None:
        out["server_prefix_cache_queries"] = int(queries)
        out["server_prefix_cache_hits"] = int(hits or 0)
        out["server_prefix_hit_rate"] = (hits or 0) / queries if queries else None
    return out


def cross_check(summary: dict, client_ttft_ms_mean: float | None, client_tpot_ms_mean: float | None) -> dict:
    """The client's means minus the server's: the harness + HTTP + streaming overhead."""
    out = {}
    if client_ttft_ms_mean is not None and summary.get("server_ttft_ms_mean") is not None:
        out["ttft_minus_server_ttft_ms_mean"] = client_ttft_ms_mean - summary["server_ttft_ms_mean"]
    if client_tpot_ms_mean is not None and summary.get("server_itl_ms_mean") is not None:
        out["tpot_minus_server_itl_ms_mean"] = client_tpot_ms_mean - summary["server_itl_ms_mean"]
    return out
