"""GuideLLM's benchmarks report (`guidellm benchmark --outputs benchmarks.json`, or .yaml read as
the same objects): one anchor per benchmark (strategy) of the sweep.

Definitions (guidellm/benchmark/schemas): `time_to_first_token_ms` is TTFT; `inter_token_latency_ms`
is (latency - TTFT) / (output tokens - 1) per request, which is the project's (and vLLM's) TPOT;
`time_per_output_token_ms` is latency / output tokens, the first token included (from v0.4): a
different quantity under a similar name, kept as the tool's figure and never mapped to TPOT.
`request_latency` is in seconds, the `_ms` metrics in ms. Distributions report GuideLLM's own
percentiles (its DistributionSummary over the request values).

Layouts: from v0.4 a benchmark's strategy is `config.strategy`, its totals `metrics.request_totals`,
a request's start `request_start_time`, and the report has `metadata.guidellm_version`. Up to v0.3
(no metadata) the strategy is `args.strategy`, the totals `request_totals` beside `metrics`, and a
request's start `start_time`; the metrics are the same.
"""

from __future__ import annotations

import json

from pareto_atlas.measure.imports.parse import Fields
from pareto_atlas.measure.imports.requests import output_contract, put_derived
from pareto_atlas.measure.imports.result import ImportedAnchor, ImportFileError, Original, reject
from pareto_atlas.measure.records import RequestRecord

METHOD = "GuideLLM DistributionSummary percentiles over the successful requests"
# GuideLLM metric -> (project metric, unit scale to ms)
MAP = (
    ("time_to_first_token_ms", "ttft", 1.0),
    ("inter_token_latency_ms", "tpot", 1.0),
    ("request_latency", "e2e", 1e3),
)
STATS = (
    ("mean", "mean", None),
    ("median", "p50", None),
    ("p50", "p50", "p50"),
    ("p90", "p90", "p90"),
    ("p99", "p99", "p99"),
)


def is_report(obj: object) -> bool:
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("benchmarks"), list)
        and (
            "guidellm_version" in (obj.get("metadata") or {})
            or any(isinstance(b, dict) and b.get("type_") == "generative_benchmark" for b in obj["benchmarks"])
        )
    )


def _totals(f: Fields) -> Fields:
    m = f.sub("metrics")
    if m.has("request_totals") or not f.has("request_totals"):
        return m.sub("request_totals")
    return f.sub("request_totals")


def _load(f: Fields) -> tuple[str, float]:
    s = (f.sub("config") if f.has("config") or not f.has("args") else f.sub("args")).sub("strategy")
    kind = s.text("type_", required=True)
    if kind == "synchronous":
        return "concurrency", 1.0
    if kind in ("concurrent", "throughput"):
        n = s.integer("max_concurrency", minimum=1) or s.integer("streams", minimum=1)
        if n is not None:
            return "concurrency", float(n)
        if kind == "concurrent":
            raise reject(f.path, s.name("max_concurrency"), "strategy 'concurrent' without a concurrency")
        # throughput with no cap: every request sent at once
        totals = _totals(f)
        return "burst", float(totals.integer("total") or totals.integer("successful", required=True))
    if kind in ("constant", "poisson", "async_constant", "async_poisson"):
        return "rate", s.number("rate", required=True, minimum=1e-9)
    raise reject(
        f.path,
        s.name("type_"),
        f"{kind!r}: not a strategy this import knows (synchronous, concurrent, throughput, constant, poisson)",
    )


def _dist(m: Fields, name: str) -> Fields | None:
    block = m.sub(name, required=False)
    return block.sub("successful", required=False) if block else None


def _records(f: Fields) -> tuple[list[dict], list[float | None]]:
    reqs = f.sub("requests", required=False)
    items = (reqs.items("successful") if reqs else None) or []
    recs, asked = [], []
    for i, r in enumerate(items):
        q = Fields(f.path, r, f"{f.name('requests.successful')}[{i}]")
        t0 = q.number(
            "request_start_time" if q.has("request_start_time") or not q.has("start_time") else "start_time",
            required=True,
        )
        ttft = q.number("time_to_first_token_ms", required=True) / 1e3
        lat = q.number("request_latency", required=True)
        n_out = q.integer("output_tokens", required=True)
        recs.append(
            RequestRecord(
                idx=i,
                warmup=False,
                send_ts=t0,
                chunk_ts=(t0 + ttft,),
                first_token_ts=t0 + ttft,
                end_ts=t0 + lat,
                prompt_tokens=q.integer("prompt_tokens"),
                completion_tokens=n_out,
                ok=n_out > 0,
            ).to_dict()
        )
        asked.append(_asked(q))
    return recs, asked


def _asked(q: Fields) -> float | None:
    """The max_tokens a request asked for with ignore_eos on (None where it did not say)."""
    args = q.raw("request_args")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except (json.JSONDecodeError, RecursionError):
            return None
    body = args.get("body") if isinstance(args, dict) else None
    if not isinstance(body, dict) or not body.get("ignore_eos"):
        return None
    v = body.get("max_tokens", body.get("max_completion_tokens"))
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def parse_benchmark(f: Fields) -> ImportedAnchor:
    m = f.sub("metrics")
    totals = _totals(f)
    ok, err = totals.integer("successful", required=True), totals.integer("errored") or 0
    inc = totals.integer("incomplete") or 0
    if ok == 0:
        raise reject(
            f.path,
            totals.name("successful"),
            f"0 successful requests ({err} errored, {inc} incomplete): no measurement",
        )
    load, value = _load(f)
    out_tok, in_tok = _dist(m, "output_token_count"), _dist(m, "prompt_token_count")
    duration = f.number("duration")
    total_out = out_tok.number("total_sum") if out_tok else None
    a = ImportedAnchor(
        label=f"{load} {value:g}",
        load=load,
        load_value=value,
        n_requests=ok + err + inc,
        n_failed=err + inc,
        prompt_tokens=in_tok.number("mean") if in_tok else None,
        output_tokens=out_tok.number("mean") if out_tok else None,
        contract="unverified",
        contract_note="",
        duration_s=duration,
        throughput_tok_s=total_out / duration if total_out is not None and duration else None,
        request_rate_rps=ok / duration if duration else None,
    )
    for name, ours, scale in MAP:
        d = _dist(m, name)
        if d is None:
            continue
        pct = d.sub("percentiles", required=False)
        for key, stat, pkey in STATS:
            v = (pct.number(pkey) if pct else None) if pkey else d.number(key)
            a.put(
                ours,
                stat,
                v * scale if v is not None else None,
                Original(
                    f"{name}.successful.{pkey and 'percentiles.' + pkey or key}",
                    "s" if scale != 1.0 else "ms",
                    key,
                    METHOD,
                ),
            )
    if not a.metrics or all(v == 0.0 for d in a.metrics.values() for v in d.values()):
        raise reject(f.path, m.name("time_to_first_token_ms"), "no latency figure, or every one is 0.0 ms")
    tpot_gl = _dist(m, "time_per_output_token_ms")
    if tpot_gl is not None and tpot_gl.number("median") is not None:
        a.settings["time_per_output_token_ms.median"] = tpot_gl.number("median")
        a.notes.append(
            "GuideLLM's time_per_output_token_ms (latency / output tokens, first token included from "
            "v0.4) is not the project's TPOT: kept as the tool's figure; TPOT is its inter_token_latency_ms"
        )
    recs, asked = _records(f)
    if recs:
        a.records = recs
        full = len(recs) == ok
        a.settings["tool_aggregates"] = {
            a.original[f"{mm}.{s}"].name: x for mm, d in a.metrics.items() for s, x in d.items()
        }
        if full:  # every successful request is in the file: the project's figures from them
            a.metrics, a.original = {}, {}
            put_derived(a, recs, with_chunks=False)
        requested = asked if all(x is not None for x in asked) else None
        level, note = output_contract(
            f.path,
            f.name("requests.successful[].output_tokens"),
            [r["completion_tokens"] for r in recs],
            requested,
            "output_tokens, server usage",
        )
        if level == "verified" and not full:
            level, note = "aggregate", note + f" in the {len(recs)} requests the report samples of {ok}"
        a.contract, a.contract_note = level, note
    else:
        a.contract_note = "the report holds no per-request lengths: contract unverified"
    return a


def parse(path: str, data: dict) -> tuple[str, list[ImportedAnchor]]:
    f = Fields(path, data)
    meta = f.sub("metadata", required=False)
    version = (meta.text("guidellm_version") if meta else None) or "pre-0.4"
    benches = f.items("benchmarks", required=True)
    if not benches:
        raise ImportFileError(f"{path}: field 'benchmarks': empty")
    return version, [parse_benchmark(Fields(path, b, f"benchmarks[{i}]")) for i, b in enumerate(benches)]
