"""aiconfigurator's all-reduce operator tables: the reader (fields, units, provenance, one-line errors), the shipped
table, and the link fit pricing an engine it saw no row of by its measured collective (published_link)."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from pareto_atlas.calibrate import published_link as pl
from pareto_atlas.calibrate.published_readers import aiconfigurator_allreduce_ops as ops
from pareto_atlas.spec.cards import shipped_hardware

HW = shipped_hardware()
COMMIT = "0" * 39 + "1"
PATH = ops.PATH.format(card="h100_sxm", engine="vllm", release="0.14.0")


def _parquet(**over) -> bytes:
    base = {
        "framework": "vLLM",
        "version": "0.14.0",
        "device": "NVIDIA H100 80GB HBM3",
        "op_name": "all_reduce",
        "kernel_source": "vLLM_custom_graph",
        "allreduce_dtype": "bfloat16",
        "num_gpus": 4,
        "message_size": 8192,
        "latency": 0.0049,
    }
    rows = [base, base | {"kernel_source": "vLLM_custom_eager"}, base | {"message_size": 1 << 20}]
    rows += [base | {"num_gpus": 8, "latency": 0.0052}, base | {"op_name": "all_gather"}]
    df = pd.DataFrame([r | over for r in rows])
    buf = io.BytesIO()
    df.to_parquet(buf)
    return buf.getvalue()


def test_reader_keeps_the_files_fields_units_and_provenance():
    res = ops.read(ops.OpsFile("ai-dynamo/aiconfigurator", PATH, COMMIT, _parquet()))
    assert len(res.rows) == 2
    r = res.rows[0]
    assert (r["gpu"], r["engine"], r["version"], r["kernel_source"]) == (
        "H100-SXM",
        "vllm",
        "0.14.0",
        "vLLM_custom_graph",
    )
    assert (r["num_gpus"], r["message_size"], r["latency"]) == ("4", "8192", "0.0049")  # ms, as stated
    assert r["source"] == f"published:aiconfigurator custom_allreduce_perf h100_sxm/vllm/0.14.0 @{COMMIT[:12]}"
    assert set(r) == set(ops.HEADER) and ops.row_error(r) == ""
    assert res.skipped == {
        "eager kernel (decode runs under CUDA graphs)": 1,
        f"message_size over {ops.MAX_MESSAGE}": 1,
        "op_name all_gather": 1,
    }
    # another framework's rows in the engine's folder (SGLang's hold TensorRT-LLM's) are left out
    res = ops.read(ops.OpsFile("a/b", PATH, COMMIT, _parquet(framework="TRTLLM")))
    assert not res.rows and res.skipped["framework, version or device not the path's"] == 5


def test_reader_errors_name_the_field():
    df = pd.read_parquet(io.BytesIO(_parquet())).drop(columns=["num_gpus"])
    buf = io.BytesIO()
    df.to_parquet(buf)
    with pytest.raises(ops.AllreduceOpsFileError, match="no column 'num_gpus'"):
        ops.read(ops.OpsFile("a/b", PATH, COMMIT, buf.getvalue()))
    with pytest.raises(ops.AllreduceOpsFileError, match="'latency'"):
        ops.read(ops.OpsFile("a/b", PATH, COMMIT, _parquet(latency=-0.1)))
    good = ops.read(ops.OpsFile("a/b", PATH, COMMIT, _parquet())).rows[0]
    assert ops.row_error(good | {"num_gpus": "1"}).startswith("num_gpus:")
    assert ops.row_error(good | {"latency": "x"}).startswith("latency:")
    assert ops.row_error(good | {"source": "made up"}).startswith("source:")


def test_shipped_table_is_cited_and_read_as_a_factor_on_the_crossing(monkeypatch):
    df = pl.allreduce_table()
    assert list(df.columns) == list(ops.HEADER)
    assert all(ops.row_error({c: str(v) for c, v in r.items()}) == "" for r in df.to_dict("records"))
    assert df.source.str.match(r"published:aiconfigurator custom_allreduce_perf \w+/\w+/[\w.]+ @[0-9a-f]{12}$").all()
    # H100-SXM's engines: a few us an all-reduce through the switch (two crossings of 1 us), far below the
    # x16 (32 us) the link fit gives TensorRT-LLM
    monkeypatch.setattr(pl, "MEASURED_FALLBACK", True)
    got = pl.measured_latency_scales(HW["H100-SXM"])
    assert set(got) == {"trtllm", "vllm"}
    for e, i in got.items():
        us = df[(df.gpu == "H100-SXM") & (df.engine == e)].latency.median() * 1e3
        scale = us / (pl.SWITCH_HOPS * HW["H100-SXM"].link_latency_us)
        assert pl.LATENCY_SCALES[i] > 0
        # the nearest grid point in ratio
        assert all(
            abs(pl.np.log(pl.LATENCY_SCALES[i] / scale)) <= abs(pl.np.log(s / scale)) for s in pl.LATENCY_SCALES if s
        )
    assert pl.measured_latency_scales(HW["A100-80G-PCIe"]) == {}  # no table for the card
    monkeypatch.setattr(pl, "MEASURED_FALLBACK", False)
    assert pl.measured_latency_scales(HW["H100-SXM"]) == {}


def test_an_engine_takes_its_own_then_its_measured_then_the_pooled_factor():
    cal = pl.LinkCalibration(
        "H100-SXM", 0.55, 8.0, pd.DataFrame(), 0.5, 0.3, "LOSO", "", latency_by_engine={"trtllm": 16.0}
    )
    cal = pl.LinkCalibration(**{**cal.__dict__, "measured_by_engine": {"trtllm": 2.0, "vllm": 2.0}})
    assert cal.latency_for("trtllm") == 16.0  # fitted on its own rows
    assert cal.latency_for("vllm") == 2.0  # no row of it: its all-reduce as measured
    assert cal.latency_for("sglang") == 8.0  # neither: the pooled factor
    # the stored fit reads back with its measured factors
    back = pl._decode(pl._encode(cal))
    assert back.measured_by_engine == {"trtllm": 2.0, "vllm": 2.0} and back.latency_for("vllm") == 2.0


def test_a_held_out_engine_without_training_rows_takes_its_measured_factor():
    n_s = len(pl.LATENCY_SCALES)
    eng = pl.np.array(["trtllm", "trtllm", "vllm", "vllm"])
    # (grid, rows, targets): trtllm's rows fit best at latency index 6, vllm's at index 1; one link_eff
    err = pl.np.full((n_s, 4, 1), 0.5)
    err[6, :2] = 0.0
    err[1, 2:] = 0.0
    train = eng == "trtllm"  # vLLM left out (LOEO, or LOSO where its every row is the left-out document's)
    i, pooled, scales = pl._held_choice(err, eng, train, True, {"vllm": 3})
    assert (i, pooled, scales) == (0, 6, {"trtllm": 6, "vllm": 3})
    assert pl._errors_at(err, eng, i, pooled, scales)[2:].ravel().tolist() == [0.5, 0.5]  # index 3's errors
    # without a measurement (or with MEASURED_FALLBACK off: measured {}), the pooled factor, as before
    assert pl._held_choice(err, eng, train, True, {})[2] == {"trtllm": 6}
    # an engine with training rows keeps its own factor whatever was measured
    assert pl._held_choice(err, eng, pl.np.ones(4, bool), True, {"vllm": 3})[2] == {"trtllm": 6, "vllm": 1}
