"""The shipped published MoE table (spec/published_moe.csv): every row's fields, layout and
provenance; the reader of aiconfigurator's MoE points on a small text in its format (what it keeps,
what it leaves out and why); and one-line errors naming the field on bad rows."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from pareto_atlas.calibrate.published_moe_table import HEADER, load_moe, moe_row_error, read_moe_table
from pareto_atlas.calibrate.published_readers import SourceFile, aiconfigurator_moe
from pareto_atlas.calibrate.published_table import PublishedTableError
from pareto_atlas.spec.cards import shipped_models

URL = re.compile(r"^https://github\.com/ai-dynamo/aiconfigurator/blob/[0-9a-f]{40}/\S+silicon_sample\.csv$")
TRT_URL = re.compile(
    r"^https://github\.com/NVIDIA/TensorRT-LLM/blob/[0-9a-f]{40}/docs/source/performance/perf-overview\.md$"
)
TRT_IDS = {"trtllm-perf-overview-v0.17", "trtllm-perf-overview-v1.0"}
COMMIT = "0" * 39 + "1"
AIC_HEAD = (
    "id,silicon_data_source,backend,backend_version,model_path,system,precision,mode,isl,osl,"
    "gemm_quant_mode,moe_quant_mode,batch_size,tp_size,pp_size,attention_dp_size,moe_tp_size,moe_ep_size,"
    "prefill_batch_size,prefill_num_workers,prefill_tp_size,prefill_pp_size,prefill_attention_dp_size,"
    "prefill_moe_tp_size,prefill_moe_ep_size,decode_batch_size,decode_num_workers,decode_tp_size,"
    "decode_pp_size,decode_attention_dp_size,decode_moe_tp_size,decode_moe_ep_size,silicon_ttft_ms,silicon_tpot_ms\n"
)


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return load_moe().rows


def test_every_row_valid_with_provenance(table):
    assert len(table) >= 150
    assert not [r["origin"] for _, r in table.iterrows() if moe_row_error(dict(r))]
    assert set(table.source_id) == {aiconfigurator_moe.SOURCE_ID, *TRT_IDS}
    assert all(shipped_models()[m].is_moe for m in table.model)
    assert {"qwen3-235b-a22b", "deepseek-v3", "gpt-oss-120b", "mixtral-8x7b", "qwen3-30b-a3b"} <= set(table.model)
    n = table[["tp", "pp", "replicas", "attn_dp", "ep", "n_gpus"]].astype(int)
    assert (n.n_gpus == n.tp * n.attn_dp * n.pp * n.replicas).all() and (n.n_gpus <= 8).all()
    assert ((n.tp * n.attn_dp) % n.ep == 0).all()
    # expert parallelism and attention-DP both appear
    assert (n.ep > 1).any() and (n.attn_dp > 1).any()

    aic = table[table.source_id == aiconfigurator_moe.SOURCE_ID]
    assert aic.source.map(lambda s: bool(URL.match(s))).all()
    # each figure as published: TTFT and TPOT in ms, statistic unstated, the closed loop's clients
    assert (aic.stat == "unstated").all() and (aic.load == "concurrency").all()
    assert aic.ttft_ms.astype(float).gt(0).all() and aic.tpot_ms.astype(float).gt(0).all()
    assert aic.notes.str.contains("moe_ep_size").all() and aic.notes.str.contains("silicon_data_source").all()
    # DeepSeek-R1 reads the deepseek-v3 card and says which checkpoint it was
    assert set(aic[aic.model == "deepseek-v3"].model_published) == {
        "deepseek-ai/DeepSeek-R1",
        "deepseek-ai/DeepSeek-V3",
    }

    # TensorRT-LLM's MoE rows: offline output tokens/s of the whole engine, as published (no TTFT or
    # TPOT: nothing converted), with the document's request count, at the layout the document states
    trt = table[table.source_id.isin(TRT_IDS)]
    assert trt.source.map(lambda s: bool(TRT_URL.match(s))).all()
    assert (trt.load == "offline").all() and (trt.stat == "-").all() and (trt.engine == "trtllm").all()
    assert trt.out_tok_s.astype(float).gt(0).all() and (trt.ttft_ms == "").all() and (trt.tpot_ms == "").all()
    assert (trt.n_requests.astype(int) == trt.load_value.astype(int)).all()
    assert (trt.ep == "1").all() and (trt.attn_dp == "1").all()
    assert set(trt[trt.model == "mixtral-8x7b"].tp.astype(int)) == {1, 2, 4, 8}
    assert set(trt[trt.model == "qwen3-30b-a3b"].weights) == {"NVFP4"}


def _read(*lines: str):
    return aiconfigurator_moe.read(SourceFile("ai-dynamo/aiconfigurator", "x.csv", COMMIT, AIC_HEAD + "".join(lines)))


ROW = (
    "q_c16_,src; silicon_concurrency=16; measured=2025-11-01T00:00:00.000Z,trtllm,1.0.0rc3,"
    "Qwen/Qwen3-235B-A22B-FP8,h100_sxm,fp8,{mode},1024,1024,{quant},{quant},16,{tp},1,{adp},{mtp},{ep},"
    ",,,,,,,,,,,,,,{ttft},{tpot}\n"
)


def _row(mode="agg", quant="fp8_block", tp=4, adp="", mtp=1, ep=4, ttft=500.5, tpot=30.25) -> str:
    return ROW.format(mode=mode, quant=quant, tp=tp, adp=adp, mtp=mtp, ep=ep, ttft=ttft, tpot=tpot)


def test_reader_keeps_the_layout_and_counts_what_it_leaves_out():
    out = _read(
        _row(),
        _row(),  # the same setup and figures twice: kept once
        _row(tp=1, adp=8, mtp=1, ep=8),  # attention-DP 8 with EP 8
        _row(quant="nvfp4"),
        _row(tp=64, adp=1, mtp=8, ep=8),
        _row(tp=1, adp="", mtp=2, ep=1),
        _row(mode="disagg"),
        "x_c8_,s; silicon_concurrency=8,vllm,0.1,meta-llama/Llama-3.1-70B,h200_sxm,fp8,agg,1,1,fp8,,8,4,1,,,,,,,,,,,,,,,,,,1,1\n",
    )
    assert not [r for r in out.rows if moe_row_error(r)]
    assert len(out.rows) == 2
    ep4 = next(r for r in out.rows if r["ep"] == "4")
    assert (ep4["tp"], ep4["attn_dp"], ep4["n_gpus"], ep4["model"], ep4["weights"]) == (
        "4",
        "1",
        "4",
        "qwen3-235b-a22b",
        "FP8",
    )
    assert "2 times" in ep4["notes"] and ep4["ttft_ms"] == "500.5" and ep4["tpot_ms"] == "30.25"
    assert ep4["date"] == "2025-11-01" and ep4["source"].endswith(f"/blob/{COMMIT}/x.csv")
    adp = next(r for r in out.rows if r["ep"] == "8")
    assert (adp["tp"], adp["attn_dp"], adp["n_gpus"]) == ("1", "8", "8")
    assert out.skipped == {
        "weights nvfp4: not mapped to a catalog weight format (FP4 of a 16-bit checkpoint: format not stated)": 1,
        "more than 8 GPUs per engine (multi-node: no card for the link between nodes)": 1,
        "tp x attention-DP differs from MoE-TP x EP (GPUs held not stated)": 1,
        "disaggregated MoE point (the simulated prefill pool has no expert parallelism)": 1,
        "not an MoE model with a catalog card": 1,
    }


def test_bad_rows_are_one_line_errors_naming_the_field(tmp_path):
    good = _read(_row()).rows[0]
    assert moe_row_error(good) == ""
    cases = {
        "ep": (good | {"ep": "3"}, "field 'ep'"),
        "attn_dp": (good | {"attn_dp": "x"}, "field 'attn_dp'"),
        "model": (good | {"model": "llama-3.1-70b"}, "field 'model'"),
        "n_gpus": (good | {"n_gpus": "8"}, "field 'n_gpus'"),
        # EP 6 over 2 x 3 GPUs: valid GPUs, but Mixtral's 8 experts do not split 6 ways
        "experts": (good | {"model": "mixtral-8x7b", "tp": "2", "attn_dp": "3", "ep": "6", "n_gpus": "6"}, "field ep"),
    }
    for name, (row, want) in cases.items():
        err = moe_row_error(row)
        assert want in err and "\n" not in err, (name, err)
    p = tmp_path / "t.csv"
    p.write_text(",".join(HEADER) + "\n" + ",".join(f'"{(good | {"ep": "3"})[c]}"' for c in HEADER) + "\n")
    with pytest.raises(PublishedTableError, match=r"t\.csv:2: field 'ep'"):
        read_moe_table(p)


def test_gpt_oss_fp4_rows_read_as_its_own_mxfp4_checkpoint():
    # the file labels openai/gpt-oss-120b's points precision fp4 / nvfp4, on Hopper too; the checkpoint ships
    # only as MXFP4 (its card's native_format, from config.json), so that is what the engine served
    oss = (
        "o_c8_,src; silicon_concurrency=8; measured=2026-03-27T08:01:51Z,vllm,0.18.0,openai/gpt-oss-120b,h200_sxm,"
        "fp4,agg,1024,8192,nvfp4,nvfp4,8,4,1,1,4,1" + "," * 15 + "46.1,3.9\n"
    )
    out = _read(oss, _row(quant="nvfp4"))
    assert [(r["model"], r["weights"], r["gpu"], r["tp"]) for r in out.rows] == [("gpt-oss-120b", "MXFP4", "H200", "4")]
    assert "gemm_quant_mode nvfp4" in out.rows[0]["weights_published"] and not moe_row_error(out.rows[0])
    # a 16-bit checkpoint's FP4 row (Qwen3's here) stays out: which FP4 checkpoint ran is not stated
    assert sum(out.skipped.values()) == 1 and "FP4 of a 16-bit checkpoint" in next(iter(out.skipped))


def test_gpt_oss_fp8_rows_read_as_its_own_mxfp4_checkpoint(table):
    # H100-SXM's TensorRT-LLM 1.3.0rc1 points label openai/gpt-oss-120b precision fp8; no FP8 checkpoint of it
    # is named and the generator passes no weight quantization, so the engine served the MXFP4 checkpoint;
    # the KV stays the FP8 the label deployed
    oss = (
        "o_c192_,src; silicon_concurrency=192; measured=2026-03-18,trtllm,1.3.0rc1,openai/gpt-oss-120b,h100_sxm,"
        "fp8,agg,4000,1000,fp8,fp8,48,4,1,,4,1" + "," * 15 + "1590.9,48.8\n"
    )
    out = _read(oss, _row())
    got = {r["model"]: (r["weights"], r["kv"]) for r in out.rows}
    assert got == {"gpt-oss-120b": ("MXFP4", "fp8"), "qwen3-235b-a22b": ("FP8", "fp8")}
    oss_row = next(r for r in out.rows if r["model"] == "gpt-oss-120b")
    assert "gemm_quant_mode fp8, moe_quant_mode fp8" in oss_row["weights_published"] and not moe_row_error(oss_row)
    # the shipped table: gpt-oss-120b only as MXFP4, its five H100 TensorRT-LLM points among them
    gpt = table[table.model == "gpt-oss-120b"]
    assert set(gpt.weights) == {"MXFP4"}
    fp8_label = gpt[gpt.weights_published.str.contains("gemm_quant_mode fp8")]
    assert len(fp8_label) == 5 and set(fp8_label.gpu) == {"H100-SXM"} and set(fp8_label.kv) == {"fp8"}


def test_a_closed_loop_point_inconsistent_by_littles_law_is_left_out_and_counted():
    # 512 clients whose own TTFT and TPOT put ~170 decoding at once, at a TPOT a third of the same
    # setup's at 16 clients: a larger batch stepping faster than a smaller one cannot have run as a
    # closed loop at these lengths; a TPOT above 16 clients', or within the repeats' spread, is kept
    def at(conc: int, ttft: float, tpot: float) -> str:
        r = _row(ttft=ttft, tpot=tpot)
        return r.replace("q_c16_", f"q_c{conc}_").replace("concurrency=16", f"concurrency={conc}")

    base = at(16, 500.5, 30.25)
    out = _read(base, at(512, 20000, 10))
    assert [r["load_value"] for r in out.rows] == ["16"]
    assert out.skipped == {aiconfigurator_moe.INCONSISTENT: 1}
    for tpot in (40, 28):  # slower than at 16 clients; within TPOT_SPREAD of it
        kept = _read(base, at(512, 20000, tpot))
        assert sorted(r["load_value"] for r in kept.rows) == ["16", "512"] and not kept.skipped
    # few clients queued (the implied batch over half of them): kept whatever its TPOT
    assert len(_read(base, at(32, 100, 10)).rows) == 2
    # and none of the shipped table's points is such
    rows = [dict(r) for r in read_moe_table() if r["source_id"] == aiconfigurator_moe.SOURCE_ID]
    assert not aiconfigurator_moe.inconsistent(rows)
