"""MLPerf Inference's rows (spec/published_mlperf.csv, published_readers.mlperf): the shipped table is
what the reader reads from the saved summary and system files (tests/data/mlperf), every row's figures
are the summary's lines as printed (checked here against the raw text by their own names), every row
cites its summary and system file at the commit read, runs the reader cannot state are left out by
reason, and a file lacking a line is a one-line error naming it."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from pareto_atlas.calibrate.published_readers import SourceFile, mlperf
from pareto_atlas.calibrate.published_table import read_table, row_error

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "src" / "pareto_atlas" / "spec" / mlperf.SHIPPED
URL = re.compile(r"^https://github\.com/(?P<repo>[^/]+/[^/]+)/blob/(?P<commit>[0-9a-f]{40})/(?P<path>.+)$")


def _script():
    spec = importlib.util.spec_from_file_location("read_published", ROOT / "scripts" / "read_published.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _raw(url: str) -> Path:
    m = URL.match(url)
    assert m, url
    return ROOT / "tests" / "data" / "mlperf" / m["repo"].replace("/", "+") / m["commit"] / m["path"]


def _line(text: str, name: str) -> str:
    """The value printed after `name :` in a summary (first occurrence), found by the test on its own."""
    m = re.search(rf"^{re.escape(name)}\s*:\s*(\S+)\s*$", text, re.M)
    assert m, name
    return m.group(1)


def test_shipped_table_is_the_readers_output_on_the_saved_files(tmp_path, capsys):
    s = _script()
    out = tmp_path / "t.csv"
    assert s.write_mlperf(s.MLPERF_RAW, out) == 0
    assert out.read_text() == SHIPPED.read_text()
    rows = read_table(SHIPPED)
    assert len(rows) == 12 and not [r for r in rows if row_error(r)]
    assert sorted({r["model"] for r in rows}) == ["llama-2-70b", "mixtral-8x7b"]


def test_every_row_states_the_summarys_figures_and_cites_its_files():
    rows = read_table(SHIPPED)
    for r in rows:
        m = URL.match(r["source"])
        assert m and m["repo"] == "mlcommons/inference_results_v4.1" and m["path"].endswith(mlperf.SUMMARY)
        text = _raw(r["source"]).read_text()
        sysurl = re.search(r"system (https://\S+\.json);", r["notes"]).group(1)
        system = json.loads(_raw(sysurl).read_text())
        assert URL.match(sysurl)["commit"] == m["commit"]
        scen = m["path"].split("/")[5]
        bench = m["path"].split("/")[4]
        model, cap = ("mixtral-8x7b", "2048") if bench == "mixtral-8x7b" else ("llama-2-70b", "1024")
        assert r["source_id"] == "mlperf-inference-v4.1" and r["model"] == model
        assert system["accelerator_model_name"] in r["gpu_published"]
        assert int(r["n_gpus"]) == system["accelerators_per_node"] * system["number_of_nodes"]
        assert int(r["tp"]) * int(r["pp"]) * int(r["replicas"]) == int(r["n_gpus"])
        assert r["prompt_tokens"] == cap and "not its mean" in r["notes"]
        if scen == "Offline":
            tok, smp = _line(text, "Tokens per second"), _line(text, "Samples per second")
            assert (r["load"], r["stat"], r["out_tok_s"]) == ("offline", "-", tok)
            # the queue as stated, up to the table's bound on requests (the note keeps the count)
            q = _line(text, "samples_per_query")
            assert r["n_requests"] == str(min(int(q), 1_000_000)) and f"samples_per_query {q}" in r["notes"]
            assert r["ttft_ms"] == r["tpot_ms"] == ""
        else:
            tok, smp = _line(text, "Completed tokens per second"), _line(text, "Completed samples per second")
            assert (r["load"], r["load_value"]) == ("rate", _line(text, "target_qps"))
            pct = {"p50": "50.00", "p99": "99.00"}[r["stat"]]
            ttft = float(_line(text, f"{pct} percentile first token latency (ns)")) / 1e6
            tpot = float(_line(text, f"{pct} percentile time to output token (ns)")) / 1e6
            assert float(r["ttft_ms"]) == pytest.approx(ttft, abs=1e-3)
            assert float(r["tpot_ms"]) == pytest.approx(tpot, abs=1e-3)
            assert r["out_tok_s"] == (tok if r["stat"] == "p50" else "")
            assert "Poisson" in r["notes"]
        assert int(r["output_tokens"]) == round(float(tok) / float(smp))


def test_runs_without_a_card_or_a_stated_setup_are_left_out_by_reason(capsys):
    s = _script()
    for sub, system, bench, scen in s.MLPERF_RUNS:
        summary = f"closed/{sub}/results/{system}/{bench}/{scen}/performance/run_1/{mlperf.SUMMARY}"
        res = mlperf.read(
            s.mlperf_file(s.MLPERF_RAW, summary),
            s.mlperf_file(s.MLPERF_RAW, f"closed/{sub}/systems/{system}.json"),
            s.MLPERF_ID,
            s.MLPERF_DATE,
            s.mlperf_setup(sub, system, bench),
            s.mlperf_datasets(s.MLPERF_RAW).get(bench),
        )
        if system.startswith("B200"):
            assert not res.rows and "stated in no file read" in next(iter(res.skipped))
        elif "MI300X" in system:
            assert not res.rows and next(iter(res.skipped)).startswith("accelerator AMD Instinct MI300X")
        else:
            assert len(res.rows) == (1 if scen == "Offline" else 2)


def _files(summary_text: str, scenario: str = "Offline") -> tuple[SourceFile, SourceFile]:
    c = "0" * 40
    path = f"closed/X/results/S/llama2-70b-99/{scenario}/performance/run_1/{mlperf.SUMMARY}"
    sysj = json.dumps({"accelerator_model_name": "NVIDIA H200-SXM-141GB", "accelerators_per_node": 1, "framework": "f"})
    return SourceFile("o/r", path, c, summary_text), SourceFile("o/r", "closed/X/systems/S.json", c, sysj)


def _setup_dataset():
    s = _script()
    return s.mlperf_setup("NVIDIA", "H200-SXM-141GBx8_TRT", "llama2-70b-99"), s.mlperf_datasets(s.MLPERF_RAW)[
        "llama2-70b-99"
    ]


def test_one_system_runs_each_benchmark_in_its_own_layout():
    """NVIDIA's H100 system ran Llama-2-70B at TP2 and Mixtral 8x7B at TP1 (their configs): the setup is
    the benchmark family's, and a benchmark with no setup of the system is left out."""
    s = _script()
    h100 = "DGX-H100_H100-SXM-80GBx8_TRT"
    assert s.mlperf_setup("NVIDIA", h100, "llama2-70b-99.9").tp == 2
    assert s.mlperf_setup("NVIDIA", h100, "mixtral-8x7b").tp == 1
    assert s.mlperf_setup("NVIDIA", h100, "gptj-99") is None
    rows = [r for r in read_table(SHIPPED) if r["model"] == "mixtral-8x7b"]
    assert {(r["gpu"], r["tp"], r["replicas"]) for r in rows} == {("H100-SXM", "1", "8"), ("H200", "1", "8")}


def test_a_missing_line_names_it_and_an_invalid_result_is_left_out():
    setup, data = _setup_dataset()
    good = "Result is : VALID\nSamples per second: 2\nTokens per second: 500\nsamples_per_query : 10\n"
    res = mlperf.read(*_files(good), "id", "2024-08", setup, data)
    assert [(r["out_tok_s"], r["output_tokens"], r["load_value"]) for r in res.rows] == [("500", "250", "10")]
    with pytest.raises(mlperf.MLPerfFileError, match="no 'Tokens per second' line"):
        mlperf.read(*_files(good.replace("Tokens per second: 500\n", "")), "id", "2024-08", setup, data)
    res = mlperf.read(*_files(good.replace("VALID", "INVALID")), "id", "2024-08", setup, data)
    assert not res.rows and dict(res.skipped) == {"result INVALID": 1}
    summary, system = _files(good)
    bad = SourceFile("o/r", "closed/X/results/S/llama2-70b-99/SingleStream/x.txt", "0" * 40, good)
    with pytest.raises(mlperf.MLPerfFileError, match="not closed/<submitter>"):
        mlperf.read(bad, system, "id", "2024-08", setup, data)
