"""aiconfigurator's MoE operator tables: the reader (fields, units, provenance, one-line errors), the shipped
table, the per-(card, engine, format) layer law fitted on it, and the cost model pricing MoE layers by it."""

from __future__ import annotations

import io
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from pareto_atlas.calibrate.published_readers import aiconfigurator_moe_ops as ops
from pareto_atlas.simulate import moe_law
from pareto_atlas.simulate.cost_model import coeffs
from pareto_atlas.simulate.kernels import FL, MOE_W, O_DEV, step_time
from pareto_atlas.simulate.params import CalibParams
from pareto_atlas.spec.cards import shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs

M, HW = shipped_models(), shipped_hardware()
COMMIT = "0" * 39 + "1"
PATH = ops.PATH.format(card="h200_sxm", engine="trtllm", release="1.2.0rc5")
GPT = (2880, 2880, 128, 4)


def _parquet(**over) -> bytes:
    base = {
        "framework": "TRTLLM",
        "version": "1.2.0rc5",
        "device": "NVIDIA H200",
        "op_name": "moe",
        "kernel_source": "moe_torch_flow",
        "moe_dtype": "w4a16_mxfp4",
        "num_tokens": 4,
        "hidden_size": 2880,
        "inter_size": 2880,
        "topk": 4,
        "num_experts": 128,
        "moe_tp_size": 1,
        "moe_ep_size": 1,
        "distribution": "balanced",
        "latency": 0.125,
    }
    rows = [base, base | {"distribution": "power_law_1.2"}, base | {"hidden_size": 1234}, base | {"moe_ep_size": 16}]
    rows += [base | {"moe_dtype": "bfloat16"}, base | {"num_tokens": 8192}, base | {"num_tokens": 1, "latency": 0.1}]
    df = pd.DataFrame([r | over for r in rows])
    buf = io.BytesIO()
    df.to_parquet(buf)
    return buf.getvalue()


def test_reader_keeps_the_files_fields_units_and_provenance():
    res = ops.read(ops.OpsFile("ai-dynamo/aiconfigurator", PATH, COMMIT, _parquet()), {GPT}, {"w4a16_mxfp4"})
    assert len(res.rows) == 2
    r = res.rows[0]
    assert (r["gpu"], r["engine"], r["version"], r["moe_dtype"]) == ("H200", "trtllm", "1.2.0rc5", "w4a16_mxfp4")
    assert (r["num_tokens"], r["hidden_size"], r["topk"], r["latency"]) == ("4", "2880", "4", "0.125")  # ms, as stated
    assert r["source"] == f"published:aiconfigurator moe_perf h200_sxm/trtllm/1.2.0rc5 @{COMMIT[:12]}"
    assert set(r) == set(ops.HEADER) and ops.row_error(r) == ""
    assert res.skipped == {
        "routing distribution other than balanced": 1,
        "a shape no shipped MoE card has": 1,
        "moe_tp_size x moe_ep_size over one node": 1,
        "moe_dtype bfloat16 not asked for": 1,
        "num_tokens over 4096": 1,
    }
    # a row whose device is not the path's card is left out, not read as the path's
    res = ops.read(ops.OpsFile("a/b", PATH, COMMIT, _parquet(device="NVIDIA B200")), {GPT}, {"w4a16_mxfp4"})
    assert not res.rows and res.skipped["framework, version or device not the path's"] == 7


def test_reader_errors_name_the_field():
    df = pd.read_parquet(io.BytesIO(_parquet())).drop(columns=["topk"])
    buf = io.BytesIO()
    df.to_parquet(buf)
    with pytest.raises(ops.MoeOpsFileError, match="no column 'topk'"):
        ops.read(ops.OpsFile("a/b", PATH, COMMIT, buf.getvalue()), {GPT}, {"w4a16_mxfp4"})
    with pytest.raises(ops.MoeOpsFileError, match="'latency'"):
        ops.read(ops.OpsFile("a/b", PATH, COMMIT, _parquet(latency=-1.0)), {GPT}, {"w4a16_mxfp4"})
    with pytest.raises(ops.MoeOpsFileError, match="not a readable parquet"):
        ops.read(ops.OpsFile("a/b", PATH, COMMIT, b"not parquet"), {GPT}, {"w4a16_mxfp4"})
    good = ops.read(ops.OpsFile("a/b", PATH, COMMIT, _parquet()), {GPT}, {"w4a16_mxfp4"}).rows[0]
    assert ops.row_error(good | {"latency": "0"}).startswith("latency:")
    assert ops.row_error(good | {"topk": "x"}).startswith("topk:")
    assert ops.row_error(good | {"source": "made up"}).startswith("source:")


def test_shipped_table_rows_are_well_formed_and_cited():
    df = moe_law.operator_table()
    assert list(df.columns) == list(ops.HEADER)
    assert all(ops.row_error({c: str(v) for c, v in r.items()}) == "" for r in df.head(200).to_dict("records"))
    assert set(df.gpu) <= {"H100-SXM", "H200", "B200"}
    shapes = {moe_law.model_shape(m) for m in M.values() if m.is_moe}
    assert {tuple(s) for s in df[list(moe_law.SHAPE)].drop_duplicates().itertuples(index=False)} <= shapes
    assert df.source.str.match(r"published:aiconfigurator moe_perf \w+/\w+/[\w.]+ @[0-9a-f]{12}$").all()


def test_the_fit_recovers_a_known_law():
    fixed, s_w, s_f = 40e-6, 1 / 5e12, 1 / 600e12
    rows = []
    for shape in (GPT, (4096, 1536, 128, 8), (7168, 2048, 256, 8)):
        for tp, ep in ((1, 1), (2, 1), (1, 4), (2, 4)):
            for t in (1, 2, 4, 16, 64, 256, 1024, 4096):
                x = moe_law.design(np.array([t], float), *shape, tp, ep)[0]
                rows.append(
                    dict(zip(moe_law.SHAPE, shape))
                    | dict(gpu="H200", engine="trtllm", moe_dtype="fp8_block", num_tokens=t, moe_tp_size=tp)
                    | dict(moe_ep_size=ep, latency=float(x @ [fixed, s_w, s_f]) * 1e3, source="s")
                )
    law = moe_law.fit_laws(pd.DataFrame(rows).query("moe_tp_size == 2 and moe_ep_size == 4"))[
        "H200", "trtllm", "fp8_block", 2, 4
    ]
    assert law.fixed_s == pytest.approx(fixed, rel=1e-6)
    assert law.s_per_weight == pytest.approx(s_w, rel=1e-6)
    assert law.s_per_flop == pytest.approx(s_f, rel=1e-6)
    assert law.rel_err < 1e-6 and law.rows == len(rows) // 4 and len(law.shapes) == 3
    # a law per split, each fitted on its own rows; one shape left out: fitted on the other two
    assert len(moe_law.fit_laws(pd.DataFrame(rows))) == 4
    assert len(moe_law.fit_laws(pd.DataFrame(rows), leave_out=GPT)["H200", "trtllm", "fp8_block", 1, 1].shapes) == 2


def test_the_shipped_laws_track_their_rows():
    laws = moe_law.laws()
    law = laws["H200", "trtllm", "w4a16_mxfp4", 1, 1]
    assert 0.01 < law.rel_err < 0.2
    # every expert read (64 tokens x top-4 of 128): within 20 % of the measured layer
    df = moe_law.operator_table()
    row = df[(df.gpu == "H200") & (df.engine == "trtllm") & (df.moe_dtype == "w4a16_mxfp4") & (df.num_tokens == 64)]
    row = row[(row.moe_tp_size == 1) & (row.moe_ep_size == 1)].iloc[0]
    assert law.layer_s(64, *GPT) == pytest.approx(row.latency * 1e-3, rel=0.2)
    # Blackwell's MXFP8 x MXFP4 layer is faster than Hopper's BF16 x MXFP4 at every token count
    b200 = laws["B200", "trtllm", "w4a8_mxfp4_mxfp8", 1, 1]
    assert all(b200.layer_s(t, *GPT) < law.layer_s(t, *GPT) for t in (1, 4, 32, 512))


def test_fp8_experts_run_per_tensor_or_block_scaled_as_their_checkpoint(monkeypatch):
    h100, b200 = HW["H100-SXM"], HW["B200"]
    # DeepSeek-V3's and Qwen3-235B's FP8 checkpoints are block-scaled; Mixtral's FP8 is quantized per tensor
    assert moe_law.moe_dtype("FP8", h100, "trtllm", M["deepseek-v3"]) == "fp8_block"
    assert moe_law.moe_dtype("FP8", h100, "vllm", M["qwen3-235b-a22b"]) == "fp8_block"
    # (by the block-FP8 law unless PER_TENSOR_FP8 names the per-tensor tables)
    assert moe_law.moe_dtype("FP8", h100, "trtllm", M["mixtral-8x7b"]) == "fp8_block"
    monkeypatch.setattr(moe_law, "PER_TENSOR_FP8", "fp8")
    assert moe_law.moe_dtype("FP8", h100, "trtllm", M["mixtral-8x7b"]) == "fp8"
    assert moe_law.moe_dtype("FP8", h100, "trtllm", M["deepseek-v3"]) == "fp8_block"
    monkeypatch.setattr(moe_law, "PER_TENSOR_FP8", "fp16")
    with pytest.raises(ValueError, match="PER_TENSOR_FP8"):
        moe_law.moe_dtype("FP8", h100, "trtllm", M["mixtral-8x7b"])
    assert moe_law.moe_dtype("MXFP4", h100, "trtllm", M["gpt-oss-120b"]) == "w4a16_mxfp4"
    assert moe_law.moe_dtype("MXFP4", b200, "trtllm", M["gpt-oss-120b"]) == "w4a8_mxfp4_mxfp8"
    assert moe_law.moe_dtype("BF16", h100, "trtllm", M["mixtral-8x7b"]) is None
    assert set(moe_law.FP8_BLOCK) <= {n for n, m in M.items() if m.is_moe}


def test_the_shipped_laws_cover_h100s_served_formats(monkeypatch):
    monkeypatch.setattr(moe_law, "MODE", "on")
    monkeypatch.setattr(moe_law, "PER_TENSOR_FP8", "fp8")
    h100, mix, gpt = HW["H100-SXM"], M["mixtral-8x7b"], M["gpt-oss-120b"]
    # Mixtral's per-tensor FP8 under TensorRT-LLM at the perf-overview's TP1-8, fitted on its own shape too
    for tp in (1, 2, 4, 8):
        law = moe_law.law_for(h100, "trtllm", mix, "FP8", tp, 1)
        assert law.moe_dtype == "fp8" and moe_law.model_shape(mix) in law.shapes
    # gpt-oss under vLLM at the served MoE-TP 2, 4 and 8: the one H100 vLLM table of its layer (0.24.0)
    for tp in (2, 4, 8):
        law = moe_law.law_for(h100, "vllm", gpt, "MXFP4", tp, 1)
        assert law.moe_dtype == "w4a16_mxfp4" and "h100_sxm/vllm/0.24.0" in law.source
    # per tensor and block-scaled differ where the layer computes: Mixtral at 4,096 tokens on one H100 is
    # measured about twice as fast per tensor, and each law keeps within 20 % of its own row
    df = moe_law.operator_table()
    at = df[(df.gpu == "H100-SXM") & (df.engine == "trtllm") & (df.num_tokens == 4096) & (df.hidden_size == 4096)]
    at = at[(at.inter_size == 14336) & (at.moe_tp_size == 1) & (at.moe_ep_size == 1)].set_index("moe_dtype").latency
    assert at["fp8_block"] > 1.5 * at["fp8"]
    for dtype in ("fp8", "fp8_block"):
        law = moe_law.laws()["H100-SXM", "trtllm", dtype, 1, 1]
        assert law.layer_s(4096, *moe_law.model_shape(mix)) == pytest.approx(at[dtype] * 1e-3, rel=0.2)


def test_the_cost_model_prices_moe_layers_by_the_law(monkeypatch):
    gpt, h200 = M["gpt-oss-120b"], HW["H200"]
    knobs = Knobs(weights="MXFP4")
    p = CalibParams(hardware="H200", engine="trtllm", moe_layer_s=50e-6)
    law = moe_law.laws()["H200", "trtllm", "w4a16_mxfp4", 1, 1]
    monkeypatch.setattr(moe_law, "MODE", "on")
    c = coeffs(gpt, h200, knobs, p)
    assert c[MOE_W] == pytest.approx(gpt.routed_params * law.s_per_weight, rel=1e-12)
    monkeypatch.setattr(moe_law, "MODE", "off")
    off = coeffs(gpt, h200, knobs, p)
    # the fixed cost a layer is the law's, not the fitted 50 us
    assert c[O_DEV] - off[O_DEV] == pytest.approx(gpt.moe_layers * (law.fixed_s - 50e-6), rel=1e-9)
    assert c[FL] != off[FL]
    one = step_time(c, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0)
    assert one != pytest.approx(step_time(off, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0), rel=1e-3)
    # no law for the engine (or a format none measured): the cost model's own terms
    monkeypatch.setattr(moe_law, "MODE", "on")
    # TP2: the split's own law (MoE-TP 2, EP 1)
    tp2 = moe_law.laws()["H200", "trtllm", "w4a16_mxfp4", 2, 1]
    assert coeffs(gpt, h200, replace(knobs, tp=2), p)[MOE_W] == pytest.approx(gpt.routed_params / 2 * tp2.s_per_weight)
    assert np.array_equal(coeffs(gpt, h200, knobs, replace(p, engine="llamacpp")), off)
    # leave-shape-out: gpt-oss's shape is the only MXFP4 one, so no MXFP4 law is left for it: its layer
    # takes the cost model's own rates and the least fixed cost of the formats left (moe_law.carried_law)
    monkeypatch.setattr(moe_law, "MODE", "leave-shape-out")
    assert moe_law.law_for(h200, "trtllm", gpt, "MXFP4", 1, 1) is None
    lent = moe_law.carried_law(h200, "trtllm", gpt, "MXFP4", 1, 1)
    assert lent is not None and lent.moe_dtype != "w4a16_mxfp4"
    shape_out = coeffs(gpt, h200, knobs, p)
    assert shape_out[MOE_W] == off[MOE_W] and shape_out[FL] == off[FL]
    assert shape_out[O_DEV] - off[O_DEV] == pytest.approx(gpt.moe_layers * (lent.fixed_s - 50e-6), rel=1e-9)


def test_a_point_priced_by_a_law_says_so(monkeypatch):
    from pareto_atlas.simulate.api import simulate_point

    gpt, h200 = M["gpt-oss-120b"], HW["H200"]
    p = CalibParams(hardware="H200", engine="trtllm")
    monkeypatch.setattr(moe_law, "MODE", "on")
    row = simulate_point(gpt, h200, Knobs(weights="MXFP4"), 128, 8, concurrency=1, n_requests=4, params=p)
    assert "aiconfigurator operator law H200/trtllm/w4a16_mxfp4 MoE-TP1 EP1" in row["calib_provenance"]
    assert "moe_perf h200_sxm/trtllm/1.2.0rc5" in row["calib_provenance"]
    monkeypatch.setattr(moe_law, "MODE", "off")
    row = simulate_point(gpt, h200, Knobs(weights="MXFP4"), 128, 8, concurrency=1, n_requests=4, params=p)
    assert "operator law" not in row["calib_provenance"]


def test_the_product_prices_moe_layers_by_the_operator_laws_by_default():
    # moe_law.MODE's docstring gives the held-out figures the default rests on
    gpt, h200 = M["gpt-oss-120b"], HW["H200"]
    p = CalibParams(hardware="H200", engine="trtllm", moe_layer_s=50e-6)
    assert moe_law.MODE == "on"
    law = moe_law.law_for(h200, "trtllm", gpt, "MXFP4", 1, 1)
    assert law is not None and law == moe_law.laws()["H200", "trtllm", "w4a16_mxfp4", 1, 1]
    assert coeffs(gpt, h200, Knobs(weights="MXFP4"), p)[MOE_W] == pytest.approx(gpt.routed_params * law.s_per_weight)
    # a dense model never takes a law
    assert moe_law.law_for(h200, "trtllm", M["llama-3.1-8b"], "FP8", 1, 1) is None


def test_an_untimed_split_pays_the_one_gpu_laws_fixed_cost_and_its_share_of_the_rest(monkeypatch):
    # the evidence the rule rests on, in the shipped rows: H200 vLLM 0.18.0 times the MXFP4 layer alike
    # at EP 1-8 (within 5 % at each token count), and times no MoE-TP above 1
    df = moe_law.operator_table()
    v = df[(df.gpu == "H200") & (df.engine == "vllm") & (df.moe_dtype == "w4a16_mxfp4")]
    assert set(v.moe_tp_size) == {1} and set(v.moe_ep_size) == {1, 2, 4, 8}
    spread = v.groupby(["hidden_size", "num_tokens"]).latency.agg(lambda s: s.max() / s.min() - 1)
    assert spread.max() < 0.05
    laws = moe_law.laws()
    one = laws["H200", "vllm", "w4a16_mxfp4", 1, 1]
    assert moe_law.split_law(laws, ("H200", "vllm", "w4a16_mxfp4"), 8, 1) is one
    own = laws["H200", "trtllm", "w4a16_mxfp4", 8, 1]  # a timed split keeps its own law
    assert moe_law.split_law(laws, ("H200", "trtllm", "w4a16_mxfp4"), 8, 1) is own
    assert moe_law.split_law(laws, ("B200", "vllm", "w4a16_mxfp4"), 2, 1) is None  # none timed at all
    # the cost model: a TP8 worker's GPU pays the one-GPU fixed cost a layer, and 1/8 of its streaming
    gpt, h200 = M["gpt-oss-120b"], HW["H200"]
    p = CalibParams(hardware="H200", engine="vllm", moe_layer_s=25e-6)
    monkeypatch.setattr(moe_law, "MODE", "on")
    tp1, tp8 = coeffs(gpt, h200, Knobs(weights="MXFP4"), p), coeffs(gpt, h200, Knobs(weights="MXFP4", tp=8), p)
    assert tp8[MOE_W] == pytest.approx(tp1[MOE_W] / 8, rel=1e-12)
    assert tp8[O_DEV] == pytest.approx(tp1[O_DEV], rel=1e-12) and tp8[O_DEV] >= gpt.moe_layers * one.fixed_s
    # physics: splitting over 8 GPUs never makes a 4-sequence decode step slower, and never 8x faster
    # (the layer's launches are paid on every GPU); before, the grid's 25 us a layer made it 4.8x faster
    s1, s8 = (step_time(c, 4.0, 4.0 * 1536, 0.0, 0.0, 0.0, 4.0) for c in (tp1, tp8))
    assert s8 < s1 < 3.0 * s8
    from pareto_atlas.simulate.api import simulate_point

    row = simulate_point(gpt, h200, Knobs(weights="MXFP4", tp=8), 128, 8, concurrency=1, n_requests=4, params=p)
    assert "H200/vllm/w4a16_mxfp4 MoE-TP1 EP1" in row["calib_provenance"]
    assert "for split MoE-TP8 EP1 (not timed)" in row["calib_provenance"]


def test_a_format_none_timed_pays_the_least_fixed_cost_of_the_formats_timed(monkeypatch):
    # Qwen3-30B-A3B at 16 bits on H200 under vLLM: aiconfigurator timed vLLM's MoE layer there in block FP8
    # and MXFP4 only, so the layer's fixed cost is the cheaper of the two laws at the split; its weights and
    # FLOPs stay at the cost model's own rates, and the fitted per-layer term is not paid
    from pareto_atlas.simulate.api import simulate_point

    qwen, h200 = M["qwen3-30b-a3b"], HW["H200"]
    p = CalibParams(hardware="H200", engine="vllm", moe_layer_s=100e-6)
    assert moe_law.law_for(h200, "vllm", qwen, "F16", 8, 1) is None
    laws = moe_law.laws()
    timed = [moe_law.split_law(laws, ("H200", "vllm", d), 8, 1) for d in ("fp8_block", "w4a16_mxfp4")]
    least = min(timed, key=lambda law: law.fixed_s)
    lent = moe_law.carried_law(h200, "vllm", qwen, "F16", 8, 1)
    assert lent == least and lent.fixed_s < max(law.fixed_s for law in timed)
    knobs = Knobs(weights="F16", tp=8)
    on = coeffs(qwen, h200, knobs, p)
    monkeypatch.setattr(moe_law, "MODE", "off")
    off = coeffs(qwen, h200, knobs, p)
    assert on[O_DEV] - off[O_DEV] == pytest.approx(qwen.moe_layers * (lent.fixed_s - 100e-6), rel=1e-9)
    assert on[MOE_W] == off[MOE_W] and on[FL] == off[FL]
    assert moe_law.carried_law(h200, "vllm", qwen, "F16", 8, 1) is None  # off: no law lent
    monkeypatch.setattr(moe_law, "MODE", "on")
    row = simulate_point(qwen, h200, knobs, 128, 8, concurrency=1, n_requests=4, params=p)
    assert f"fixed cost {lent.fixed_s * 1e6:.0f} us from the {lent.moe_dtype} law" in row["calib_provenance"]
    # a format with its own law borrows nothing; a card and engine with no law at all keep the fitted term
    assert moe_law.carried_law(h200, "trtllm", M["gpt-oss-120b"], "MXFP4", 1, 1) is None
    assert moe_law.carried_law(HW["B200"], "vllm", qwen, "F16", 1, 1) is None
