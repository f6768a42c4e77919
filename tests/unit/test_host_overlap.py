"""vLLM's async scheduling (issues 31, 32): a release from simulate.schedulers.VLLM_ASYNC_FROM on prepares
step i+1 on the host while the device runs step i, so its step costs max(device, host); the published rows
of such a release are simulated so, every other row and every atlas point as before."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pareto_atlas.calibrate import published
from pareto_atlas.calibrate.anchors import _anchors
from pareto_atlas.calibrate.published_moe import moe_frame
from pareto_atlas.calibrate.published_moe_table import load_moe
from pareto_atlas.simulate import moe_law
from pareto_atlas.simulate.cost_model import coeffs
from pareto_atlas.simulate.kernels import HOST_OVERLAP, O_DEV, O_SEQ, O_STEP, SEQ_DEV, step_time
from pareto_atlas.simulate.params import default_params
from pareto_atlas.simulate.schedulers import VLLM_ASYNC_FROM, host_overlap, release
from pareto_atlas.spec.cards import shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs

HW = shipped_hardware()


def test_release_and_which_rows_overlap():
    assert release("0.11.2") == (0, 11, 2) and release("0.23.0 (V1 engine)") == (0, 23, 0)
    assert release("unstated") is None and release("nightly CI build 9513") is None
    assert release("not stated (runs dated 2026-06-07/08)") is None
    assert VLLM_ASYNC_FROM == (0, 14)
    # vLLM's rows of 0.12 and before serial, of 0.15 on overlapped; other engines by this rule never
    assert not host_overlap("vllm", "0.12.0") and not host_overlap("vllm", "0.11.2")
    assert host_overlap("vllm", "0.15.1") and host_overlap("vllm", "0.18.0")
    assert not host_overlap("vllm", "unstated") and not host_overlap("trtllm", "1.2.0rc6.post3")
    # async scheduling disabled itself under pipeline parallelism
    assert not host_overlap("vllm", "0.18.0", pp=2)


@pytest.mark.parametrize("model,weights,tp", [("llama-3.1-8b", "FP8", 1), ("gpt-oss-120b", "MXFP4", 2)])
def test_step_is_max_of_device_and_host(model, weights, tp):
    m, hw = shipped_models()[model], HW["H100-SXM"]
    p = replace(default_params(hw, "vllm"), overhead_step_s=3e-3, overhead_seq_s=2e-5, moe_layer_s=5e-5)
    k = Knobs(weights=weights, kv="fp8", slots=64, tp=tp)
    serial, over = coeffs(m, hw, k, p), coeffs(m, hw, k, p, host_overlap=True)
    assert (serial[HOST_OVERLAP], over[HOST_OVERLAP]) == (0.0, 1.0)
    assert serial[O_STEP] == p.overhead_step_s and serial[O_SEQ] == p.overhead_seq_s
    # an MoE layer's fixed cost is the device's, not the host's (its operator law's where one prices the layer)
    law = moe_law.law_for(hw, p.engine, m, weights, tp, 1)
    fixed = law.fixed_s if law is not None else p.moe_layer_s
    assert serial[O_DEV] == pytest.approx(m.moe_layers * fixed) and (serial[SEQ_DEV] > 0) == m.is_moe
    assert (law is not None) == m.is_moe  # H100-SXM vLLM's MXFP4 layer is timed (spec/published_moe_ops.csv)
    for b in (1, 8, 64):
        args = (float(b), float(b) * 1000.0, 0.0, 0.0, 0.0, float(b))
        host = p.overhead_step_s + p.overhead_seq_s * b
        t_serial, t_over = step_time(serial, *args), step_time(over, *args)
        assert t_over == pytest.approx(max(t_serial - host, host), rel=1e-12)
        assert t_over < t_serial
    # a host slower than the device sets the pace alone
    slow = replace(p, overhead_step_s=1.0)
    assert step_time(coeffs(m, hw, k, slow, host_overlap=True), 1.0, 1000.0, 0.0, 0.0, 0.0, 1.0) == pytest.approx(
        1.0 + slow.overhead_seq_s
    )


def test_published_rows_carry_their_release_into_the_simulation(monkeypatch):
    rows = load_moe().rows
    rows = rows[(rows.gpu == "H100-SXM") & (rows.engine == "vllm")].reset_index(drop=True)
    frame, _ = moe_frame(rows, HW["H100-SXM"])
    want = [host_overlap("vllm", v) for v in rows.engine_version]
    assert frame.host_overlap.tolist() == want and any(want) and not all(want)
    anchors = _anchors(frame)
    # the overlapped rows form their batches while the step before runs (`+overlap` admission)
    assert [a.host_overlap for a in anchors] == want
    assert {a.knobs.batching for a, w in zip(anchors, want) if w} == {"chunked+overlap"}
    assert {a.knobs.batching for a, w in zip(anchors, want) if not w} == {"chunked"}
    # off: every row serial, as before
    monkeypatch.setattr(published, "HOST_OVERLAP_BY_RELEASE", False)
    frame, _ = moe_frame(rows, HW["H100-SXM"])
    assert not frame.host_overlap.any()


def test_an_overlapped_row_predicts_faster_by_about_the_host_time():
    # one vLLM 0.18 gpt-oss-120b row on H100-SXM (TP2), predicted with and without the overlap
    from pareto_atlas.calibrate.fit import TARGETS, predict

    rows = load_moe().rows
    rows = rows[(rows.gpu == "H100-SXM") & (rows.engine_version == "0.18.0") & (rows.tp.astype(int) == 2)]
    row = rows.iloc[[0]].reset_index(drop=True)
    hw = HW["H100-SXM"]
    frame, models = moe_frame(row, hw)
    p = replace(default_params(hw, "vllm"), overhead_step_s=3e-3)
    on = predict(_anchors(frame), models, hw, p)[0]
    off = predict(_anchors(frame.assign(host_overlap=False)), models, hw, p)[0]
    tpot = TARGETS.index("tpot_p50_ms")
    assert on[tpot] < off[tpot] - 1.0  # ms: most of the 3 ms a step hides


def test_a_cards_host_cost_is_fitted_on_its_serial_rows_where_it_has_both():
    # L4's vLLM rows: one source of vLLM 0.23 (overlapped: its host cost hides under the device's time)
    # and one of 0.8.5 (serial). The card's fit keeps the host cost its serial rows show.
    from pareto_atlas.calibrate.published_table import load_published

    rows = load_published().rows
    rows = rows[(rows.gpu == "L4") & (rows.engine == "vllm")].reset_index(drop=True)
    hw = HW["L4"]
    frame, models = published.one_gpu_frame(rows, hw)
    over = frame.host_overlap.to_numpy(bool)
    assert over.any() and not over.all()
    both, _ = published.fit_card(frame, models, hw)
    serial, _ = published.fit_card(frame[~over], [m for m, o in zip(models, over) if not o], hw)
    assert both.overhead_step_s == serial.overhead_step_s > 1e-4
    assert both.overhead_seq_s == serial.overhead_seq_s
