"""vLLM's serving benchmark results: `vllm bench serve --save-result` (current JSON, with
`--save-detailed` per-request arrays or without), `benchmarks/benchmark_serving.py` (the legacy
JSON, its `--append-result` JSON lines), and `vllm bench sweep` run and summary files.

Definitions (vLLM's benchmarks/serve.py): TTFT and TPOT = (latency - TTFT) / (output_len - 1)
per request are the project's; ITL is one sample per streamed chunk, so a chunk carrying several
tokens (multi-step scheduling, speculative decoding) inflates it: it is kept as the inter-chunk
gap, never as TPOT. Aggregates are in ms, per-request arrays in s; percentiles are numpy's linear.
The file writes no `ignore_eos` and no requested length: without `--output-tokens` the token
contract is unverified.
"""

from __future__ import annotations

import math

from pareto_atlas.measure.imports.hygiene import warm_prefix_cache
from pareto_atlas.measure.imports.parse import Fields
from pareto_atlas.measure.imports.requests import from_arrays, output_contract, put_derived
from pareto_atlas.measure.imports.result import ImportedAnchor, ImportFileError, Original, reject

METHOD = "numpy.percentile (linear), vLLM benchmarks"
# vLLM's metric stems -> the project's; e2el was 'latency' in 2024's benchmark_serving.py
STEMS = (("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl_chunk"), ("e2el", "e2e"), ("latency", "e2e"))
STATS = (("mean", "mean"), ("median", "p50"), ("p50", "p50"), ("p90", "p90"), ("p99", "p99"))


def is_run(obj: object) -> bool:
    return (
        isinstance(obj, dict)
        and "completed" in obj
        and any(k in obj for k in ("mean_ttft_ms", "median_ttft_ms"))
        and "mean_e2e_latency_ms" not in obj
    )


def version(run: dict) -> str:
    """The shape's generation: the file holds no vLLM version."""
    gen = "bench-serve" if "failed" in run or "endpoint_type" in run else "benchmark_serving"
    return gen + ("+sweep" if "run_number" in run else "") + ("+detailed" if "ttfts" in run else "")


def _rate(f: Fields) -> float:
    r = f.raw("request_rate")
    if isinstance(r, str):
        try:
            v = float(r)  # vLLM writes "inf" as a string
        except ValueError:
            raise reject(f.path, f.name("request_rate"), f"{r!r} is not a rate") from None
        if math.isnan(v) or v <= 0:
            raise reject(f.path, f.name("request_rate"), f"{r!r} is not a rate > 0")
        return v
    return f.number("request_rate", allow_inf=True) if r is not None else math.inf


def parse_run(f: Fields, requested_output: int | None = None) -> ImportedAnchor:
    path = f.path
    completed = f.integer("completed", required=True)
    failed = f.integer("failed") or 0
    if completed == 0:
        raise reject(
            path,
            f.name("completed"),
            f"0 of {completed + failed or f.integer('num_prompts') or '?'} "
            "requests completed; vLLM then writes every latency as 0.0 ms, which is no measurement",
        )
    rate = _rate(f)
    conc = f.integer("max_concurrency", minimum=1)
    load, value = (
        ("concurrency", conc)
        if conc
        else (("rate", rate) if math.isfinite(rate) else ("burst", f.integer("num_prompts") or completed))
    )
    n_in, n_out = f.integer("total_input_tokens"), f.integer("total_output_tokens")
    a = ImportedAnchor(
        label=f"{load} {value:g}",
        load=load,
        load_value=float(value),
        n_requests=completed + failed,
        n_failed=failed,
        prompt_tokens=n_in / completed if n_in is not None else None,
        output_tokens=n_out / completed if n_out is not None else None,
        contract="unverified",
        contract_note="",
        duration_s=f.number("duration"),
        throughput_tok_s=f.number("output_throughput"),
        request_rate_rps=f.number("request_throughput"),
    )
    a.settings = {
        k: f.raw(k)
        for k in (
            "backend",
            "endpoint_type",
            "model_id",
            "num_prompts",
            "request_rate",
            "burstiness",
            "max_concurrency",
            "max_num_seqs",
            "run_number",
            "date",
        )
        if k in f.obj
    }
    for stem, ours in STEMS:
        for tool_stat, stat in STATS:
            key = f"{tool_stat}_{stem}_ms"
            a.put(ours, stat, f.number(key), Original(key, "ms", tool_stat, METHOD))
    if not a.metrics:
        raise reject(path, f.name("median_ttft_ms"), "no latency figure in the run")
    if all(v == 0.0 for m in a.metrics.values() for v in m.values()):
        raise reject(
            path,
            f.name("mean_ttft_ms"),
            f"every latency is 0.0 ms with {completed} requests completed: not a measurement",
        )
    if f.has("ttfts"):
        _detailed(f, a, requested_output)
    elif requested_output is not None and n_out is not None:
        if n_out != requested_output * completed:
            raise reject(
                path,
                f.name("total_output_tokens"),
                f"{n_out} tokens over {completed} requests, not "
                f"{requested_output} each as asked: outputs stopped early or ran long",
            )
        a.contract, a.contract_note = (
            "aggregate",
            (f"total_output_tokens = {completed} x {requested_output} asked (no per-request lengths)"),
        )
    else:
        a.contract_note = (
            "vLLM writes neither ignore_eos nor the requested length, so outputs that stopped "
            "early look like any other run: contract unverified (give --output-tokens to check)"
        )
    spec = {k: f.raw(k) for k in f.obj if k.startswith("spec_decode_")}
    a.settings.update(spec)
    itl, tpot = a.metrics.get("itl_chunk", {}).get("p50"), a.metrics.get("tpot", {}).get("p50")
    length = f.number("spec_decode_acceptance_length") if spec else None
    if length:
        a.notes.append(
            f"speculative decoding (vLLM's spec_decode_acceptance_length {length:.3g} tokens per step): "
            f"each streamed chunk carries several tokens, so the median ITL {itl or float('nan'):.3g} ms is a "
            f"chunk gap, not a token's; TPOT ({tpot or float('nan'):.3g} ms) is the per-token figure"
        )
    elif itl and tpot and itl > 1.5 * tpot:
        a.notes.append(
            f"median inter-chunk gap {itl:.3g} ms is {itl / tpot:.1f}x the median TPOT: chunks carry "
            "several tokens (multi-step scheduling or speculation); ITL kept as the chunk gap only"
        )
    else:
        a.notes.append(
            "vLLM's ITL is one sample per streamed chunk (inflated under speculation); kept as the "
            "inter-chunk gap, never as TPOT"
        )
    return a


def _detailed(f: Fields, a: ImportedAnchor, requested_output: int | None) -> None:
    ttfts = f.numbers("ttfts", required=True)
    gaps = f.items("itls", required=True)
    gap_lists = [Fields(f.path, {"g": g}, f.name(f"itls[{i}]")).numbers("g", required=True) for i, g in enumerate(gaps)]
    ins, outs = f.numbers("input_lens", required=True), f.numbers("output_lens", required=True)
    errors = f.items("errors")
    if errors is not None and not all(isinstance(e, (str, type(None))) for e in errors):
        raise reject(f.path, f.name("errors"), "entries are not text")
    # "e2els": per-request latencies (s) where the file has them (pareto-atlas's own export writes them)
    recs = from_arrays(f.path, ttfts, gap_lists, ins, outs, errors, e2e_s=f.numbers("e2els"))
    ok = [r for r in recs if r["ok"]]
    if not ok:
        raise reject(f.path, f.name("ttfts"), "no request in the per-request arrays completed")
    if all(r["first_token_ts"] == 0.0 for r in ok):
        raise reject(f.path, f.name("ttfts"), "every per-request TTFT is 0.0 s: not a measurement")
    if len(ok) != len(recs) - a.n_failed and a.n_failed:
        a.notes.append(f"{len(recs) - len(ok)} per-request entries carry an error or no output")
    # the project's TTFT/TPOT from the requests; the tool's aggregates stay in `original` of `settings`
    a.settings["tool_aggregates"] = {a.original[f"{m}.{s}"].name: v for m, d in a.metrics.items() for s, v in d.items()}
    a.metrics, a.original = {}, {}
    put_derived(a, recs)
    a.records = recs
    a.prompt_tokens = sum(r["prompt_tokens"] for r in ok) / len(ok)
    a.output_tokens = sum(r["completion_tokens"] for r in ok) / len(ok)
    a.contract, a.contract_note = output_contract(
        f.path, f.name("output_lens"), [r["completion_tokens"] for r in ok], requested_output, "output_lens"
    )
    a.notes.append(
        "end-to-end latency reconstructed as TTFT + the inter-chunk gaps (the last streamed chunk); "
        "vLLM's own latency also counts the stream's close"
    )


def parse(
    path: str, data: object, container: str, requested_output: int | None = None
) -> tuple[str, list[ImportedAnchor]]:
    """(version, anchors) of a run (container "object"), a sweep summary ("list") or JSON lines ("lines")."""
    runs = data if isinstance(data, list) else [data]
    if not runs:
        raise ImportFileError(f"{path}: no run in the file")
    anchors = []
    for i, run in enumerate(runs):
        # a JSON line is named by its line number, a summary's run by its index
        f = (
            Fields(f"{path}:{i + 1}", run)
            if container == "lines"
            else Fields(path, run, f"[{i}]" if container == "list" else "")
        )
        warm_prefix_cache(f)
        anchors.append(parse_run(f, requested_output))
    first = runs[0] if isinstance(runs[0], dict) else {}
    return version(first) + {"object": "", "list": "+summary", "lines": "+lines"}[container], anchors
