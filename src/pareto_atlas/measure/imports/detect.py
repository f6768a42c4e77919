"""Which tool wrote a result file, and which version, told from its shape (keys and layout), never
from its name; then the tool's reader turns it into an ImportedFile."""

from __future__ import annotations

import hashlib
from pathlib import Path

from pareto_atlas.measure.imports import aiperf, guidellm, llama_bench, lm_eval, mlperf, sglang, vllm
from pareto_atlas.measure.imports.parse import (
    decode,
    load_json,
    load_json_lines,
    load_yaml,
    looks_like_json_lines,
    looks_like_yaml_report,
)
from pareto_atlas.measure.imports.result import ImportedFile, ImportFileError, reject

TOOLS = (
    "vllm-bench",
    "sglang-bench-serving",
    "guidellm",
    "aiperf",
    "genai-perf",
    "llama-bench",
    "mlperf-loadgen",
    "lm-eval",
)
# What a reader may raise on a malformed file it did not foresee; `read_result` turns them into one line
UNFORESEEN = (KeyError, TypeError, ValueError, AttributeError, IndexError, ZeroDivisionError, OverflowError)


def detect(path: str, text: str) -> tuple[str, object, str]:
    """(tool, parsed data, container) where container is text | object | list | lines."""
    if mlperf.is_summary(text):
        return "mlperf-loadgen", text, "summary"
    if mlperf.is_detail(text):
        return "mlperf-loadgen", text, "detail"
    if aiperf.is_csv(text):
        raise reject(
            path,
            "Metric",
            "an AIPerf (or genai-perf) CSV export: it does not say the run's load "
            "(concurrency or request rate) nor the length asked for; import the profile_export_aiperf.json "
            "written beside it",
        )
    if looks_like_yaml_report(text):
        data, container = load_yaml(path, text), "object"
        if not guidellm.is_report(data):
            raise ImportFileError(f"{path}: a YAML file that is not a GuideLLM benchmarks report")
    elif looks_like_json_lines(text):
        data, container = load_json_lines(path, text), "lines"
    else:
        data, container = load_json(path, text), "object"
    rows = data if isinstance(data, list) else [data]
    if isinstance(data, list):
        container = container if container == "lines" else "list"
    if not rows:
        raise ImportFileError(f"{path}: empty: no result in the file")
    first = rows[0]
    if aiperf.is_request_record(first):
        raise reject(
            path,
            "metadata",
            "AIPerf per-request records (profile_export.jsonl): they do not say the "
            "run's load (concurrency or request rate); import the profile_export_aiperf.json written beside "
            "them",
        )
    if isinstance(data, dict):
        if lm_eval.is_results(data):
            return "lm-eval", data, container
        if guidellm.is_report(data):
            return "guidellm", data, container
        if aiperf.is_export(data):
            return aiperf.tool_of(data)[0], data, container
    if llama_bench.is_test(first):
        return "llama-bench", rows, container
    if sglang.is_run(first):
        return "sglang-bench-serving", rows, container
    if vllm.is_run(first):
        return "vllm-bench", data, container
    keys = ", ".join(sorted(first)[:8]) if isinstance(first, dict) else type(first).__name__
    raise ImportFileError(f"{path}: not a result file of a known tool ({', '.join(TOOLS)}); it holds {keys}")


def read(path: str | Path, raw: bytes | None = None, requested_output: int | None = None) -> ImportedFile:
    """Read one file strictly: its tool, version and anchors or quality evidence."""
    path = str(path)
    if raw is None:
        try:
            raw = Path(path).read_bytes()
        except OSError as e:
            raise ImportFileError(f"{path}: cannot read ({e.strerror})") from None
    sha = hashlib.sha256(raw).hexdigest()
    text = decode(path, raw)
    tool, data, container = detect(path, text)
    out = ImportedFile(path=path, sha256=sha, tool=tool, version="", kind="speed")
    if tool == "mlperf-loadgen":
        out.version, out.anchors = mlperf.parse(path, text, container == "detail")
    elif tool == "lm-eval":
        out.version, out.quality, out.model_published = lm_eval.parse(path, data)
        out.kind = "quality"
    elif tool == "guidellm":
        out.version, out.anchors = guidellm.parse(path, data)
        args = data.get("args") if isinstance(data.get("args"), dict) else {}
        out.model_published = args.get("model") if isinstance(args.get("model"), str) else None
    elif tool in ("aiperf", "genai-perf"):
        _, out.version, out.anchors = aiperf.parse(path, data)
        out.model_published = aiperf.model_of(data)
    elif tool == "llama-bench":
        out.version, out.anchors = llama_bench.parse(path, data)
        first = data[0] if isinstance(data[0], dict) else {}
        out.model_published, out.engine = str(first.get("model_type", "")) or None, "llama.cpp"
        out.hardware_published = str(first.get("gpu_info") or first.get("cpu_info") or "") or None
    elif tool == "sglang-bench-serving":
        out.version, out.anchors = sglang.parse(path, data)
        out.engine = str(data[0].get("backend") or "") or None
    else:
        out.version, out.anchors = vllm.parse(path, data, container, requested_output)
        first = data[0] if isinstance(data, list) else data
        out.model_published = first.get("model_id") if isinstance(first.get("model_id"), str) else None
        # `backend` is the client's API ("openai" fits any server); only "vllm" names the engine
        out.engine = "vllm" if first.get("backend") == "vllm" else None
    return out
