"""Property: a mutated copy of any format's real test file gives either a clean import or one line
of the project's own error type naming the file, never a traceback (500 mutations per file)."""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pareto_atlas.measure.imports import ImportFileError, read_result

D = Path(__file__).resolve().parents[1] / "data" / "imports"
# one real file per format (the broken ones are the same formats as their clean siblings)
FILES = (
    "vllm_0.25.1_bench_serve.json",
    "vllm_legacy_detailed_llama3-8b_h100sxm_len2048.json",
    "vllm_0.25.1_sweep_summary.json",
    "guidellm_v0.5_qwen3-4b_concurrent4.json",
    "aiperf_0.10_qwen36_chatbot_c4.json",
    "sglang_llama33_70b_online_h200.jsonl",
    "llama_bench_readme_3090ti.json",
    "llama_bench_readme_3090ti.jsonl",
    "mlperf_sdxl_offline_summary.txt",
    "mlperf_sdxl_offline_detail.txt",
    "lm_eval_results_mmlu_abstract_algebra.json",
    # other versions' layouts (issue 34)
    "aiperf_2025-10_gpt-oss-20b_records_by_tag.json",
    "aiperf_2025-11_qwen3-0.6b_concurrency1.json",
    "guidellm_v0.2.1+32_benchmarks_stripped.json",
    "lm_eval_0.4.9.2_nl2foam_perplexity.json",
)
# values a broken writer or a truncated edit leaves where a number, text or object was
ODD = [
    None,
    "",
    "abc",
    "inf",
    -1,
    0,
    0.0,
    1,
    2**63,
    -1e308,
    1e308,
    math.nan,
    math.inf,
    -math.inf,
    True,
    False,
    [],
    [None],
    {},
    {"unit": "ms"},
    [[]],
    "0.0",
    {"avg": "x"},
]


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:6]):  # a few entries of long arrays are enough
            yield from _paths(v, prefix + (i,))


def _set(obj, path, value, delete):
    if not path:
        return value
    parent = obj
    for k in path[:-1]:
        parent = parent[k]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return obj


def _load(raw: bytes):
    text = raw.decode()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) > 1 and all(ln.lstrip().startswith("{") for ln in lines):
        return [json.loads(ln) for ln in lines], True
    return json.loads(text), False


def _dump(doc, lines: bool) -> bytes:
    if lines:
        return "\n".join(json.dumps(d) for d in doc).encode()
    return json.dumps(doc).encode()


@functools.lru_cache(maxsize=None)
def _paths_of(name: str) -> list[tuple]:
    return list(_paths(_load((D / name).read_bytes())[0]))


@st.composite
def mutated(draw, name: str):
    raw = (D / name).read_bytes()
    kind = draw(st.sampled_from(["field", "field", "field", "bytes", "truncate"]))
    if kind == "truncate":
        return raw[: draw(st.integers(0, len(raw)))]
    if kind == "bytes" or name.endswith(".txt"):
        if name.endswith(".txt") and kind != "bytes":  # a loadgen log: change one value after a colon
            lines = raw.decode().splitlines()
            i = draw(st.integers(0, len(lines) - 1))
            head = lines[i].split(":", 1)[0]
            lines[i] = (
                f"{head}: {draw(st.sampled_from(['', 'x', '-1', 'nan', 'inf', '1e999', 'INVALID', '0']))}"
                if draw(st.booleans())
                else ""
            )
            return "\n".join(lines).encode()
        pos = draw(st.integers(0, max(len(raw) - 1, 0)))
        junk = draw(st.binary(min_size=0, max_size=4))
        return raw[:pos] + junk + raw[pos + draw(st.integers(0, 3)) :]
    doc, lines = _load(raw)
    paths = _paths_of(name)
    path = paths[draw(st.integers(0, len(paths) - 1))] or ((0,) if lines else ())  # a line, never the list
    value = draw(st.sampled_from(ODD))
    return _dump(_set(doc, path, value, draw(st.booleans())), lines)


@pytest.mark.parametrize("name", FILES)
def test_mutated_files_give_one_line_errors_or_clean_imports(name):
    @settings(
        max_examples=500,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(mutated(name))
    def check(raw):
        try:
            f = read_result(name, raw, strict=True)
        except ImportFileError as e:
            msg = str(e)
            assert "\n" not in msg and msg.startswith(name), msg
            return
        assert f.anchors or f.quality
        for a in f.anchors:  # what is imported is finite and non-negative
            for d in a.metrics.values():
                assert all(math.isfinite(v) and v >= 0 for v in d.values()), a.metrics

    check()
