"""Importing other tools' result files: one test per format on a real public file
(tests/data/imports/README.md cites each), and the known-broken real files rejected for the right
reason."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pareto_atlas.measure.imports import ImportFileError, read_result

D = Path(__file__).resolve().parents[1] / "data" / "imports"
LAMBDA = ("vllm_legacy_detailed_llama3-8b_h100sxm_len2048.json", "vllm_legacy_detailed_llama3-8b_h100sxm_len4096.json")


def read(name: str, raw: bytes | None = None, **kw):
    return read_result(D / name, raw, strict=True, **kw)


def test_vllm_bench_serve_current_json():
    f = read("vllm_0.25.1_bench_serve.json")
    assert (f.tool, f.version, f.engine) == ("vllm-bench", "bench-serve", "vllm")
    (a,) = f.anchors
    assert (a.load, a.load_value, a.n_requests) == ("concurrency", 2.0, 8)
    # vLLM's TPOT is the project's; its ITL is the per-chunk gap, kept apart
    assert a.metrics["tpot"]["p50"] == pytest.approx(11.20450286665194)
    assert a.metrics["itl_chunk"]["p50"] == pytest.approx(10.492878499917424)
    assert a.original["ttft.p99"].name == "p99_ttft_ms" and a.original["ttft.p99"].unit == "ms"
    assert a.contract == "unverified" and "ignore_eos" in a.contract_note
    assert a.throughput_tok_s == pytest.approx(82.89297074037474)


def test_vllm_speculative_run_keeps_itl_as_the_chunk_gap():
    (a,) = read("vllm_0.25.1_bench_serve_speculative.json").anchors
    # three tokens a chunk: the chunk gap is ~3x TPOT; TPOT stays the per-token figure
    assert a.metrics["tpot"]["p50"] == pytest.approx(14.416801156354207)
    assert a.metrics["itl_chunk"]["p50"] == pytest.approx(44.10335549619049)
    assert a.settings["spec_decode_acceptance_length"] == pytest.approx(3.161111111111111)
    assert any(n.startswith("speculative decoding") and "chunk gap" in n for n in a.notes)


def test_vllm_bench_serve_checks_the_asked_length_from_totals():
    # 128 output tokens over 8 requests = 16 each: asked for 16 the totals agree, asked for 32 they do not
    assert read("vllm_0.25.1_bench_serve.json", requested_output=16).anchors[0].contract == "aggregate"
    with pytest.raises(ImportFileError, match="total_output_tokens.*stopped early"):
        read("vllm_0.25.1_bench_serve.json", requested_output=32)


def test_vllm_legacy_detailed_recomputes_ttft_and_tpot_from_the_requests():
    raw = (D / LAMBDA[0]).read_bytes()
    doc = json.loads(raw)
    f = read(LAMBDA[0])
    assert f.version == "benchmark_serving+detailed" and f.model_published == "meta-llama/Meta-Llama-3-8B-Instruct"
    (a,) = f.anchors
    assert (a.load, a.load_value, len(a.records)) == ("burst", 10.0, 10)
    # TTFT from the per-request seconds equals vLLM's own ms aggregate (same numpy percentile)
    assert a.metrics["ttft"]["p50"] == pytest.approx(doc["median_ttft_ms"], rel=1e-12)
    assert a.metrics["ttft"]["p99"] == pytest.approx(doc["p99_ttft_ms"], rel=1e-12)
    # TPOT per the project's definition over the requests: (E2E - TTFT) / (tokens - 1)
    tpot = [sum(g) / (n - 1) * 1e3 for g, n in zip(doc["itls"], doc["output_lens"]) if n > 1]
    assert a.metrics["tpot"]["p50"] == pytest.approx(float(np.median(tpot)))
    # chunks carry ~10 tokens here: the inter-chunk gap is 72 ms, TPOT 7.5 ms, and the import says so
    assert a.metrics["itl_chunk"]["p50"] == pytest.approx(doc["median_itl_ms"])
    assert any("chunks carry several tokens" in n for n in a.notes)
    assert a.settings["tool_aggregates"]["median_tpot_ms"] == doc["median_tpot_ms"]


def test_vllm_legacy_json_lines_of_appended_runs():
    raw = b"\n".join((D / n).read_bytes().strip() for n in LAMBDA)  # as --append-result writes them
    f = read_result("appended.json", raw, strict=True)
    assert f.version == "benchmark_serving+detailed+lines" and len(f.anchors) == 2
    assert [a.output_tokens for a in f.anchors] == [pytest.approx(186.7), pytest.approx(183.1)]


def test_vllm_sweep_summary_and_run_files():
    summary, run = read("vllm_0.25.1_sweep_summary.json"), read("vllm_0.25.1_sweep_run0.json")
    assert summary.version == "bench-serve+sweep+summary" and len(summary.anchors) == 2
    assert run.version == "bench-serve+sweep"
    assert summary.anchors[0].metrics == run.anchors[0].metrics
    assert run.anchors[0].settings["max_num_seqs"] == 4
    assert run.anchors[0].metrics["e2e"]["p50"] == pytest.approx(166.47808399284258)


def test_guidellm_report_maps_its_itl_to_tpot_never_its_tpot():
    f = read("guidellm_v0.5_qwen3-4b_concurrent4.json")
    assert (f.tool, f.version, f.model_published) == ("guidellm", "0.5.0.dev0", "Qwen/Qwen3-4B-Thinking-2507")
    (a,) = f.anchors
    assert (a.load, a.load_value, a.n_requests) == ("concurrency", 4.0, 4)
    # every request asked 1024 tokens with ignore_eos and got 1024 (server usage): verified
    assert a.contract == "verified" and a.output_tokens == 1024
    # GuideLLM's inter_token_latency (24.18 ms) is the project's TPOT; its time_per_output_token (24.32 ms,
    # first token included) is kept as the tool's figure only
    assert a.metrics["tpot"]["p50"] == pytest.approx(24.18, abs=0.01)
    assert a.settings["time_per_output_token_ms.median"] == pytest.approx(24.3225, abs=1e-3)
    assert a.metrics["e2e"]["p50"] == pytest.approx(24908.5, abs=1.0)  # request_latency is in s
    assert a.throughput_tok_s == pytest.approx(4096 / 24.909644603729248)


def test_aiperf_export_that_stopped_early_is_rejected():
    with pytest.raises(ImportFileError, match=r"osl_mismatch_count.*2 of 96 requests.*-15\.4 %"):
        read("aiperf_0.10_qwen36_chatbot_c4.json")


def test_aiperf_export_clean_import():
    f = read("aiperf_0.11_qwen3-4b_concurrency16.json")
    assert (f.tool, f.version) == ("aiperf", "0.11.0")
    (a,) = f.anchors
    assert (a.load, a.load_value, a.n_requests, a.n_failed) == ("concurrency", 16.0, 2044, 0)
    assert a.metrics["tpot"]["p99"] == pytest.approx(9.838724690325117)
    assert a.metrics["e2e"]["p50"] == pytest.approx(2191.4849815)
    assert a.original["tpot.p99"].name == "inter_token_latency.p99" and a.original["tpot.p99"].unit == "ms"
    assert a.contract == "unverified" and a.throughput_tok_s == pytest.approx(1792.2310692134672)


def test_aiperf_export_units_and_itl_definition():
    # the same real export with its mismatch count set to 0 (a derived copy, not a real file)
    doc = json.loads((D / "aiperf_0.10_qwen36_chatbot_c4.json").read_bytes())
    doc["osl_mismatch_count"]["avg"] = 0.0
    f = read_result("aiperf.json", json.dumps(doc).encode(), strict=True)
    assert (f.tool, f.version) == ("aiperf", "0.10.0")
    (a,) = f.anchors
    assert (a.load, a.load_value, a.contract) == ("concurrency", 4.0, "aggregate")
    assert a.metrics["tpot"]["p50"] == pytest.approx(6.67227350899312)  # AIPerf ITL = the project's TPOT
    assert a.metrics["itl_chunk"]["p50"] == pytest.approx(5.6854911050476185)
    assert a.duration_s == pytest.approx(36.504791444000006)
    doc["request_latency"]["unit"] = "fortnights"
    with pytest.raises(ImportFileError, match="request_latency.unit.*cannot establish"):
        read_result("aiperf.json", json.dumps(doc).encode())
    doc["request_latency"]["unit"] = "sec"
    f = read_result("aiperf.json", json.dumps(doc).encode())
    assert f.anchors[0].metrics["e2e"]["p50"] == pytest.approx(1218.97092 * 1e3)  # seconds converted to ms


def test_sglang_ranged_lengths_are_rejected():
    with pytest.raises(ImportFileError, match=r"online_h200.jsonl:1: field 'random_range_ratio': 0.0.*1 to 1024"):
        read("sglang_llama33_70b_online_h200.jsonl")


def test_sglang_bare_infinity_is_parsed_then_judged():
    # "request_rate": Infinity is not JSON; it is read (every request at once) and the run is then
    # judged on its lengths like any other, not refused as unparseable
    raw = (D / "sglang_llama33_70b_offline_h200.jsonl").read_bytes()
    assert b"Infinity" in raw
    with pytest.raises(ImportFileError, match="random_range_ratio"):
        read("sglang_llama33_70b_offline_h200.jsonl")
    fixed = (
        raw.splitlines()[0]
        .replace(b'"random_range_ratio": 0.0', b'"random_range_ratio": 1.0')
        .replace(b'"total_output_tokens": 1544818', b'"total_output_tokens": 3072000')
    )
    f = read_result("offline.jsonl", fixed, strict=True)
    a = f.anchors[0]
    assert (a.load, a.contract) == ("burst", "aggregate") and any("Infinity" in n for n in a.notes)
    # a metric field holding a bare token is refused, naming it
    bad = fixed.replace(b'"median_ttft_ms": 91282.20983641222', b'"median_ttft_ms": NaN')
    with pytest.raises(ImportFileError, match="offline.jsonl:1: field 'median_ttft_ms'.*NaN"):
        read_result("offline.jsonl", bad)


@pytest.mark.parametrize("name", ["llama_bench_readme_3090ti.json", "llama_bench_readme_3090ti.jsonl"])
def test_llama_bench_tests_are_kernel_times_not_request_latencies(name):
    f = read(name)
    assert (f.tool, f.version, f.engine) == ("llama-bench", "3469684 (build 1275)", "llama.cpp")
    pp, tg = f.anchors
    assert pp.label == "pp 512" and pp.settings["prefill_ms"] == pytest.approx(212.365953)
    assert tg.label == "tg 128" and tg.throughput_tok_s == pytest.approx(130.965708)
    assert tg.settings["batch1_decode_ms_per_token"] == pytest.approx(977.425219 / 128)
    assert not pp.metrics and not tg.metrics  # no TTFT, no TPOT: never offered as a request's


@pytest.mark.parametrize("name", ["mlperf_sdxl_offline_summary.txt", "mlperf_sdxl_offline_detail.txt"])
def test_mlperf_offline_latency_is_not_a_request_latency(name):
    f = read(name)
    assert f.tool == "mlperf-loadgen"
    (a,) = f.anchors
    assert a.request_rate_rps == pytest.approx(0.165037) and a.throughput_tok_s is None
    assert not a.metrics  # the Offline query's latency is kept apart
    assert a.settings["offline_query_latency_50.00_ms"] == pytest.approx(36448.535095)
    if "detail" in name:
        assert f.version == "4.0 @ fa4fe53e53"


def test_mlperf_offline_without_throughput_and_invalid_runs_are_rejected():
    text = (D / "mlperf_sdxl_offline_summary.txt").read_text()
    with pytest.raises(ImportFileError, match="Offline run without a throughput"):
        read_result("s.txt", text.replace("Samples per second: 0.165037\n", "").encode())
    with pytest.raises(ImportFileError, match="'Result is'.*INVALID"):
        read_result("s.txt", text.replace("Result is : VALID", "Result is : INVALID").encode())


def test_lm_eval_results_are_quality_evidence():
    f = read("lm_eval_results_mmlu_abstract_algebra.json")
    assert (f.tool, f.version, f.kind) == ("lm-eval", "git e16afa2f", "quality")
    (q,) = f.quality
    assert (q.task, q.metric, q.value, q.n, q.n_original) == ("mmlu_abstract_algebra", "acc,none", 0.34, 100, 100)
    assert q.stderr == pytest.approx(0.047609522856952344) and q.settings["n_shot"] == 0
    doc = json.loads((D / "lm_eval_results_mmlu_abstract_algebra.json").read_bytes())
    doc["n-samples"]["mmlu_abstract_algebra"]["effective"] = 50
    with pytest.raises(ImportFileError, match="50 of 100 items: a partial evaluation"):
        read_result("r.json", json.dumps(doc).encode())


def test_vllm_all_requests_failed_is_rejected():
    with pytest.raises(ImportFileError, match=r"all_requests_failed.json: field 'completed': 0 of 8 requests"):
        read("vllm_0.25.1_all_requests_failed.json")


def test_all_zero_latencies_with_completions_are_rejected():
    doc = json.loads((D / "vllm_0.25.1_all_requests_failed.json").read_bytes())
    doc["completed"] = 8
    with pytest.raises(ImportFileError, match="every latency is 0.0 ms"):
        read_result("z.json", json.dumps(doc).encode())


def test_warm_prefix_cache_is_rejected_where_the_file_says_so():
    doc = json.loads((D / "vllm_0.25.1_sweep_run0.json").read_bytes())
    doc.update(enable_prefix_caching=True, dataset_name="prefix_repetition")
    with pytest.raises(ImportFileError, match="enable_prefix_caching.*warm-cache"):
        read_result("w.json", json.dumps(doc).encode())
    doc["dataset_name"] = "random"  # caching on, prompts not repeated: imported
    assert read_result("w.json", json.dumps(doc).encode()).anchors


def test_the_tool_is_told_by_shape_not_name(tmp_path):
    p = tmp_path / "guidellm_results.json"  # a vLLM file under a misleading name
    p.write_bytes((D / "vllm_0.25.1_bench_serve.json").read_bytes())
    assert read_result(p).tool == "vllm-bench"
    with pytest.raises(ImportFileError, match="not a result file of a known tool"):
        read_result("x.json", b'{"hello": 1}')


def test_guidellm_yaml_report_reads_like_its_json():
    import yaml

    # the real report written as YAML, as `--outputs benchmarks.yaml` does (a derived copy)
    doc = json.loads((D / "guidellm_v0.5_qwen3-4b_concurrent4.json").read_bytes())
    f = read_result("benchmarks.yaml", yaml.safe_dump(doc).encode(), strict=True)
    g = read("guidellm_v0.5_qwen3-4b_concurrent4.json")
    assert f.tool == "guidellm" and f.anchors[0].metrics == g.anchors[0].metrics
    with pytest.raises(ImportFileError, match="not YAML"):
        read_result("b.yaml", b"benchmarks: [unclosed")


def test_vllm_per_request_lengths_checked_against_the_asked_length():
    # asked for 741 tokens each (the longest output seen), nine of the ten ShareGPT requests stopped early
    with pytest.raises(ImportFileError, match=r"output_lens': 9 of 10 requests .*request 7: 3 of 741"):
        read(LAMBDA[0], requested_output=741)
