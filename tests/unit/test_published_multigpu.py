"""The shipped multi-GPU published table (spec/published_multigpu.csv): every row's fields and
provenance, the bar it ships (>= 150 dense-model rows, >= 3 sources, TP 1-8), the one-GPU table
unchanged by the parallelism columns, and the readers on small texts in each source's format."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pandas as pd
import pytest

from pareto_atlas.calibrate.published_readers import SourceFile, aiconfigurator, trtllm_perf
from pareto_atlas.calibrate.published_table import (
    COLUMNS,
    PARALLEL,
    PublishedTableError,
    load_multigpu,
    load_published,
    parallel_error,
    read_table,
    row_error,
)
from pareto_atlas.spec.cards import shipped_hardware, shipped_models

URL = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/blob/[0-9a-f]{40}/\S+$")
COMMIT = "0" * 39 + "1"


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return load_multigpu().rows


def test_every_row_valid_with_provenance(table):
    assert not [r["origin"] for _, r in table.iterrows() if row_error(dict(r))]
    assert table.source.map(lambda s: bool(URL.match(s))).all()
    # one document per source id, each row on a GPU card and a dense model of the catalog
    assert (table.groupby("source_id").source.nunique() == 1).all()
    assert set(table.gpu) <= {n for n, h in shipped_hardware().items() if h.kind == "gpu"}
    assert set(table.model) <= set(shipped_models())
    n = table[list(PARALLEL)].astype(int)
    agg = n.prefill_workers == 0
    assert (n.n_gpus[agg] == (n.tp * n.pp * n.replicas)[agg]).all()
    assert (n.n_gpus[~agg] == (n.prefill_workers * n.prefill_tp + n.decode_workers * n.tp * n.pp)[~agg]).all()


def test_bar_rows_sources_tp(table):
    dense = table[table.model.isin(shipped_models())]
    assert len(dense) >= 150 and dense.source_id.nunique() >= 3
    assert {1, 2, 4, 8} <= set(dense.tp.astype(int))
    multi = dense[dense.n_gpus.astype(int) > 1]
    assert len(multi) >= 150 and multi.source_id.nunique() >= 2
    assert (multi.model == "llama-3.1-70b").sum() >= 150


def test_aiconfigurator_single_gpu_8b_rows_all_there(table):
    # the scheduler check (issue 31) reads all of them: TRT-LLM, SGLang and vLLM on H100-SXM and H200
    r = table[(table.source_id == aiconfigurator.SOURCE_ID) & (table.model == "llama-3.1-8b") & (table.n_gpus == "1")]
    assert len(r) == 68
    assert set(zip(r.engine, r.gpu)) == {("trtllm", "H100-SXM"), ("sglang", "H200"), ("vllm", "H200")}
    assert (r.stat == "unstated").all() and (r.load == "concurrency").all()
    assert r.ttft_ms.astype(float).gt(0).all() and r.tpot_ms.astype(float).gt(0).all()


def test_no_fact_in_both_tables(table):
    key = ["source", "gpu", "model", "weights", "prompt_tokens", "output_tokens", "load", "load_value"]
    one = {tuple(r[k] for k in key) for r in read_table()}
    assert not [k for k in map(tuple, table[key].values) if k in one]


def test_one_gpu_table_reads_and_hashes_as_before():
    t = load_published()
    assert (t.rows.n_gpus == "1").all() and (t.rows.tp == "1").all()
    # the key its cached fits are stored under: the rows' original columns only
    assert t.sha256 == hashlib.sha256(t.rows[list(COLUMNS)].to_csv(index=False).encode()).hexdigest()


def test_one_gpu_fit_refuses_a_multi_gpu_row(tmp_path):
    rows = load_multigpu().rows
    r = rows[rows.n_gpus.astype(int) > 1].iloc[[0]]
    p = tmp_path / "t.csv"
    r[list(COLUMNS) + list(PARALLEL)].to_csv(p, index=False)
    with pytest.raises(PublishedTableError, match="n_gpus"):
        load_published([p], shipped=False)
    assert load_multigpu([p], shipped=False).rows.shape[0] == 1


@pytest.mark.parametrize(
    "fields, msg",
    [
        ({"tp": "0"}, "field 'tp'"),
        ({"tp": "two"}, "field 'tp'"),
        ({"tp": "4", "n_gpus": "2"}, "tp * pp * replicas = 4"),
        ({"tp": "2", "replicas": "2", "n_gpus": "4", "prefill_tp": "1"}, "field 'prefill_tp'"),
        ({"prefill_workers": "1", "prefill_tp": "1", "n_gpus": "1"}, "decode_workers"),
        (
            {"prefill_workers": "2", "prefill_tp": "2", "decode_workers": "1", "tp": "4", "n_gpus": "6"},
            "prefill_workers * prefill_tp",
        ),
    ],
)
def test_parallel_errors_name_the_field(fields, msg):
    assert msg in parallel_error(fields)


def test_parallel_valid():
    assert parallel_error({}) == ""
    assert parallel_error({"tp": "2", "replicas": "2", "n_gpus": "4"}) == ""
    assert (
        parallel_error({"prefill_workers": "2", "prefill_tp": "2", "decode_workers": "1", "tp": "4", "n_gpus": "8"})
        == ""
    )


AIC_HEAD = (
    "id,silicon_data_source,backend,backend_version,model_path,system,precision,mode,isl,osl,"
    "gemm_quant_mode,moe_quant_mode,batch_size,tp_size,pp_size,attention_dp_size,moe_tp_size,moe_ep_size,"
    "prefill_batch_size,prefill_num_workers,prefill_tp_size,prefill_pp_size,prefill_attention_dp_size,"
    "prefill_moe_tp_size,prefill_moe_ep_size,decode_batch_size,decode_num_workers,decode_tp_size,"
    "decode_pp_size,decode_attention_dp_size,decode_moe_tp_size,decode_moe_ep_size,silicon_ttft_ms,silicon_tpot_ms\n"
)


def _aic(*lines: str) -> aiconfigurator.ReadResult:
    return aiconfigurator.read(SourceFile("ai-dynamo/aiconfigurator", "x.csv", COMMIT, AIC_HEAD + "".join(lines)))


def test_aiconfigurator_reader_rows_repeats_and_skips():
    agg = (
        "a_c8_tp4_1,src; silicon_concurrency=8; measured=2025-10-29T00:00:00.000Z,vllm,,meta-llama/Llama-3.1-70B,"
        "h200_sxm,fp8,agg,1024,1024,fp8,,8,4,1,1,,,,,,,,,,,,,,,,,{ttft},{tpot}\n"
    )
    out = _aic(
        agg.format(ttft=100.5, tpot=20.25),
        agg.format(ttft=100.5, tpot=20.25),
        agg.replace("1024,1024", "2048,128").format(ttft=1, tpot=2),
        agg.replace("1024,1024", "2048,128").format(ttft=3, tpot=4),
        "m_c8_,s; silicon_concurrency=8,trtllm,1.0,deepseek-ai/DeepSeek-R1,h200_sxm,fp8,agg,1,1,fp8,,8,8,1,8,,,,,,,,,,,,,,,,,1,1\n",
        "d_c_,s; silicon_concurrency=16,sglang,0.5,Qwen/Qwen3-32B,h100_sxm,,disagg,4000,1000,,,,,,,,,1,5,1,1,1,,,48,"
        "11,1,1,1,,,566.6,22.3\n",
        "g_c8_,s; silicon_concurrency=8,trtllm,1.3,Qwen/Qwen3-32B,gb200,fp4,agg,1,1,nvfp4,,8,1,1,1,,,,,,,,,,,,,,,,,1,1\n",
    )
    assert not [r for r in out.rows if row_error(r)]
    same = [r for r in out.rows if r["prompt_tokens"] == "1024"]
    assert len(same) == 1 and "2 times" in same[0]["notes"] and same[0]["ttft_ms"] == "100.5"
    assert same[0]["tp"] == "4" and same[0]["n_gpus"] == "4" and same[0]["load_value"] == "8"
    assert same[0]["date"] == "2025-10-29" and same[0]["source"].endswith(f"/blob/{COMMIT}/x.csv")
    assert len([r for r in out.rows if "figures differ" in r["notes"]]) == 2
    dis = next(r for r in out.rows if r["prefill_workers"] != "0")
    assert (dis["prefill_workers"], dis["decode_workers"], dis["tp"], dis["n_gpus"]) == ("5", "11", "1", "16")
    assert dis["weights"] == "BF16" and "not stated" in dis["weights_published"]
    # the KV dtype: an FP8 GEMM reads as aiconfigurator deploys it (an FP8 KV cache), with where that
    # is read in its notes; a BF16 row keeps the file's silence
    assert same[0]["kv"] == "fp8" and "kv fp8: not stated by the row" in same[0]["notes"]
    assert "_get_quant_mode @71bb3d00e" in same[0]["notes"]
    assert dis["kv"] == "unstated" and "kv fp8" not in dis["notes"]
    assert out.skipped == {"model not a dense model of the catalog": 1, "system gb200: no hardware card": 1}


def test_aiconfigurator_reader_refuses_another_format():
    with pytest.raises(ValueError, match="silicon_sample format"):
        aiconfigurator.read(SourceFile("a/b", "x.csv", COMMIT, "a,b\n1,2\n"))


TRT_V017 = """**All data in the table below was generated using version 0.17 and presents token throughput in tokens/second.**

| Throughput (tokens / sec)   |      | GPU      | H200 141GB HBM3   | H100 80GB HBM3   | L40S    |
|:----|:----|:----|:----|:----|:----|
|     | Precision |   | FP8     | FP8    | FP8     |
| Model  | Tensor Model Parallel Size | Runtime Input/Output Lengths |   |   |   |
| LLaMA v3.1 70B              | 2                          | 128, 128                     | 6823.01           | 6645.12          | 1.0 |
|                             | 4                          | 2048, 128                    | 1358.06           |                  |    |

| Input Length | Output Length |  $seq_len  | $num_requests      |
| ------------ | ------------- | ---------- | ------------------ |
| 128          | 128           | 256        | 30000              |
| 2048         | 128           | 2176       | 3000               |

**All data in the table below was generated using version 0.14.0, with 500 requests and BF16 precision.**

| | | | | | | | | | | |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
| **Model**       | **GPU**            | **TP**  | **Input Length** | **Output Length** | **QPS** | **Tput(req/s)**  | **Mean TTFT(ms)**  | **Mean ITL(ms)**   | **Total Token Tput (tok/s)**  | **Output Tput (tok/s)** |
|LLaMA 3.1 70B|H100 80GB HBM3|4|467|256|2|2|62|21|1406|498||
||||||INF|16|9123|85|11593|4103|
"""


def test_trtllm_v017_reader():
    out = trtllm_perf.read(SourceFile("NVIDIA/TensorRT-LLM", "p.md", COMMIT, TRT_V017), "s")
    assert not [r for r in out.rows if row_error(r)]
    off = [r for r in out.rows if r["load"] == "offline" and r["stat"] == "-"]
    assert [(r["gpu"], r["tp"], r["prompt_tokens"], r["load_value"], r["out_tok_s"]) for r in off] == [
        ("H200", "2", "128", "30000", "6823.01"),
        ("H100-SXM", "2", "128", "30000", "6645.12"),
        ("H200", "4", "2048", "3000", "1358.06"),
    ]
    assert off[0]["engine_version"] == "0.17" and off[0]["kv"] == "fp8" and off[0]["weights"] == "FP8"
    on = [r for r in out.rows if r["stat"] == "mean"]
    assert [(r["load"], r["load_value"], r["ttft_ms"], r["itl_ms"], r["out_tok_s"], r["n_gpus"]) for r in on] == [
        ("rate", "2", "62", "21", "498", "4"),
        ("offline", "500", "9123", "85", "4103", "4"),
    ]
    assert on[0]["weights"] == "BF16" and on[0]["engine_version"].startswith("0.14.0")
    assert out.skipped == {"GPU L40S: no hardware card": 1}


def test_trtllm_v1_reader():
    text = (
        "#### Llama 3.3 70B\n\n| Sequence Length (ISL/OSL) | B200<br/>TP1 (FP4) | H100<br/>TP2 (FP8) |\n|---|---|---|\n"
        "| 128/128 | 11,147 | 6,378 |\n\n| Input Length | Output Length | $seq_len | $num_requests |\n"
        "| --- | --- | --- | --- |\n| 128 | 128 | 256 | 30000 |\n"
    )
    out = trtllm_perf.read(SourceFile("NVIDIA/TensorRT-LLM", "p.md", COMMIT, text), "s", "1.0")
    assert [(r["gpu"], r["model"], r["tp"], r["n_gpus"], r["out_tok_s"], r["kv"]) for r in out.rows] == [
        ("H100-SXM", "llama-3.3-70b", "2", "2", "6378", "unstated")
    ]
    assert out.skipped == {"precision FP4: no weight format": 1}


def test_a_rows_parallelism_reaches_its_anchor_and_a_one_gpu_anchor_is_unchanged(table):
    from pareto_atlas.calibrate.published_table import anchor_row, parallel_knobs

    r = table[(table.tp == "4") & (table.load == "concurrency")].iloc[0]
    a = anchor_row(r)
    assert a["tp"] == 4 and "pp" not in a and "replicas" not in a
    one = load_published().rows.iloc[0]
    assert parallel_knobs(one) == {} and not {"tp", "pp", "replicas", "prefill_workers"} & set(anchor_row(one))
    dis = {"tp": "2", "prefill_workers": "3", "prefill_tp": "1", "decode_workers": "2", "n_gpus": "7"}
    assert parallel_knobs(dis) == {
        "tp": 2,
        "batching": "disagg",
        "prefill_workers": 3,
        "prefill_tp": 1,
        "decode_workers": 2,
    }


def test_sample_keeps_each_sweeps_ends_and_labels_name_the_parallelism(table):
    from pareto_atlas.calibrate.published_multigpu import parallelism, sample_rows

    g = table[(table.source_id == aiconfigurator.SOURCE_ID) & (table.gpu == "H200") & (table.engine == "vllm")]
    s = sample_rows(g, 2)
    for _, sw in s.groupby(["model", "tp"]):
        full = g[(g.model == sw.model.iloc[0]) & (g.tp == sw.tp.iloc[0])].load_value.astype(float)
        assert set(sw.load_value.astype(float)) == {full.min(), full.max()}
    assert parallelism(pd.Series({"tp": "4", "pp": "1", "replicas": "2", "prefill_workers": "0"})) == "TP4 x 2 replicas"
    assert (
        parallelism(
            pd.Series(
                {
                    "tp": "4",
                    "pp": "1",
                    "replicas": "1",
                    "prefill_workers": "2",
                    "prefill_tp": "1",
                    "decode_workers": "1",
                }
            )
        )
        == "2P(TP1)+1D(TP4)"
    )


def test_coverage_counts_figures_inside_the_carried_bar():
    from pareto_atlas.calibrate.fit import TARGETS
    from pareto_atlas.calibrate.published_multigpu import MultiGpuCalibration, coverage

    a = pd.DataFrame({f"{t}_{sc}": [np.nan, np.nan] for t in TARGETS for sc in ("LOSO", "LOMO", "LOEO")})
    a["tpot_p50_ms_LOMO"] = [0.05, -0.5]  # one inside the 10 % latency bar, one out
    a["throughput_tok_s_LOEO"] = [0.3, np.nan]  # inside the 40 % throughput bar
    cal = MultiGpuCalibration("H200", "vllm", None, a, 0.10, 0.40, "LOSO")
    assert coverage(cal, ("LOMO", "LOEO")) == (2 / 3, 3)
    # the report counts every scheme's figures against the bar and states the split check
    from pareto_atlas.calibrate.published_multigpu import report_lines

    a = a.assign(source_id=["s", "s"], model=["m", "m"], tp=[2, 2], pp=[1, 1], replicas=[1, 1], prefill_workers=[0, 0])
    lines = report_lines([MultiGpuCalibration("H200", "vllm", None, a, 0.10, 0.40, "LOSO+LOMO+LOEO", (0.95, 0.8))])
    assert "inside it: 67 % of 3 held-out figures" in lines[1] and "covers 95 % / 80 %" in lines[1]
    lines = report_lines([MultiGpuCalibration("H200", "vllm", None, a, 0.10, 0.40, "LOSO")])
    assert "no split check" in lines[1]


def test_bar_groups_keep_one_engines_sweep_of_a_model_together():
    from pareto_atlas.calibrate.published_multigpu import bar_groups, split_check

    rows = pd.DataFrame(
        dict(
            source_id=["s", "s", "s", "s", "t"],
            model=["m", "m", "m", "m", "m"],
            engine=["vllm", "vllm", "trtllm", "vllm", "vllm"],
            weights=["FP8", "FP8", "FP8", "BF16", "FP8"],
            tp=[2, 8, 2, 2, 2],
        )
    )
    g = bar_groups(rows)
    assert g[0] == g[1]  # its parallelisms stay in one group: the split never counts a sweep's near twin
    assert len(set(g)) == 4  # another engine, weight format or document is another group
    assert "92 % of that group's" in split_check((0.95, 0.8), 0.92)
    assert "no split check" in split_check((float("nan"), float("nan")), 0.92)


def test_the_per_engine_multigpu_fit_runs_rows_as_their_source_ran_them(monkeypatch):
    """calibrate.published_multigpu's frames: aiconfigurator's closed-loop rows under the deployment its
    benchmark wrote, read as the mean over its rounds (calibrate.published_runs); the other rows as before;
    every row under its engine's default where calibrate.published.RUN_AS_PUBLISHED is off."""
    from pareto_atlas.calibrate import published
    from pareto_atlas.calibrate import published_multigpu as pm
    from pareto_atlas.calibrate.published_table import load_multigpu

    rows = load_multigpu().rows
    some = rows[rows.gpu == "H200"].groupby("source_id").head(2).reset_index(drop=True)
    theirs = some.source_id.str.contains("aiconfigurator").to_numpy()
    assert theirs.any() and (~theirs).any()
    hw = shipped_hardware()["H200"]
    ran, _ = pm._frames(some, hw)
    monkeypatch.setattr(published, "RUN_AS_PUBLISHED", False)
    defaults, _ = pm._frames(some, hw)
    assert (ran.reading[theirs] == "mean").all() and (ran.reading[~theirs] == "p50").all()
    clients = some.load_value[theirs].astype(int).to_numpy()
    assert (ran.n_requests[theirs].to_numpy() == 20 * clients).all()  # the benchmark's 20 rounds of its clients
    assert (ran.chunk_tokens[theirs] != defaults.chunk_tokens[theirs]).all()  # the benchmark's token budget
    same = [c for c in defaults.columns if c != "send_offsets"]
    pd.testing.assert_frame_equal(ran.loc[~theirs, same], defaults.loc[~theirs, same])
    assert "reading" not in defaults or (defaults.reading == "p50").all()
