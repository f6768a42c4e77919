"""AIPerf's `profile_export_aiperf.json` and genai-perf's `profile_export_genai_perf.json`: one
block per metric, each with its own `unit` and statistics (avg, p50, p90, p99, ...).

Definitions (aiperf/metrics/types): `inter_token_latency` = (request latency - TTFT) / (output
sequence length - 1) per request, which is the project's TPOT; `inter_chunk_latency` is the gap
between streamed chunks (kept as such). Percentiles are numpy's (linear). Units are read from each
block (ms, sec, ns ...) and a unit this import cannot establish rejects the file. AIPerf counts the
requests whose output length differs from the one asked for (`osl_mismatch_count`): any is a
broken contract; where there is no count, an output length distribution whose maximum is below the
length asked for (`input_config.input.prompt.output_tokens.mean`) shows every output stopped early.

Layouts: releases with `aiperf_version` (and unversioned ones from late 2025) put each metric block at
the top level under its tag; pre-release exports put them under `records`, keyed by tag (2025-10:
`ttft`, `ttst` for TTFT and time to second token) or by display name (2025-06: "Time to First
Token"). Each figure's original name is the file's own path (e.g. `records.ttft.p50`). The load is
`input_config.loadgen` (concurrency or request rate), or a phase of `input_config.phases`. AIPerf's
CSV export and per-request JSON lines (`profile_export.jsonl`) do not say the load: refused, naming
the JSON export to import instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pareto_atlas.measure.imports.parse import CEILING, Fields
from pareto_atlas.measure.imports.result import ImportedAnchor, Original, reject

METHOD = "numpy.percentile (linear), AIPerf/genai-perf"
TO_MS = {
    "ms": 1.0,
    "msec": 1.0,
    "milliseconds": 1.0,
    "s": 1e3,
    "sec": 1e3,
    "seconds": 1e3,
    "us": 1e-3,
    "microseconds": 1e-3,
    "ns": 1e-6,
    "nanoseconds": 1e-6,
}
MAP = (
    ("time_to_first_token", "ttft"),
    ("inter_token_latency", "tpot"),
    ("inter_chunk_latency", "itl_chunk"),
    ("request_latency", "e2e"),
)
STATS = (("avg", "mean"), ("p50", "p50"), ("p90", "p90"), ("p99", "p99"))
# pre-release tags that were renamed later
ALIASES = {"ttft": "time_to_first_token", "ttst": "time_to_second_token"}
CSV_HEAD = "Metric,avg,"
Block = Callable[[str], "Fields | None"]


def is_export(obj: object) -> bool:
    if not isinstance(obj, dict):
        return False
    if isinstance(obj.get("records"), dict):
        return any(isinstance(b, dict) and "unit" in b for b in obj["records"].values())
    return isinstance(obj.get("time_to_first_token", obj.get("request_latency")), dict) and "unit" in (
        obj.get("time_to_first_token") or obj.get("request_latency") or {}
    )


def is_csv(text: str) -> bool:
    return text.lstrip().startswith(CSV_HEAD)


def is_request_record(obj: object) -> bool:
    """One line of AIPerf's per-request export: {"metadata": {...}, "metrics": {tag: {value, unit}}}."""
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("metadata"), dict)
        and isinstance(obj.get("metrics"), dict)
        and all(isinstance(m, dict) and "value" in m for m in obj["metrics"].values())
    )


def tool_of(obj: dict) -> tuple[str, str]:
    if "aiperf_version" in obj:
        return "aiperf", str(obj["aiperf_version"])
    cfg = obj.get("input_config") if isinstance(obj.get("input_config"), dict) else {}
    if isinstance(obj.get("records"), dict):
        by_tag = all(isinstance(b, dict) and "tag" in b for b in obj["records"].values())
        return "aiperf", f"unversioned (pre-release, records by {'tag' if by_tag else 'name'})"
    aiperf_cli = str(cfg.get("cli_command", "")).startswith("aiperf")
    if isinstance(cfg.get("endpoint"), dict) or "loadgen" in cfg or aiperf_cli:
        return "aiperf", "unversioned"
    return "genai-perf", "unknown"


def model_of(obj: dict) -> str | None:
    """The model the run named (`input_config.endpoint.model_names`, AIPerf), where it is text."""
    cfg = obj.get("input_config")
    end = cfg.get("endpoint") if isinstance(cfg, dict) else None
    names = end.get("model_names") if isinstance(end, dict) else None
    return names[0] if isinstance(names, list) and len(names) == 1 and isinstance(names[0], str) else None


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def _blocks(f: Fields) -> Block:
    """The metric block for a current tag, wherever this layout keeps it (named as in the file)."""
    rec = f.sub("records", required=False) if isinstance(f.raw("records"), dict) else None
    if rec is None:
        return lambda key: f.sub(key, required=False)
    where: dict[str, str] = {}
    for k, b in rec.obj.items():
        tag = b.get("tag") if isinstance(b, dict) and isinstance(b.get("tag"), str) else _slug(str(k))
        where.setdefault(ALIASES.get(tag, tag), k)
    return lambda key: rec.sub(where[key], required=False) if key in where else None


def _block(get: Block, f: Fields, key: str, units: dict[str, float]) -> tuple[Fields, float] | None:
    b = get(key)
    if b is None:
        return None
    unit = b.text("unit", required=True)
    if unit.lower() not in units:
        raise reject(
            f.path, b.name("unit"), f"{unit!r}: a unit this import cannot establish (allowed: {', '.join(units)})"
        )
    return b, units[unit.lower()]


def _avg(get: Block, f: Fields, key: str, unit_ok: tuple[str, ...]) -> float | None:
    b = get(key)
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
    gen = cfg.sub("loadgen") if cfg is not None and isinstance(cfg.raw("loadgen"), dict) else None
    for src in (gen, cfg):
        if src is None:
            continue
        for key, load in (("concurrency", "concurrency"), ("request_rate", "rate")):
            v = src.number(key, minimum=1e-9) if src.has(key) and not isinstance(src.raw(key), (dict, list)) else None
            if v:
                return load, v
    raise reject(f.path, "input_config.loadgen", "the load (concurrency or request rate) is not in the file")


def _asked(f: Fields) -> float | None:
    """The output length the run asked for, where the file says it (a fixed length: no spread)."""
    cfg = f.raw("input_config")
    try:
        out = cfg["input"]["prompt"]["output_tokens"]
    except (KeyError, TypeError):
        return None
    mean, spread = (out.get("mean"), out.get("stddev") or 0) if isinstance(out, dict) else (None, None)
    ok = isinstance(mean, (int, float)) and not isinstance(mean, bool) and 0 < mean < CEILING and spread == 0
    return float(mean) if ok else None


def _lengths(get: Block, f: Fields, a: ImportedAnchor, tool: str) -> None:
    """Judge the outputs against the length asked for from the tool's length distribution."""
    asked, b = _asked(f), get("output_sequence_length")
    lo, hi = (b.number("min"), b.number("max")) if b is not None else (None, None)
    if asked is None or lo is None or hi is None:
        a.contract_note = f"{tool} writes no per-request lengths or mismatch count here: contract unverified"
        return
    if hi < asked:
        raise reject(
            f.path,
            b.name("max"),
            f"{hi:g} tokens at most against {asked:g} asked "
            "(input_config.input.prompt.output_tokens.mean): every output stopped early by the tool's "
            "count, which breaks the token-count contract",
        )
    if lo == hi == asked:
        a.contract, a.contract_note = (
            "aggregate",
            (f"{tool}'s output lengths run from {lo:g} to {hi:g}, the {asked:g} asked (no per-request lengths here)"),
        )
    else:
        a.contract_note = (
            f"{tool}'s output lengths run from {lo:g} to {hi:g} against {asked:g} asked (counted by "
            "the client's tokenizer): contract unverified"
        )


def parse(path: str, data: dict) -> tuple[str, str, list[ImportedAnchor]]:
    f = Fields(path, data)
    tool, version = tool_of(data)
    get = _blocks(f)
    load, value = _load(f)
    n = get("request_count")
    count = n.number("avg") if n else None
    if n is None:  # the earliest exports have no request_count: each latency block counts them
        lat = get("request_latency") or get("time_to_first_token")
        count = lat.number("count") if lat else None
    if not count:
        raise reject(path, n.name("avg") if n else "request_count.avg", f"{count}: no request completed")
    errors = f.items("error_summary") or []
    n_err = sum(
        int(e.get("count", 1)) if isinstance(e, dict) and isinstance(e.get("count", 1), int) else 1 for e in errors
    )
    osl = _avg(get, f, "output_sequence_length", ("tokens",))
    isl = _avg(get, f, "input_sequence_length", ("tokens",))
    a = ImportedAnchor(
        label=f"{load} {value:g}",
        load=load,
        load_value=value,
        n_requests=int(count) + n_err,
        n_failed=n_err,
        prompt_tokens=isl,
        output_tokens=osl,
        contract="unverified",
        contract_note="",
        throughput_tok_s=_avg(get, f, "output_token_throughput", ("tokens/sec",)),
        request_rate_rps=_avg(get, f, "request_throughput", ("requests/sec",)),
        duration_s=_avg(get, f, "benchmark_duration", ("sec",)),
    )
    for key, ours in MAP:
        got = _block(get, f, key, TO_MS)
        if got is None:
            continue
        b, scale = got
        for tool_stat, stat in STATS:
            v = b.number(tool_stat)
            a.put(
                ours,
                stat,
                v * scale if v is not None else None,
                Original(b.name(tool_stat), b.text("unit"), tool_stat, METHOD),
            )
    if "ttft" not in a.metrics and "e2e" not in a.metrics:
        raise reject(path, "time_to_first_token", "no latency figure in the export")
    if all(v == 0.0 for d in a.metrics.values() for v in d.values()):
        raise reject(path, "time_to_first_token.avg", "every latency is 0.0: not a measurement")
    mismatch = get("osl_mismatch_count")
    bad = mismatch.number("avg") if mismatch else None
    if bad:
        worst = get("osl_mismatch_diff_pct")
        lo = worst.number("min", minimum=None) if worst else None
        raise reject(
            path,
            "osl_mismatch_count",
            f"{bad:g} of {count:g} requests generated other than the output "
            "length asked for"
            + (f" (worst {lo:+.1f} %)" if lo is not None else "")
            + "; outputs that stop early break the token-count contract",
        )
    if bad == 0.0:
        a.contract, a.contract_note = (
            "aggregate",
            (
                f"{tool}'s osl_mismatch_count is 0: every output matched the "
                "length asked for, by the tool's count (no per-request lengths)"
            ),
        )
    else:
        _lengths(get, f, a, tool)
    a.notes.append(
        f"{tool}'s inter_token_latency is (latency - TTFT) / (OSL - 1), the project's TPOT; its "
        "inter_chunk_latency is the per-chunk gap"
    )
    return tool, version, [a]
