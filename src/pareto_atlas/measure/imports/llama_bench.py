"""llama.cpp's `llama-bench -o json` (a JSON array) and `-o jsonl` (one test per line).

Each test times a kernel loop, not a served request: `pp N` (n_prompt = N, n_gen = 0) is one
prefill of N tokens, `tg N` (n_gen = N) is N single-sequence decode steps from an empty context.
Times are in ns (avg_ns over `repetitions`), rates in tokens/s (avg_ts). A tg test's time per token
is a batch-1 decode step, reported under that name and never as a request's TPOT (no HTTP, no
sampling, no queue); a pp test's time is a prefill, not a TTFT.
"""

from __future__ import annotations

from pareto_atlas.measure.imports.parse import Fields
from pareto_atlas.measure.imports.result import ImportedAnchor, ImportFileError, Original, reject

METHOD = "mean over llama-bench repetitions (samples_ns)"


def is_test(obj: object) -> bool:
    return isinstance(obj, dict) and "n_prompt" in obj and "n_gen" in obj and ("avg_ts" in obj or "avg_ns" in obj)


def parse_test(f: Fields) -> ImportedAnchor:
    n_prompt, n_gen = f.integer("n_prompt", required=True), f.integer("n_gen", required=True)
    avg_ns = f.number("avg_ns", required=True)
    samples = f.numbers("samples_ns") or []
    if avg_ns == 0.0 or (samples and all(s == 0.0 for s in samples)):
        raise reject(f.path, f.name("avg_ns"), "0 ns: not a measurement")
    if n_prompt == 0 and n_gen == 0:
        raise reject(f.path, f.name("n_gen"), "a test with neither prompt nor generated tokens")
    ts = f.number("avg_ts")
    depth = f.integer("n_depth") or 0
    kind = "tg" if n_gen else "pp"
    tokens = n_gen or n_prompt
    a = ImportedAnchor(
        label=f"{kind} {tokens}" + (f" @ depth {depth}" if depth else ""),
        load="batch",
        load_value=1.0,
        n_requests=max(len(samples), 1),
        n_failed=0,
        prompt_tokens=float(n_prompt),
        output_tokens=float(n_gen),
        contract="verified",
        contract_note="llama-bench runs exactly n_prompt / n_gen tokens by construction",
        duration_s=avg_ns / 1e9,
    )
    a.settings = {
        k: f.raw(k)
        for k in (
            "build_commit",
            "build_number",
            "model_type",
            "model_filename",
            "n_batch",
            "n_ubatch",
            "n_threads",
            "n_gpu_layers",
            "type_k",
            "type_v",
            "flash_attn",
            "backends",
            "gpu_info",
            "cpu_info",
            "test_time",
        )
        if k in f.obj
    }
    ms = avg_ns / 1e6
    if kind == "tg":
        # a decode step's time, not a request's TPOT: kept under its own name
        a.settings["batch1_decode_ms_per_token"] = ms / n_gen
        a.throughput_tok_s = ts if ts is not None else n_gen / (avg_ns / 1e9)
        a.original["throughput_tok_s"] = Original("avg_ts", "tokens/s", "mean", METHOD)
        a.notes.append(
            "tg test: single-sequence decode from an empty context; its time per token is a batch-1 "
            "decode step (no HTTP, sampling or queue), never a served request's TPOT"
        )
    else:
        a.settings["prefill_ms"] = ms
        a.settings["prefill_tok_s"] = ts if ts is not None else n_prompt / (avg_ns / 1e9)
        a.original["prefill_tok_s"] = Original("avg_ts", "tokens/s", "mean", METHOD)
        a.notes.append("pp test: one prefill of n_prompt tokens; a kernel time, not a request's TTFT")
    return a


def parse(path: str, tests: list) -> tuple[str, list[ImportedAnchor]]:
    if not tests:
        raise ImportFileError(f"{path}: no llama-bench test in the file")
    anchors = [parse_test(Fields(path, t, f"[{i}]")) for i, t in enumerate(tests)]
    first = tests[0]
    version = f"{first.get('build_commit', 'unknown')} (build {first.get('build_number', '?')})"
    return version, anchors
