"""The published fits under the engines' default schedulers, and each card's link fitted on
multi-GPU rows: a served row runs under its engine's scheduler, the link fit finds the link that
made its rows, held-out folds re-choose it without the fold, and a parallel point carries the link's
bar and provenance while a one-GPU point keeps its own."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from pareto_atlas.calibrate import published_link
from pareto_atlas.calibrate.fit import TARGETS
from pareto_atlas.calibrate.published import ATTN_IDENTIFIED, attn_flops_share, card_frame
from pareto_atlas.calibrate.published_table import COLUMNS, PARALLEL_DEFAULT, PublishedTable, anchor_row
from pareto_atlas.simulate.api import simulate_point
from pareto_atlas.simulate.params import CalibParams, default_params
from pareto_atlas.simulate.schedulers import scheduler
from pareto_atlas.spec.cards import shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs

H100 = shipped_hardware()["H100-SXM"]


def _row(**kw) -> pd.Series:
    r = {c: "" for c in COLUMNS} | dict(PARALLEL_DEFAULT)
    r.update(
        source_id="s1",
        source="https://example.org/s1",
        date="undated",
        engine="vllm",
        gpu="H100-SXM",
        model="qwen2.5-0.5b",
        weights="BF16",
        kv="f16",
        prompt_tokens="512",
        output_tokens="64",
        load="concurrency",
        load_value="8",
        stat="mean",
        ttft_ms="50",
        tpot_ms="5",
    )
    r.update({k: str(v) for k, v in kw.items()})
    return pd.Series(r)


def test_a_served_row_runs_under_its_engines_default_scheduler():
    s = scheduler("vllm", H100)
    a = anchor_row(_row(load_value="2000"), 512, (s.batching, s.chunk_tokens, s.max_seqs))
    assert (a["batching"], a["chunk_tokens"], a["concurrency"]) == ("chunked", 8192, 2000)
    assert a["slots"] == s.max_seqs == 1024  # the engine's sequence limit, not the clients
    # a static batch stays one batch; no policy (an engine without one) is the old continuous
    b = anchor_row(_row(load="batch", load_value="8"), 512, (s.batching, s.chunk_tokens, s.max_seqs))
    assert (b["batching"], b["slots"]) == ("static", 8)
    assert anchor_row(_row())["batching"] == "continuous"
    frame, _ = card_frame(pd.DataFrame([_row(), _row(engine="trtllm"), _row(engine="lmdeploy")]), H100)
    assert list(frame.batching) == ["chunked", "whole+overlap", "continuous"]  # TensorRT-LLM: whole prompts, overlap


def test_params_keep_their_keys_and_a_parallel_point_carries_the_link_bar():
    p = default_params(H100, "vllm")
    assert not {"par_lat_rel_err", "par_thr_rel_err", "link_provenance"} & set(p.to_dict())
    assert p.parallel_bars()[:2] == (p.lat_rel_err, p.thr_rel_err)
    q = replace(p, link_eff=0.5, par_lat_rel_err=0.4, par_thr_rel_err=0.3, link_provenance="link fitted on x")
    assert CalibParams.from_dict(q.to_dict()) == replace(q, provenance=q.provenance)
    with pytest.raises(ValueError, match="par_lat_rel_err"):
        replace(p, par_lat_rel_err=-1.0)
    m = shipped_models()["qwen2.5-0.5b"]
    one = simulate_point(m, H100, Knobs(weights="BF16"), 256, 32, concurrency=1, n_requests=4, params=q)
    two = simulate_point(m, H100, Knobs(weights="BF16", tp=2), 256, 32, concurrency=1, n_requests=4, params=q)
    assert (one["lat_rel_err"], one["calib_provenance"]) == (p.lat_rel_err, p.provenance)
    assert (two["lat_rel_err"], two["thr_rel_err"]) == (0.4, 0.3) and "link fitted on x" in two["calib_provenance"]


def _measured_table(truth: CalibParams) -> PublishedTable:
    """Rows of two sources and two models at TP2/TP4 whose figures are the simulator's own under `truth`."""
    rows = []
    for sid, model, tp, clients, prompt in (
        ("a", "qwen2.5-0.5b", 2, 1, 256),
        ("a", "qwen2.5-0.5b", 2, 16, 2048),
        ("b", "qwen2.5-1.5b", 2, 1, 256),
        ("b", "qwen2.5-1.5b", 2, 16, 2048),
        ("a", "qwen2.5-1.5b", 2, 4, 1024),
        ("b", "qwen2.5-0.5b", 2, 4, 1024),
    ):
        r = _row(
            source_id=sid,
            source=f"https://example.org/{sid}",
            model=model,
            tp=tp,
            n_gpus=tp,
            load_value=clients,
            prompt_tokens=prompt,
        )
        rows.append(r)
    df = pd.DataFrame(rows)
    frame, models = card_frame(df, H100)
    frame["n_requests"] = np.minimum(frame["n_requests"], published_link.MAX_REQUESTS)
    from pareto_atlas.calibrate.fit import _anchors, predict

    pred = predict(_anchors(frame), models, H100, truth)
    df["ttft_ms"] = [f"{v:.6f}" for v in pred[:, TARGETS.index("ttft_p50_ms")]]
    df["tpot_ms"] = [f"{v:.6f}" for v in pred[:, TARGETS.index("tpot_p50_ms")]]
    return PublishedTable(df.reset_index(drop=True), ("test",), "sha")


def test_the_link_fit_finds_the_link_that_made_its_rows_and_holds_sources_and_models_out():
    base = default_params(H100, "vllm")
    truth = replace(base, link_eff=0.7, link_latency_scale=8.0)
    table = _measured_table(truth)
    cal = published_link.calibrate_link(table, "H100-SXM", {("H100-SXM", "vllm"): base}, {})
    assert (cal.link_eff, cal.link_latency_scale) == (0.7, 8.0)
    # one engine: nothing held out by engine; the bar pools the two schemes that hold out and covers 90 %
    assert cal.bar_from == "LOSO+LOMO" and np.isfinite(cal.anchors.filter(like="_LOMO").to_numpy(float)).any()
    assert published_link.coverage(cal, published_link.SCHEMES)[0] >= 0.9
    assert len(cal.bar_check) == 2 and published_link._decode(published_link._encode(cal)).bar_check == cal.bar_check
    head = published_link.report_lines([cal])[1]
    assert "held-out figures" in head and ("covers" in head or "no split check" in head)
    # the rows were made by a grid point: a fold re-finds it or a neighbour, so little held out is off
    loso = np.abs(cal.anchors.filter(like="_LOSO").to_numpy(float))
    assert np.nanmax(loso) < 0.05 and np.nanmedian(loso) < 0.01
    p = published_link.with_link(base, cal)
    assert (p.link_eff, p.link_latency_scale) == (0.7, 8.0) and p.par_lat_rel_err >= base.lat_rel_err
    assert "2 models" in cal.provenance() and "a 3" in cal.provenance()


def test_a_prompts_attention_is_fitted_only_where_an_anchor_shows_it():
    m = shipped_models()["llama-3.1-8b"]
    share = attn_flops_share(
        pd.DataFrame(
            [
                {"prompt_tokens": 32, "kv": "f16"},
                {"prompt_tokens": 512, "kv": "f16"},
                {"prompt_tokens": 20000, "kv": "fp8"},
            ]
        ),
        [m, m, m],
    )
    assert share["f16"] < 0.01 < ATTN_IDENTIFIED < share["fp8"] < 0.5  # ~1 % at 512 tokens, a quarter at 20K


def test_an_allreduce_through_a_switch_pays_two_crossings_whatever_tp_and_a_ring_pays_2_tp_minus_1():
    from pareto_atlas.simulate.parallel import allreduce_s

    pcie = next(h for h in shipped_hardware().values() if h.kind == "gpu" and h.link == "pcie")
    assert allreduce_s(0.0, 8, H100) == allreduce_s(0.0, 2, H100) == pytest.approx(2 * H100.link_latency_us * 1e-6)
    assert allreduce_s(0.0, 8, pcie) == pytest.approx(14 * pcie.link_latency_us * 1e-6)
    # the bytes cross each device's link 2 (tp - 1) / tp times either way
    n = 1e9
    assert allreduce_s(n, 8, H100, 0.5) - allreduce_s(0.0, 8, H100, 0.5) == pytest.approx(
        2 * 7 / 8 * n / (H100.link_gbs * 1e9 * 0.5)
    )


def test_simulate_takes_each_cards_link_and_a_card_without_a_one_gpu_fit_gets_its_default_with_it(monkeypatch):
    import io

    from rich.console import Console

    from pareto_atlas.calibrate import published_stage

    anchors = pd.DataFrame({"source_id": ["a", "b"], "model": ["m", "m"]})
    fake = {c: published_link.LinkCalibration(c, 0.4, 8.0, anchors, 0.5, 0.3, "LOSO", "test") for c in ("H200", "B200")}
    asked = []
    monkeypatch.setattr(
        published_link,
        "link_calibrations",
        lambda cards, **k: asked.append(cards) or {c: fake[c] for c in cards if c in fake},
    )
    h200 = default_params(shipped_hardware()["H200"], "vllm")
    out = published_stage.with_links({"H200": h200}, ["H200", "B200", "L4", "my-own-card"], Console(file=io.StringIO()))
    assert asked == [["H200", "B200", "L4"]]
    assert (out["H200"].link_eff, out["H200"].par_lat_rel_err, out["H200"].par_thr_rel_err) == (0.4, 0.5, 0.3)
    assert out["B200"].provenance == "uncalibrated default" and out["B200"].link_latency_scale == 8.0
    assert set(out) == {"H200", "B200"} and "link fitted on 2 published multi-GPU rows" in out["H200"].link_provenance


def test_each_engine_gets_its_own_collectives_latency_and_an_engine_left_out_takes_the_pooled_one(monkeypatch):
    # the per-engine choice alone: vLLM's true x1 here sits below H100-SXM's measured all-reduce (x2), which
    # the product's floor would raise it to (test_link_floor checks the floor)
    monkeypatch.setattr(published_link, "MEASURED_FLOOR", False)
    base = default_params(H100, "vllm")
    rows = []
    for engine, sid in (("vllm", "a"), ("trtllm", "b")):
        for model, clients, prompt in (
            ("qwen2.5-0.5b", 1, 256),
            ("qwen2.5-1.5b", 16, 2048),
            ("qwen2.5-1.5b", 4, 1024),
            ("qwen2.5-0.5b", 4, 1024),
        ):
            rows.append(
                _row(
                    source_id=sid, engine=engine, model=model, tp=2, n_gpus=2, load_value=clients, prompt_tokens=prompt
                )
            )
    # the figures made in the order the link fit reads its rows (link_rows), so each row's jitter is the fit's
    df = published_link.link_rows(PublishedTable(pd.DataFrame(rows), ("test",), "sha"), "H100-SXM")
    frame, models = card_frame(df, H100)
    frame["n_requests"] = np.minimum(frame["n_requests"], published_link.MAX_REQUESTS)
    from pareto_atlas.calibrate.fit import _anchors, predict

    truth = {
        "vllm": replace(base, link_eff=0.55, link_latency_scale=1.0),
        "trtllm": replace(base, link_eff=0.55, link_latency_scale=16.0),
    }
    for e in truth:
        on = (df.engine == e).to_numpy()
        pred = predict(_anchors(frame[on]), [m for m, t in zip(models, on) if t], H100, truth[e])
        df.loc[on, "ttft_ms"] = [f"{v:.6f}" for v in pred[:, TARGETS.index("ttft_p50_ms")]]
        df.loc[on, "tpot_ms"] = [f"{v:.6f}" for v in pred[:, TARGETS.index("tpot_p50_ms")]]
    table = PublishedTable(df.reset_index(drop=True), ("test",), "sha")
    one = {("H100-SXM", "vllm"): base, ("H100-SXM", "trtllm"): base}
    cal = published_link.calibrate_link(table, "H100-SXM", one, {}, per_engine=True)
    assert cal.link_eff == 0.55 and cal.latency_by_engine == {"vllm": 1.0, "trtllm": 16.0}
    assert np.nanmax(np.abs(cal.anchors.filter(like="_fitted").to_numpy(float))) < 0.02
    # leaving an engine out, its rows take the factor the other engine's rows choose: off by the difference
    loeo = np.abs(cal.anchors.filter(like="tpot_p50_ms_LOEO").to_numpy(float))
    assert np.nanmax(loeo) > 0.05
    assert published_link.with_link(base, cal).link_latency_scale == 1.0  # a vLLM point: vLLM's collectives
    one_factor = published_link.calibrate_link(table, "H100-SXM", one, {}, per_engine=False)
    assert (
        one_factor.latency_by_engine == {}
        and np.nanmax(np.abs(one_factor.anchors.filter(like="_fitted").to_numpy(float))) > 0.02
    )


def test_the_link_eff_grid_starts_at_the_slowest_prefill_allreduce_and_a_wider_grid_is_searched_when_given():
    # the grid's floor: every all-reduce measured at a prefill's message size reaches 0.54 of the ring bound
    # or more (published_link's note), so no link slower than that is chosen, whatever the rows want
    assert min(published_link.LINK_EFFS) == 0.55 and list(published_link.LINK_EFFS) == sorted(published_link.LINK_EFFS)
    base = default_params(H100, "vllm")
    table = _measured_table(replace(base, link_eff=0.25, link_latency_scale=2.0))
    one = {("H100-SXM", "vllm"): base}
    assert published_link.calibrate_link(table, "H100-SXM", one, {}).link_eff == 0.55
    wide = published_link.calibrate_link(table, "H100-SXM", one, {}, effs=(0.25, 0.4) + published_link.LINK_EFFS)
    assert (wide.link_eff, wide.link_latency_scale) == (0.25, 2.0)
    # the cache keys the grid: a wider one is a fit of its own
    key = published_link._key
    assert key(table, "k", "H100-SXM") != key(table, "k", "H100-SXM", effs=(0.25,) + published_link.LINK_EFFS)


def test_a_parallel_point_on_a_card_whose_link_no_row_fitted_is_uncalibrated_with_at_least_the_default_bar():
    """A card calibrated on one GPU (±10 %) but with no published multi-GPU row (H100-PCIe): its TP and
    disaggregated points rest on the default link, so they carry at least the uncalibrated default's bar and
    say so, and the atlas labels their speed uncalibrated (before: the one-GPU ±10 %, labelled calibrated)."""
    from pareto_atlas.atlas.evidence import speed_evidence
    from pareto_atlas.simulate.params import DEFAULT_BAR

    pcie = shipped_hardware()["H100-PCIe"]
    p = replace(default_params(pcie, "vllm"), lat_rel_err=0.1, thr_rel_err=0.3, provenance="calibrated on 8 anchors")
    lat, thr, prov = p.parallel_bars()
    assert (lat, thr) == (DEFAULT_BAR, 0.3) and prov.startswith("uncalibrated link of H100-PCIe")
    assert prov.endswith("per-GPU costs: calibrated on 8 anchors")
    m = shipped_models()["qwen2.5-0.5b"]
    pts = pd.DataFrame(
        [
            simulate_point(m, pcie, Knobs(weights="BF16", tp=t), 256, 32, concurrency=1, n_requests=4, params=p)
            for t in (1, 2)
        ]
    ).assign(provenance="simulated")
    assert list(pts.lat_rel_err) == [0.1, DEFAULT_BAR]
    assert list(speed_evidence(pts)) == ["calibrated", "uncalibrated"]
    fitted = replace(p, par_lat_rel_err=0.8, par_thr_rel_err=0.6, link_provenance="link fitted on 36 rows")
    assert fitted.parallel_bars()[:2] == (0.8, 0.6)
