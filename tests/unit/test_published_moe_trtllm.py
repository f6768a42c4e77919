"""The reader of TensorRT-LLM's perf-overview MoE rows (published_readers.trtllm_perf_moe) on small
texts in the document's two layouts: what it keeps (each figure as published, its request count and
layout) and what it leaves out, counted by reason."""

from __future__ import annotations

from pareto_atlas.calibrate.published_moe_table import moe_row_error
from pareto_atlas.calibrate.published_readers import SourceFile, trtllm_perf_moe

COMMIT = "0" * 39 + "2"
NREQ = (
    "| Input Length | Output Length |  $seq_len  | $num_requests      |\n"
    "| ------------ | ------------- | ---------- | ------------------ |\n"
    "| 128          | 128           | 256        | 30000              |\n"
    "| 1000         | 1000          | 2000       | 3000               |\n\n"
)
WIDE = (
    "**All data in the table below was generated using version 0.17 and presents token throughput.**\n\n"
    "| Throughput (tokens / sec) | | GPU | H200 141GB HBM3 | H100 80GB HBM3 | L40S |\n"
    "|:---|:---|:---|:---|:---|:---|\n"
    "| | Precision | | FP8 | FP8 | FP8 |\n"
    "| Model | Tensor Model Parallel Size | Runtime Input/Output Lengths | | | |\n"
    "| LLaMA v3.1 8B | 1 | 128, 128 | 29526.04 | 28836.77 | 9104.61 |\n"
    "| Mixtral 8x7B | 1 | 128, 128 | 17157.72 | 15962.49 | |\n"
    "| | | 1000, 1000 | 10371.36 | | |\n"
    "| | | 2048, 128 | 2009.67 | | |\n"
    "| | 4 | 128, 128 | 42551.59 | 41068.23 | 6921.87 |\n"
    "| Mixtral 8x22B | 8 | 128, 128 | 22948.57 | | |\n\n"
    "> [!NOTE] If you specify FP8 quantization, the KV cache will automatically be set to FP8 as well!\n\n"
)
V1 = (
    "#### Qwen3-30B-A3B\n\n"
    "| Sequence Length (ISL/OSL) | B200<br/>TP1 (FP4) | GB200<br/>TP1 (FP4) | H200<br/>TP8 (FP8) |\n"
    "|---|---|---|---|\n"
    "| 128/128 | 39,827 | 24,107 | 30,429 |\n\n"
    "#### Llama 4 Scout\n\n"
    "| Sequence Length (ISL/OSL) | B200<br/>TP1 (FP4) |\n|---|---|\n| 128/128 | 25,342 |\n\n"
)


def _read(text: str, sid: str = "trtllm-perf-overview-v0.17"):
    return trtllm_perf_moe.read(SourceFile("NVIDIA/TensorRT-LLM", "p.md", COMMIT, text), sid, "1.0")


def test_v017_mixtral_rows_as_published_with_their_layout_and_request_count():
    out = _read(WIDE + NREQ)
    assert not [r for r in out.rows if moe_row_error(r)]
    got = {(r["gpu"], r["tp"], r["prompt_tokens"], r["output_tokens"]): r for r in out.rows}
    assert set(got) == {
        ("H200", "1", "128", "128"),
        ("H100-SXM", "1", "128", "128"),
        ("H200", "1", "1000", "1000"),
        ("H200", "4", "128", "128"),
        ("H100-SXM", "4", "128", "128"),
    }
    r = got[("H200", "4", "128", "128")]
    assert (r["model"], r["weights"], r["kv"], r["engine_version"]) == ("mixtral-8x7b", "FP8", "fp8", "0.17")
    assert (r["out_tok_s"], r["load"], r["load_value"], r["n_requests"], r["stat"]) == (
        "42551.59",
        "offline",
        "30000",
        "30000",
        "-",
    )
    assert (r["ep"], r["attn_dp"], r["n_gpus"], r["ttft_ms"], r["tpot_ms"]) == ("1", "1", "4", "", "")
    assert r["source"] == f"https://github.com/NVIDIA/TensorRT-LLM/blob/{COMMIT}/p.md"
    assert got[("H200", "1", "1000", "1000")]["n_requests"] == "3000"
    assert out.skipped == {
        "model LLaMA v3.1 8B: no catalog MoE card": 3,
        "GPU L40S: no hardware card": 1,
        "lengths without a $num_requests": 1,
        "model Mixtral 8x22B: no catalog MoE card": 1,
    }


def test_v10_reads_tp1_fp4_and_leaves_unstated_expert_layouts_out():
    out = _read(V1 + NREQ, "trtllm-perf-overview-v1.0")
    assert len(out.rows) == 1 and not moe_row_error(out.rows[0])
    r = out.rows[0]
    assert (r["model"], r["gpu"], r["weights"], r["kv"], r["out_tok_s"], r["tp"]) == (
        "qwen3-30b-a3b",
        "B200",
        "NVFP4",
        "unstated",
        "39827",
        "1",
    )
    assert out.skipped == {
        "GPU GB200: no hardware card": 1,
        "MoE column above TP1: its expert layout (--ep $ep_size) is not stated": 1,
        "model Llama 4 Scout: no catalog MoE card": 1,
    }
