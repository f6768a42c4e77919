"""SGLang's `python -m sglang.bench_serving --output-file` JSON lines: one run per line.

Definitions (sglang/bench_serving.py, adapted from vLLM's): TTFT and TPOT as vLLM's; ITL is one
sample per streamed chunk (inflated under speculation), kept as the inter-chunk gap. The random
dataset draws each request's lengths uniformly from [max(1, N * random_range_ratio), N]: only a
ratio of 1 asks every request for N tokens (the default range draws from 1 to N), so a smaller
ratio breaks the token-count contract and the run is rejected. Old versions write `request_rate`
as a bare `Infinity` token (not JSON): read as "every request sent at once".
"""

from __future__ import annotations

import math

from pareto_atlas.measure.imports.hygiene import warm_prefix_cache
from pareto_atlas.measure.imports.parse import Fields
from pareto_atlas.measure.imports.requests import from_arrays, output_contract, put_derived
from pareto_atlas.measure.imports.result import ImportedAnchor, ImportFileError, Original, reject

METHOD = "numpy.percentile (linear), SGLang bench_serving"
STEMS = (("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl_chunk"), ("e2e_latency", "e2e"))
STATS = (("mean", "mean"), ("median", "p50"), ("p90", "p90"), ("p99", "p99"))


def is_run(obj: object) -> bool:
    return (
        isinstance(obj, dict) and "backend" in obj and ("mean_e2e_latency_ms" in obj or "median_e2e_latency_ms" in obj)
    )


def version(run: dict) -> str:
    # the file holds no SGLang version; newer ones add TPOT and P99 figures
    return "bench_serving" + ("+tpot" if "median_tpot_ms" in run else "") + ("+details" if "ttfts" in run else "")


def _lengths_contract(f: Fields, completed: int) -> tuple[str, str, int | None]:
    dataset = f.text("dataset_name") or "?"
    n_out = f.integer("total_output_tokens")
    if dataset != "random":
        fixed = f.integer("sharegpt_output_len", minimum=1)
        if fixed is None:
            return "unverified", f"dataset {dataset!r}: output lengths are the dataset's, not asked for", None
        return _totals(f, completed, n_out, fixed, "sharegpt_output_len")
    want = f.integer("random_output_len", required=True, minimum=1)
    ratio = f.number("random_range_ratio")
    if ratio is None or ratio < 1.0:
        lo = max(1, int(want * (ratio or 0.0)))
        raise reject(
            f.path,
            f.name("random_range_ratio"),
            f"{ratio}: SGLang draws each request's output length "
            f"uniformly from {lo} to {want}, not {want} each (only a ratio of 1 fixes the lengths)"
            + (f"; the run averaged {n_out / completed:.0f} tokens" if n_out is not None else ""),
        )
    return _totals(f, completed, n_out, want, "random_output_len")


def _totals(f: Fields, completed: int, n_out: int | None, want: int, key: str) -> tuple[str, str, int]:
    if n_out is not None and n_out != want * completed:
        raise reject(
            f.path,
            f.name("total_output_tokens"),
            f"{n_out} over {completed} requests, not {want} each ({key}): outputs stopped early or ran long",
        )
    return "aggregate", f"total_output_tokens = {completed} x {want} ({key}; no per-request lengths)", want


def parse_run(f: Fields) -> ImportedAnchor:
    completed = f.integer("completed", required=True)
    if completed == 0:
        raise reject(f.path, f.name("completed"), "0 requests completed: no measurement")
    level, note, want = _lengths_contract(f, completed)
    rate = f.number("request_rate", allow_inf=True)
    rate = math.inf if rate is None else rate
    conc = f.integer("max_concurrency", minimum=1)
    load, value = ("concurrency", conc) if conc else (("rate", rate) if math.isfinite(rate) else ("burst", completed))
    n_in = f.integer("total_input_tokens")
    a = ImportedAnchor(
        label=f"{load} {value:g}",
        load=load,
        load_value=float(value),
        n_requests=completed,
        n_failed=0,
        prompt_tokens=n_in / completed if n_in is not None else None,
        output_tokens=want if want else (f.number("total_output_tokens") or 0) / completed or None,
        contract=level,
        contract_note=note,
        duration_s=f.number("duration"),
        throughput_tok_s=f.number("output_throughput"),
        request_rate_rps=f.number("request_throughput"),
    )
    a.settings = {
        k: f.raw(k)
        for k in (
            "backend",
            "dataset_name",
            "request_rate",
            "max_concurrency",
            "random_input_len",
            "random_output_len",
            "random_range_ratio",
            "sharegpt_output_len",
        )
        if k in f.obj
    }
    if not math.isfinite(rate):
        a.notes.append(
            "request_rate is Infinity (SGLang writes a bare Infinity token, not JSON): every request was sent at once"
        )
    for stem, ours in STEMS:
        for tool_stat, stat in STATS:
            key = f"{tool_stat}_{stem}_ms"
            a.put(ours, stat, f.number(key), Original(key, "ms", tool_stat, METHOD))
    if not a.metrics or all(v == 0.0 for m in a.metrics.values() for v in m.values()):
        raise reject(f.path, f.name("median_ttft_ms"), "no latency figure, or every one is 0.0 ms")
    if f.has("ttfts") and f.has("output_lens"):
        recs = from_arrays(
            f.path,
            f.numbers("ttfts", required=True),
            [
                Fields(f.path, {"g": g}, f.name(f"itls[{i}]")).numbers("g", required=True)
                for i, g in enumerate(f.items("itls") or [])
            ]
            or None,
            f.numbers("input_lens", required=True),
            f.numbers("output_lens", required=True),
        )
        a.contract, a.contract_note = output_contract(
            f.path, f.name("output_lens"), [r["completion_tokens"] for r in recs], want, "output_lens"
        )
        a.metrics, a.original = {}, {}
        put_derived(a, recs)
        a.records = recs
    a.notes.append(
        "SGLang's ITL is one sample per streamed chunk (inflated under speculation); kept as the "
        "inter-chunk gap, never as TPOT"
    )
    return a


def parse(path: str, runs: list) -> tuple[str, list[ImportedAnchor]]:
    if not runs:
        raise ImportFileError(f"{path}: no run in the file")
    anchors = []
    for i, r in enumerate(runs):
        f = Fields(f"{path}:{i + 1}", r)
        warm_prefix_cache(f)
        anchors.append(parse_run(f))
    return version(runs[0]), anchors
