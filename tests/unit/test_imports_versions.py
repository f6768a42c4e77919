"""Other versions of the same tools' result files (issue 34, item 6): every real file in
tests/data/imports/ is read or refused in one line naming the file and the field, never with a
traceback; AIPerf, GuideLLM and lm-eval are each read in at least two versions; and each version's
layout gives the figures its file holds, under the file's own names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pareto_atlas.measure.imports import ImportFileError, read_result

D = Path(__file__).resolve().parents[1] / "data" / "imports"
FILES = sorted(p.name for p in D.iterdir() if p.name != "README.md")


def read(name: str, raw: bytes | None = None):
    return read_result(D / name, raw, strict=True)


@pytest.mark.parametrize("name", FILES)
def test_every_real_file_is_read_or_refused_in_one_line(name):
    # strict=True lets an unforeseen reader error through as the traceback this test forbids
    try:
        f = read(name)
    except ImportFileError as e:
        msg = str(e)
        assert "\n" not in msg and msg.startswith(str(D / name)) and "field '" in msg, msg
        return
    assert f.anchors or f.quality


def test_every_file_is_cited_in_the_readme():
    readme = (D / "README.md").read_text()
    missing = [
        n
        for n in FILES
        if n not in readme
        and not any(
            n.startswith(stem) and stem in readme
            for stem in ("vllm_0.25.1_sweep_", "llama_bench_readme_3090ti.", "mlperf_sdxl_offline_")
        )
    ]
    assert not missing, missing


def test_aiperf_guidellm_and_lm_eval_are_read_in_two_versions_or_more():
    read_versions: dict[str, set[str]] = {}
    for name in FILES:
        try:
            f = read(name)
        except ImportFileError:
            continue
        read_versions.setdefault(f.tool, set()).add(f.version)
    for tool in ("aiperf", "guidellm", "lm-eval"):
        assert len(read_versions.get(tool, ())) >= 2, (tool, read_versions.get(tool))


def test_lm_eval_0_4_9_model_args_object_names_the_model():
    f = read("lm_eval_0.4.9.2_nl2foam_perplexity.json")
    assert (f.version, f.model_published) == ("0.4.9.2", "YYgroup/AutoCFD-7B")
    q = {e.metric: e for e in f.quality}
    assert q["word_perplexity,none"].value == pytest.approx(3.5651701303672425)
    assert q["word_perplexity,none"].stderr is None and q["word_perplexity,none"].n == 2849  # "N/A" in the file
    assert q["word_perplexity,none"].settings["model_args"] == {
        "pretrained": "YYgroup/AutoCFD-7B",
        "tensor_parallel_size": 4,
    }
    g = read("lm_eval_0.4.10.dev0_gemma-2b_masakhaner.json")
    assert g.model_published == "google/gemma-2b" and g.quality[0].metric == "f1,flexible-extract"
    # 0.4.8 writes the text form, kept as it was read
    old = read("lm_eval_0.4.8_gpt2_xstorycloze.json")
    assert old.model_published == "pretrained=gpt2,device=mps,trust_remote_code=True"
    with pytest.raises(
        ImportFileError,
        match=r"limit20.json: field 'n-samples.negotiationtom_belief.effective': 20 of "
        r"13812 items: a partial evaluation",
    ):
        read("lm_eval_0.4.13.dev0_qwen3-8b_limit20.json")


@pytest.mark.parametrize(
    "name", ["guidellm_v0.2.1+32_benchmarks_stripped.json", "guidellm_v0.2.1+41_benchmarks_stripped.yaml"]
)
def test_guidellm_v0_2_report_strategy_under_args_totals_beside_metrics(name):
    f = read(name)
    assert (f.tool, f.version) == ("guidellm", "pre-0.4")
    (a,) = f.anchors
    # synchronous: one request at a time; 46 successful and 1 incomplete (request_totals beside metrics)
    assert (a.load, a.load_value, a.n_requests, a.n_failed) == ("concurrency", 1.0, 47, 1)
    assert a.metrics["ttft"]["p50"] == pytest.approx(16.38054847717285)
    assert a.metrics["tpot"]["p50"] == pytest.approx(4.9241227427805505)  # its inter_token_latency_ms
    assert a.original["tpot.p50"].name == "inter_token_latency_ms.successful.median"
    assert a.metrics["e2e"]["p50"] == pytest.approx(642.4565315246582)  # request_latency in s
    # the authors kept one of the 46 requests: the aggregates stay the tool's, the sample its record
    assert len(a.records) == 1 and a.contract == "unverified"


def test_aiperf_unversioned_export_with_loadgen():
    f = read("aiperf_2025-11_qwen3-0.6b_concurrency1.json")
    assert (f.tool, f.version) == ("aiperf", "unversioned")  # no aiperf_version, input_config says aiperf
    assert f.model_published == "Qwen/Qwen3-0.6B"
    (a,) = f.anchors
    assert (a.load, a.load_value, a.n_requests) == ("concurrency", 1.0, 64)
    assert a.metrics["tpot"]["p50"] == pytest.approx(18.158001085427134)
    assert a.original["tpot.p50"].name == "inter_token_latency.p50"
    # 200 asked with ignore_eos; the client's tokenizer counts 199 to 201: shown, not verified
    assert a.contract == "unverified" and "199 to 201 against 200 asked" in a.contract_note


def test_aiperf_pre_release_records_by_tag():
    name = "aiperf_2025-10_gpt-oss-20b_records_by_tag.json"
    with pytest.raises(
        ImportFileError,
        match=r"field 'records.output_sequence_length.max': 247 tokens at most "
        r"against 250 asked.*stopped early",
    ):
        read(name)
    # a derived copy that does not say the asked length (not a real file): read from `records`
    doc = json.loads((D / name).read_bytes())
    del doc["input_config"]["input"]
    f = read_result("run1.json", json.dumps(doc).encode(), strict=True)
    assert (f.tool, f.version) == ("aiperf", "unversioned (pre-release, records by tag)")
    (a,) = f.anchors
    assert (a.load, a.load_value, a.n_requests, a.n_failed) == ("concurrency", 100.0, 100, 11)
    assert a.metrics["ttft"]["p50"] == pytest.approx(2369.317693)  # tag "ttft"
    assert a.original["ttft.p50"].name == "records.ttft.p50"
    assert a.metrics["tpot"]["p99"] == pytest.approx(doc["records"]["inter_token_latency"]["p99"])


def test_aiperf_pre_release_records_by_name_without_a_load_is_refused():
    name = "aiperf_2025-06_prerelease_records_by_name.json"
    with pytest.raises(ImportFileError, match=r"by_name.json: field 'input_config.loadgen': the load"):
        read(name)
    # with the load added (a derived copy, not a real file) its blocks are read by their display names
    doc = json.loads((D / name).read_bytes())
    doc["input_config"]["loadgen"] = {"concurrency": 1}
    (a,) = read_result("june.json", json.dumps(doc).encode(), strict=True).anchors
    assert a.n_requests == 10 and a.metrics["ttft"]["p50"] == pytest.approx(22.508355)
    assert a.original["ttft.p50"].name == "records.Time to First Token.p50"


def test_aiperf_csv_and_per_request_exports_are_refused_for_not_saying_the_load():
    with pytest.raises(
        ImportFileError,
        match=r"gpt-oss-20b.csv: field 'Metric': an AIPerf \(or genai-perf\) CSV "
        r"export.*load",
    ):
        read("aiperf_2025-10_gpt-oss-20b.csv")
    with pytest.raises(ImportFileError, match=r"first20.jsonl: field 'metadata': AIPerf per-request records.*load"):
        read("aiperf_2025-10_gpt-oss-20b_per_request_first20.jsonl")
