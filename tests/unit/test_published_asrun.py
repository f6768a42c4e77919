"""The one-GPU published fit runs aiconfigurator's closed-loop rows as its benchmark ran them
(calibrate.published_runs: the rules' deployment, the mean over a fresh loop of ROUNDS rounds) and
every other source's rows as before (the engine's default scheduler, the medians); the quantized
formats' fit on top of it too; and the fit cache never reads back a fit made the other way."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pareto_atlas.calibrate import published, published_cache, published_formats
from pareto_atlas.calibrate import published_runs as pr
from published_rows import aiconfigurator_row
from pareto_atlas.calibrate.fit import TARGETS, _anchors, predict
from pareto_atlas.calibrate.published import calibrate_card, card_frame, one_gpu_frame
from pareto_atlas.calibrate.published_table import PublishedTable, load_published
from pareto_atlas.simulate.params import default_params
from pareto_atlas.spec.cards import shipped_hardware

H100 = shipped_hardware()["H100-SXM"]
TTFT, TPOT = TARGETS.index("ttft_p50_ms"), TARGETS.index("tpot_p50_ms")


def _row(**kw) -> dict:
    return aiconfigurator_row(**({"output_tokens": 24, "origin": "synthetic"} | kw))


def _rows() -> pd.DataFrame:
    aic = [_row(load_value=c, prompt_tokens=p) for c, p in ((4, 512), (8, 1024), (16, 2048))]
    other = [_row(source_id="other", load_value=c, prompt_tokens=p) for c, p in ((1, 512), (4, 1024), (8, 2048))]
    return pd.DataFrame(aic + other)


def test_a_row_read_as_run_is_predicted_as_published_runs_predicts_it():
    rows = _rows()
    p = default_params(H100, "vllm")
    ran, models = card_frame(rows, H100, as_run=True)
    plain, _ = card_frame(rows, H100)
    aic = (rows.source_id == pr.AICONFIGURATOR).to_numpy()
    assert list(ran.reading) == ["mean"] * 3 + ["p50"] * 3
    assert list(ran.n_requests[aic]) == [pr.ROUNDS * c for c in (4, 8, 16)]
    assert list(ran.chunk_tokens) == [4 + 512 + 1500, 8 + 1024 + 1500, 16 + 2048 + 1500] + [8192] * 3
    # another source's rows: as before, column for column
    pd.testing.assert_frame_equal(ran[~aic].drop(columns="reading"), plain[~aic])
    frame, runs = pr.apply_runs(plain, rows)
    got = predict(_anchors(ran), models, H100, p)
    np.testing.assert_allclose(got[aic], pr.predict_rows(frame, models, H100, p, runs)[aic], rtol=1e-12)
    # the other rows as the fit predicted them before (each its jitter's seed, its place among all rows)
    np.testing.assert_allclose(got[~aic], predict(_anchors(plain), models, H100, p)[~aic], rtol=1e-12)


def test_the_one_gpu_fit_fits_aiconfigurator_rows_as_run():
    rows = _rows()
    truth = default_params(H100, "vllm")
    frame, models = card_frame(rows, H100)
    ran, runs = pr.apply_runs(frame, rows)
    # published figures generated as the rows ran (aiconfigurator's) and as before (the other source's)
    gen = pr.predict_rows(ran, models, H100, truth, runs)
    rows = rows.assign(ttft_ms=[f"{v:.6g}" for v in gen[:, TTFT]], tpot_ms=[f"{v:.6g}" for v in gen[:, TPOT]])
    cal = calibrate_card(rows, H100)
    fitted = cal.anchors[["ttft_p50_ms_fitted", "tpot_p50_ms_fitted"]].to_numpy(float)
    # what the fit predicted for each of aiconfigurator's rows is the row as run, at the fitted parameters
    aic = (rows.source_id == pr.AICONFIGURATOR).to_numpy()
    want = pr.predict_rows(ran, models, H100, cal.params, runs)[:, [TTFT, TPOT]]
    np.testing.assert_allclose(fitted[aic], want[aic], rtol=1e-9)
    default = predict(_anchors(frame), models, H100, cal.params)[:, [TTFT, TPOT]]
    assert (np.abs(fitted[aic, 0] / default[aic, 0] - 1) > 0.1).any()  # the run is not the engine default
    # and a fit on figures generated as run finds them again
    assert np.abs(fitted / gen[:, [TTFT, TPOT]] - 1).max() < 0.05


def test_the_formats_fit_runs_its_rows_as_run(monkeypatch):
    rows = pd.DataFrame([_row(gpu="H200", weights="FP8", load_value=c) for c in (4, 8)])
    multi = PublishedTable(rows, (), "synthetic")
    seen = []

    def spy(base, g, frame, models, hw, fmt):
        seen.append(frame)
        return published_formats.FormatFit(hw.name, "vllm", fmt, "fitted", "x", 1e-12, 1e-12)

    monkeypatch.setattr(published_formats, "calibrate_format", spy)
    monkeypatch.setattr(published_formats, "_derived_bars", lambda *a: {})
    hw = shipped_hardware()["H200"]
    base = published.CardCalibration("H200", "vllm", default_params(hw, "vllm"), pd.DataFrame(), "", {})
    empty = PublishedTable(load_published().rows.iloc[:0], (), "none")
    published_formats.calibrate_formats([base], empty, multi)
    assert len(seen) == 1 and list(seen[0].reading) == ["mean", "mean"]
    assert list(seen[0].n_requests) == [pr.ROUNDS * 4, pr.ROUNDS * 8]
    monkeypatch.setattr(published, "RUN_AS_PUBLISHED", False)
    assert "reading" not in one_gpu_frame(rows, hw)[0]


def test_the_fit_cache_keys_a_fit_by_how_its_rows_ran(monkeypatch):
    table = load_published()
    key = published_cache.fit_key(table)
    monkeypatch.setattr(published, "RUN_AS_PUBLISHED", False)
    assert published_cache.fit_key(table) != key


def test_a_bad_reading_names_the_field():
    frame, _ = card_frame(pd.DataFrame([_row()]), H100, as_run=True)
    with pytest.raises(ValueError, match="reading: 'median'"):
        _anchors(frame.assign(reading="median"))
