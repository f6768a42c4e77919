"""aiconfigurator's GEMM operator tables: the reader (fields, units, provenance, one-line errors), the shipped
table, the per-(card, engine, format) fixed cost a linear call fitted on it, and the cost model charging it."""

from __future__ import annotations

import io
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from pareto_atlas.calibrate.published_readers import aiconfigurator_gemm_ops as ops
from pareto_atlas.simulate import gemm_floor
from pareto_atlas.simulate.cost_model import coeffs
from pareto_atlas.simulate.kernels import O_DEV, W_T, step_time
from pareto_atlas.simulate.params import CalibParams
from pareto_atlas.spec.cards import shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs

M, HW = shipped_models(), shipped_hardware()
COMMIT = "0" * 39 + "1"
PATH = ops.PATH.format(card="h100_sxm", engine="trtllm", release="1.2.0rc5")


def _parquet(**over) -> bytes:
    base = {
        "framework": "TRTLLM",
        "version": "1.2.0rc5",
        "device": "NVIDIA H100 80GB HBM3",
        "op_name": "gemm",
        "kernel_source": "torch_flow",
        "gemm_dtype": "fp8",
        "m": 8,
        "n": 5120,
        "k": 1024,
        "latency": 0.0167,
    }
    rows = [base, base | {"gemm_dtype": "fp8_block"}, base | {"m": 4096}, base | {"m": 4}, base | {"n": 65536}]
    rows += [base | {"k": 512}, base | {"gemm_dtype": "bfloat16", "m": 1}]
    df = pd.DataFrame([r | over for r in rows])
    buf = io.BytesIO()
    df.to_parquet(buf)
    return buf.getvalue()


def test_reader_keeps_the_files_fields_units_and_provenance():
    res = ops.read(ops.OpsFile("ai-dynamo/aiconfigurator", PATH, COMMIT, _parquet()), {"fp8", "bfloat16"})
    assert len(res.rows) == 2
    r = res.rows[0]
    assert (r["gpu"], r["engine"], r["version"], r["gemm_dtype"]) == ("H100-SXM", "trtllm", "1.2.0rc5", "fp8")
    assert (r["m"], r["n"], r["k"], r["latency"]) == ("8", "5120", "1024", "0.0167")  # ms, as stated
    assert r["source"] == f"published:aiconfigurator gemm_perf h100_sxm/trtllm/1.2.0rc5 @{COMMIT[:12]}"
    assert set(r) == set(ops.HEADER) and ops.row_error(r) == ""
    assert res.skipped == {
        "gemm_dtype fp8_block not asked for": 1,
        "m over 16 (a prefill's compute-bound sizes)": 1,
        "m not one of 1, 8, 16": 1,
        "n or k outside 1024-16384": 2,
    }
    # a row whose device is not the path's card is left out, not read as the path's
    res = ops.read(ops.OpsFile("a/b", PATH, COMMIT, _parquet(device="NVIDIA H200")), {"fp8"})
    assert not res.rows and res.skipped["framework, version or device not the path's"] == 7


def test_reader_errors_name_the_field():
    df = pd.read_parquet(io.BytesIO(_parquet())).drop(columns=["k"])
    buf = io.BytesIO()
    df.to_parquet(buf)
    with pytest.raises(ops.GemmOpsFileError, match="no column 'k'"):
        ops.read(ops.OpsFile("a/b", PATH, COMMIT, buf.getvalue()), {"fp8"})
    with pytest.raises(ops.GemmOpsFileError, match="'latency'"):
        ops.read(ops.OpsFile("a/b", PATH, COMMIT, _parquet(latency=0.0)), {"fp8"})
    with pytest.raises(ops.GemmOpsFileError, match="not a <card>/gemm/"):
        ops.read(ops.OpsFile("a/b", PATH.replace("gemm/", "moe/"), COMMIT, _parquet()), {"fp8"})
    good = ops.read(ops.OpsFile("a/b", PATH, COMMIT, _parquet()), {"fp8"}).rows[0]
    assert ops.row_error(good | {"latency": "-1"}).startswith("latency:")
    assert ops.row_error(good | {"n": "x"}).startswith("n:")
    assert ops.row_error(good | {"source": "made up"}).startswith("source:")


def test_the_fit_recovers_a_known_law():
    fixed, per_byte = 5e-6, 1 / 3e12
    n, k = np.meshgrid([1024, 4096, 16384], [1024, 5120, 12288])
    b = (n * k).ravel().astype(float)
    got = gemm_floor.fit_floor(b, fixed + per_byte * b)
    assert got[0] == pytest.approx(fixed, rel=1e-6) and got[1] == pytest.approx(per_byte, rel=1e-6) and got[2] < 1e-9


def test_shipped_table_and_laws():
    df = gemm_floor.operator_table()
    assert list(df.columns) == list(ops.HEADER)
    assert all(ops.row_error({c: str(v) for c, v in r.items()}) == "" for r in df.head(200).to_dict("records"))
    assert df.source.str.match(r"published:aiconfigurator gemm_perf \w+/\w+/[\w.]+ @[0-9a-f]{12}$").all()
    laws = gemm_floor.floors()
    for (gpu, engine, dtype), law in laws.items():
        assert law.rel_err < 0.1, law.provenance()  # a fixed cost and a rate track every row
        assert 1e-6 < law.fixed_s < 50e-6
    # per-tensor FP8 quantizes its activations on every call: a larger fixed cost than BF16's on each engine
    for gpu, engine, _ in laws:
        assert laws[gpu, engine, "fp8"].fixed_s > 2 * laws[gpu, engine, "bfloat16"].fixed_s


def test_the_cost_model_charges_each_call_on_every_device(monkeypatch):
    qwen, h100 = M["qwen3-32b"], HW["H100-SXM"]
    p = CalibParams(hardware="H100-SXM", engine="trtllm")
    monkeypatch.setattr(gemm_floor, "MODE", "on")
    law = gemm_floor.floor_for("H100-SXM", "trtllm", "FP8")
    assert law is not None
    added = {}
    for tp in (1, 2, 8):
        knobs = Knobs(weights="FP8", tp=tp)
        on = coeffs(qwen, h100, knobs, p)
        monkeypatch.setattr(gemm_floor, "MODE", "off")
        off = coeffs(qwen, h100, knobs, p)
        monkeypatch.setattr(gemm_floor, "MODE", "on")
        added[tp] = on[O_DEV] - off[O_DEV]
        assert on[W_T] == off[W_T]  # the weights' streaming is the rate's, as before
        # a decode step of 8 sequences takes the calls' fixed cost more
        assert step_time(on, 8.0, 8.0 * 1500, 0.0, 0.0, 0.0, 8.0) - step_time(
            off, 8.0, 8.0 * 1500, 0.0, 0.0, 0.0, 8.0
        ) == pytest.approx(added[tp], rel=1e-9)
    # the same on every device whatever the TP: a call's fixed cost does not divide
    assert added[1] == added[2] == added[8] == pytest.approx((4 * qwen.n_layers + 1) * law.fixed_s)
    # no law: another engine (SGLang), a format without a table, a card without one, a mixture of experts
    assert coeffs(qwen, h100, Knobs(weights="FP8"), replace(p, engine="sglang"))[O_DEV] == 0.0
    assert coeffs(qwen, h100, Knobs(weights="AWQ4"), p)[O_DEV] == 0.0
    assert coeffs(qwen, HW["A100-80G-PCIe"], Knobs(weights="BF16"), replace(p, hardware="A100-80G-PCIe"))[O_DEV] == 0.0
    moe = next(m for m in M.values() if m.is_moe and not m.is_mla)
    assert gemm_floor.step_fixed_s(moe, "H100-SXM", "trtllm", "FP8") == 0.0


def test_the_fits_key_and_mode(monkeypatch):
    from pareto_atlas.calibrate.published_cache import fit_key
    from pareto_atlas.calibrate.published_table import load_published

    t = load_published()
    monkeypatch.setattr(gemm_floor, "MODE", "on")
    on = fit_key(t)
    monkeypatch.setattr(gemm_floor, "MODE", "off")
    assert fit_key(t) != on  # a fit made without the fixed cost is never read back as one with it
    assert gemm_floor.floor_for("H100-SXM", "trtllm", "FP8") is None
    monkeypatch.setattr(gemm_floor, "MODE", "sometimes")
    with pytest.raises(ValueError, match="gemm_floor.MODE"):
        gemm_floor.floor_for("H100-SXM", "trtllm", "FP8")
