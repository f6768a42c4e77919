"""AIPerf's `profile_export_aiperf.json` and genai-perf's `profile_export_genai_perf.json`: one
block per metric, each with its own `unit` and statistics (avg, p50, p90, p99, ...).

Definitions (aiperf/metrics/types): `inter_token_latency` = (request latency - TTFT) / (output
sequence length - 1) per request, which is the project's TPOT; `inter_chunk_latency` is the gap
between streamed chunks (kept as such). Percentiles are numpy's (linear). Units are read from each
block (ms, sec, ns ...) and a unit this import cannot establish rejects the file. AIPerf counts the
requests whose output length differs from the one asked for (`osl_mismatch_count`): any is a
broken contract.
"""

from __future__ import annotations

from pareto_atlas.measure.imports.parse import Fields
from pareto_atlas.measure.imports.result import ImportedAnchor, Original, reject

METHOD = "numpy.percentile (linear), AIPerf/genai-perf"
TO_MS = {"ms": 1.0, "msec": 1.0, "milliseconds": 1.0, "s": 1e3, "sec": 1e3, "seconds": 1e3, "us": 1e-3,
         "microseconds": 1e-3, "ns": 1e-6, "nanoseconds": 1e-6}
MAP = (("time_to_first_token", "ttft"), ("inter_token_latency", "tpot"), ("inter_chunk_latency", "itl_chunk"),
       ("request_latency", "e2e"))
STATS = (("avg", "mean"), ("p50", "p50"), ("p90", "p90"), ("p99", "p99"))


def is_export(obj: object) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("time_to_first_token", obj.get("request_latency")), dict) \
        and "unit" in (obj.get("time_to_first_token") or obj.get("request_latency") or {})


def tool_of(obj: dict) -> tuple[str, str]:
    if "aiperf_version" in obj:
        return "aiperf", str(obj["aiperf_version"])
    return "genai-perf", "unknown"


def _block(f: Fields, key: str, units: dict[str, float]) -> tuple[Fields, float] | None:
    b = f.sub(key, required=False)
    if b is None:
        return None
    unit = b.text("unit", required=True)
    if unit.lower() not in units:
        raise reject(f.path, b.name("unit"), f"{unit!r}: a unit this import cannot establish (allowed: "
                     f"{', '.join(units)})")
    return b, units[unit.lower()]


def _avg(f: Fields, key: str, unit_ok: tuple[str, ...]) -> float | None:
    b = f.sub(key, required=False)
    if b is None:
        return None
    unit = b.text("unit") or ""
    if unit not in unit_ok:
        raise reject(f.path, b.name("unit"), f"{unit!r}: expected {' or '.join(unit_ok)}")
    return b.number("avg")


def _load(f: Fields) -> tuple[str, float]:
    cfg = f.sub("input_config", required=False)
    phases = (cfg.items("phases") if cfg else None) or []
    for i, p in enumerate(phases):
        ph = Fields(f.path, p, cfg.name(f"phases[{i}]"))
        if ph.raw("exclude_from_results") or ph.text("name") == "warmup":
            continue
        if ph.integer("concurrency", minimum=1):
            return "concurrency", float(ph.integer("concurrency"))
        if ph.number("request_rate", minimum=1e-9):
            return "rate", ph.number("request_rate")
    if cfg is not None:
        for key, load in (("concurrency", "concurrency"), ("request_rate", "rate")):
            v = cfg.number(key, minimum=1e-9) if cfg.has(key) and not isinstance(cfg.raw(key), (dict, list)) else None
            if v:
                return load, v
    raise reject(f.path, "input_config.phases", "the load (concurrency or request rate) is not in the file")


def parse(path: str, data: dict) -> tuple[str, str, list[ImportedAnchor]]:
    f = Fields(path, data)
    tool, version = tool_of(data)
    n = f.sub("request_count", required=False)
    count = n.number("avg") if n else None
    if not count:
        raise reject(path, "request_count.avg", f"{count}: no request completed")
    errors = f.items("error_summary") or []
    n_err = sum(int(e.get("count", 1)) if isinstance(e, dict) and isinstance(e.get("count", 1), int) else 1
                for e in errors)
    load, value = _load(f)
    osl, isl = _avg(f, "output_sequence_length", ("tokens",)), _avg(f, "input_sequence_length", ("tokens",))
    a = ImportedAnchor(label=f"{load} {value:g}", load=load, load_value=value, n_requests=int(count) + n_err,
                       n_failed=n_err, prompt_tokens=isl, output_tokens=osl, contract="unverified", contract_note="",
                       throughput_tok_s=_avg(f, "output_token_throughput", ("tokens/sec",)),
                       request_rate_rps=_avg(f, "request_throughput", ("requests/sec",)),
                       duration_s=_avg(f, "benchmark_duration", ("sec",)))
    for key, ours in MAP:
        got = _block(f, key, TO_MS)
        if got is None:
            continue
        b, scale = got
        for tool_stat, stat in STATS:
            v = b.number(tool_stat)
            a.put(ours, stat, v * scale if v is not None else None,
                  Original(f"{key}.{tool_stat}", b.text("unit"), tool_stat, METHOD))
    if "ttft" not in a.metrics and "e2e" not in a.metrics:
        raise reject(path, "time_to_first_token", "no latency figure in the export")
    if all(v == 0.0 for d in a.metrics.values() for v in d.values()):
        raise reject(path, "time_to_first_token.avg", "every latency is 0.0: not a measurement")
    mismatch = f.sub("osl_mismatch_count", required=False)
    bad = mismatch.number("avg") if mismatch else None
    if bad:
        worst = f.sub("osl_mismatch_diff_pct", required=False)
        lo = worst.number("min", minimum=None) if worst else None
        raise reject(path, "osl_mismatch_count", f"{bad:g} of {count:g} requests generated other than the output "
                     "length asked for" + (f" (worst {lo:+.1f} %)" if lo is not None else "")
                     + "; outputs that stop early break the token-count contract")
    if bad == 0.0:
        a.contract, a.contract_note = "aggregate", (f"{tool}'s osl_mismatch_count is 0: every output matched the "
                                                    "length asked for, by the tool's count (no per-request lengths)")
    else:
        a.contract_note = f"{tool} writes no per-request lengths or mismatch count here: contract unverified"
    a.notes.append(f"{tool}'s inter_token_latency is (latency - TTFT) / (OSL - 1), the project's TPOT; its "
                   "inter_chunk_latency is the per-chunk gap")
    return tool, version, [a]
