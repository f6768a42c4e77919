"""The 4-bit floating-point weight formats (spec.fp4): bits per weight from their block layouts, a decode
step reading that many bits a weight, W4A4 NVFP4 refused where a card lacks FP4 tensor cores (and run at
the FP4 peak where it has them), weight-only FP4 derived (sim*) from the roofline where no anchor fitted
it, the published-quality table accepting the formats, and gpt-oss's MXFP4 rows as its own reference."""

from __future__ import annotations

import pytest

from pareto_atlas.quality.published import published_for
from pareto_atlas.quality.published_table import PublishedQualityError, read_quality_table
from pareto_atlas.simulate import moe
from pareto_atlas.simulate.cost_model import compute_dtype, coeffs, per_weight_costs
from pareto_atlas.simulate.kernels import step_time
from pareto_atlas.simulate.params import CalibParams
from pareto_atlas.simulate.space import compatible, default_knobs
from pareto_atlas.spec.cards import shipped_hardware, shipped_models
from pareto_atlas.spec.fp4 import FP4
from pareto_atlas.spec.hardware_card import HardwareCard
from pareto_atlas.spec.knobs import BITS_PER_WEIGHT, Knobs
from pareto_atlas.spec.study.space import SimulateSpec

M, HW = shipped_models(), shipped_hardware()
GPT_OSS = M["gpt-oss-120b"]


def test_bits_per_weight_follow_the_block_layouts():
    # NVFP4: E2M1 + an E4M3 scale per 16 values; MXFP4: E2M1 + an E8M0 scale per 32
    assert BITS_PER_WEIGHT["NVFP4"] == BITS_PER_WEIGHT["NVFP4A16"] == 4.5
    assert BITS_PER_WEIGHT["MXFP4"] == 4.25
    assert FP4["NVFP4"].block == 16 and FP4["MXFP4"].block == 32
    assert FP4["NVFP4"].activations_fp4 and not FP4["NVFP4A16"].activations_fp4 and not FP4["MXFP4"].activations_fp4


def test_a_decode_step_reads_the_formats_bits_per_weight():
    # batch 1 of gpt-oss-120b: the always-run weights and its 4 of 128 experts. In NVFP4A16 all at 4.5
    # bits a weight; in MXFP4, its checkpoint's own format, the experts at 4.25 and what its config.json
    # leaves unconverted (attention, router, lm_head) at 16
    assert moe.step_weight_bytes(GPT_OSS, "NVFP4A16", 1) * 8 / GPT_OSS.active_params == pytest.approx(4.5, rel=1e-9)
    g = GPT_OSS
    kept = g.n_layers * (2 * g.hidden * g.n_heads * g.head_dim + 2 * g.hidden * g.n_kv_heads * g.head_dim)
    kept += g.n_layers * g.hidden * g.n_experts + g.vocab * g.hidden
    bits = ((g.active_params - kept) * 4.25 + kept * 16) / g.active_params
    read = moe.step_weight_bytes(g, "MXFP4", 1) * 8 / g.active_params
    assert read == pytest.approx(bits, rel=1e-9) and 7.5 < read < 8.0  # 1.5 of its 5.1B active at 16 bits
    # and the step time follows the bytes: memory-bound at batch 1 on an H100, the MXFP4 step is close to
    # read / 16 of a 16-bit one once the per-step overheads are taken out
    p = CalibParams(overhead_step_s=0.0, overhead_seq_s=0.0, overhead_req_s=0.0)

    def t(w: str) -> float:
        c = coeffs(GPT_OSS, HW["H100-SXM"], Knobs(weights=w), p)
        return step_time(c, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0)

    assert t("MXFP4") / t("F16") == pytest.approx(read / 16, rel=0.05)


def test_w4a4_nvfp4_runs_only_where_the_card_has_fp4_tensor_cores():
    for name in ("H100-SXM", "H200", "A100-80G-PCIe", "L4"):
        why = compatible(Knobs(weights="NVFP4"), HW[name], "vllm")
        assert why.startswith("weights NVFP4:") and name in why and "FP4 tensor cores" in why
        assert "\n" not in why
        # the same weights weight-only, and MXFP4, run on any of them (dequantized to 16 bits)
        assert compatible(Knobs(weights="NVFP4A16"), HW[name], "vllm") == ""
        assert compatible(Knobs(weights="MXFP4"), HW[name], "vllm") == ""
        assert compute_dtype("MXFP4", HW[name]) == compute_dtype("NVFP4A16", HW[name]) == "fp16"
    b200 = HW["B200"]
    assert compatible(Knobs(weights="NVFP4"), b200, "vllm") == ""
    assert compute_dtype("NVFP4", b200) == "fp4" and b200.peak_flops("fp4") == 2 * b200.peak_flops("fp8")
    # weight-only formats keep 16-bit compute on the B200 too (their activations are 16-bit)
    assert compute_dtype("MXFP4", b200) == "fp16"
    # never on a CPU card
    cpu = HardwareCard(name="cpu", kind="cpu", mem_bw_gbs=20.0, tflops={"fp32": 0.1})
    assert compatible(Knobs(weights="MXFP4"), cpu, "llamacpp") == "weights MXFP4 not served on cpu"


def test_a_study_grid_of_nvfp4_without_an_fp4_card_is_one_line_naming_the_field():
    with pytest.raises(ValueError) as e:
        SimulateSpec(hardware=["H100-SXM", "H200"], grid={"weights": ["NVFP4"]})
    msg = str(e.value)
    assert "grid.weights NVFP4" in msg and "H100-SXM" in msg and "B200" in msg
    # with a B200 listed it stands; the weight-only formats stand anywhere
    SimulateSpec(hardware=["H100-SXM", "B200"], grid={"weights": ["NVFP4"]})
    SimulateSpec(hardware=["H100-SXM"], grid={"weights": ["MXFP4", "NVFP4A16"]})


def test_fp4_formats_join_the_gpu_grid_only_where_a_study_lists_them():
    plain = {k.weights for k in default_knobs("gpu", "vllm")}
    assert not plain & set(FP4)  # the shipped grid is as before the formats existed
    opted = {k.weights for k in default_knobs("gpu", "vllm", weights_extra=("MXFP4",))}
    assert opted == plain | {"MXFP4"}
    assert not {k.weights for k in default_knobs("cpu", "llamacpp", weights_extra=("MXFP4",))} & set(FP4)


def test_unfitted_fp4_kernels_are_derived_from_the_roofline():
    b200 = HW["B200"]
    p = CalibParams(gemm_s_per_weight={"W4A16": 1e-15}, gemv_s_per_weight={"W4A16": 1e-15})
    for w in FP4:
        assert p.weight_cost(w, "gemm")[1] == "derived"  # AWQ/W4A16's int4 kernels do not stand in
    gemv, gemm = per_weight_costs(b200, "NVFP4", CalibParams())
    assert gemm == pytest.approx(2.0 / (b200.peak_flops("fp4") * CalibParams().eff_flops))
    _, gemm16 = per_weight_costs(b200, "MXFP4", CalibParams())
    assert gemm16 == pytest.approx(2 * 2 * gemm)  # fp16 peak is a quarter of fp4's
    # a fitted cost is used where calibration has one
    fitted = CalibParams(gemm_s_per_weight={"MXFP4": 3e-15})
    assert fitted.weight_cost("MXFP4", "gemm") == (3e-15, "fitted")


def test_published_table_accepts_fp4_rows_and_gpt_oss_mxfp4_is_its_own_reference(tmp_path):
    rows = [r for r in read_quality_table() if r["model"] == "gpt-oss-120b"]
    assert rows and all(r["weights"] == "MXFP4" for r in rows)
    for e in published_for("gpt-oss-120b", "MXFP4"):
        assert e.rel == e.rel_lo == e.rel_hi == 1.0 and 0.5 < e.q < 1.0
    mmlu = [e for e in published_for("gpt-oss-120b", "MXFP4") if e.benchmark == "mmlu"]
    assert [e.q for e in mmlu] == [pytest.approx(0.900)]
    # a user's table: an NVFP4 row against its FP8 baseline validates; a bad weight type or a
    # self-baseline whose scores differ is one line naming the field
    head = open(_shipped()).readline()
    base = dict(zip(head.strip().split(","), [""] * 40))

    def write(**kw) -> str:
        import csv

        path = tmp_path / f"t{len(kw)}{kw.get('weights', '')}{kw.get('baseline_score', '')}.csv"
        row = {
            **base,
            "source": "https://example.org/card",
            "source_date": "2025-02",
            "publisher": "p",
            "model": "deepseek-v3",
            "checkpoint": "x/quantized",
            "baseline_checkpoint": "x/base",
            "method": "m",
            "kv": "bf16",
            "eviction": "none",
            "benchmark": "mmlu",
            "metric": "MMLU",
            "n_items": "14042",
            "score": "90.7",
            "baseline_score": "90.8",
            "scale": "percent",
            **kw,
        }
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=head.strip().split(","))
            w.writeheader()
            w.writerow(row)
        return str(path)

    assert read_quality_table(write(weights="NVFP4"))[0]["weights"] == "NVFP4"
    with pytest.raises(PublishedQualityError, match=r"field 'weights': 'FP4' is not allowed; allowed: .*MXFP4"):
        read_quality_table(write(weights="FP4"))
    with pytest.raises(PublishedQualityError, match=r"field 'baseline_score': 90.8 differs from score 90.7"):
        read_quality_table(write(weights="MXFP4", baseline_checkpoint="x/quantized"))


def _shipped() -> str:
    from importlib import resources

    return str(resources.files("pareto_atlas.spec").joinpath("published_quality.csv"))


def test_a_study_listing_mxfp4_simulates_gpt_oss_on_hopper_and_blackwell_marked_derived(monkeypatch):
    # the built-in MoE study with gpt-oss-120b's own format opted in and the B200 beside the Hopper cards
    from dataclasses import replace

    from pareto_atlas.simulate import moe_law

    # the first-principles step on each card's defaults: aiconfigurator's operator law (simulate.moe_law) prices
    # H200's vLLM MXFP4 layer as measured, and no B200 vLLM MXFP4 table is read, so with it the cards' order
    # would compare a measured layer with an uncalibrated one
    monkeypatch.setattr(moe_law, "MODE", "off")

    from pareto_atlas.simulate.space import Load, Workload
    from pareto_atlas.simulate.stage import study_space
    from pareto_atlas.simulate.sweep import sweep
    from pareto_atlas.spec.study import load_study

    s = load_study("moe")
    grid = s.simulate.grid.model_copy(update={"weights": ["F16", "MXFP4"], "batching": ["continuous"], "slots": [8]})
    sim = s.simulate.model_copy(update={"hardware": ["H100-SXM", "H200", "B200"], "grid": grid})
    study = s.model_copy(update={"simulate": sim})
    hw = [HW[h] for h in study.simulate.hardware]
    space = study_space(study, hw, GPT_OSS, budget=10**9)
    mx = [k for k in space.knobs if k.weights == "MXFP4"]
    assert mx and {k.ep for k in mx} >= {1, 8}  # with the expert-parallel layouts
    one = [k for k in mx if k.gpus() == 1][:1] + [k for k in space.knobs if k.weights == "F16" and k.gpus() == 1][:1]
    small = replace(space, knobs=tuple(one), workloads=(Workload("w", 1024, 64),), loads=(Load(concurrency=1),))
    df = sweep(small, n_requests=10).set_index(["weights", "hardware"])
    tpot = {}
    for h in ("H100-SXM", "H200", "B200"):
        assert df.loc[("MXFP4", h), "weights_cost"] == "derived"  # sim*: no anchor fitted FP4 kernels
        # 117B weights at 4.25 bits (62 GB) fit one GPU of each; at 16 bits (234 GB) none
        assert df.loc[("F16", h), "infeasible_reason"] and not df.loc[("MXFP4", h), "infeasible_reason"]
        tpot[h] = df.loc[("MXFP4", h), "tpot_p50_ms"]
    # one client's decode is weight-bound: faster with each card's bandwidth (3.35, 4.8, 8 TB/s)
    assert tpot["B200"] < tpot["H200"] < tpot["H100-SXM"]


def test_nvidias_deepseek_r1_fp4_rows_stand_against_their_fp8_baseline_as_informational_proxies():
    rows = [r for r in read_quality_table() if r["checkpoint"] == "nvidia/DeepSeek-R1-FP4"]
    assert {r["benchmark"] for r in rows} == {"mmlu", "gsm8k", "aime2024", "gpqa_diamond", "math500"}
    assert all(r["weights"] == "NVFP4" and "FP8" in r["baseline_checkpoint"] for r in rows)
    ev = published_for("deepseek-v3", "NVFP4")
    assert len(ev) == 5 and all(e.informational and e.reason.startswith("proxy") for e in ev)
    assert {e.benchmark: round(e.rel, 4) for e in ev}["mmlu"] == round(90.7 / 90.8, 4)
    # measured on DeepSeek-R1, not on the deepseek-v3 card: printed, never decided on
    from pareto_atlas.quality.published import guard_choice

    assert guard_choice(ev, "gsm8k") is None


def test_the_ladder_takes_gpt_oss_mxfp4_as_published_at_rel_1_and_nvfp4_on_deepseek_as_no_evidence():
    from pareto_atlas.simulate.targets import Target
    from pareto_atlas.spec.study import load_study
    from pareto_atlas.store.ladder import target_quality

    study = load_study("moe")

    def q(card: str, w: str):
        t = Target(card, M[card], (HW["H100-SXM"],), (), measured=False)
        return target_quality(Knobs(weights=w), t, "gpu", study, {}, "ifeval")

    mx = q("gpt-oss-120b", "MXFP4")
    assert mx.evidence == "published" and mx.rel == mx.rel_lo == mx.rel_hi == 1.0
    assert mx.q == pytest.approx(0.900)  # no IFEval score: the guard's fallback, MMLU (most items)
    # an R1 checkpoint's NVFP4 rows are informational on the deepseek-v3 card: no evidence the guard decides on
    assert q("deepseek-v3", "NVFP4").evidence == "unmeasured"
