"""Published GPU anchors: the table's validation, the shipped rows, the per-card fit and its
leave-one-source-out error (recovering parameters it generated), and the `published` command."""

from __future__ import annotations

import copy
import csv
import io
import re
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from rich.console import Console
from typer.testing import CliRunner

from pareto_atlas.calibrate import published, published_cache, published_stage
from pareto_atlas.calibrate.fit import TARGETS, _anchors, predict
from pareto_atlas.calibrate.published_formats import calibrate_published_formats
from pareto_atlas.calibrate.published import (
    B1,
    LOAO,
    LOSO,
    calibrate_card,
    calibrate_published,
    card_frame,
    fit_card,
    tpot_held_out_by_source,
)
from pareto_atlas.calibrate.published_table import (
    COLUMNS,
    PublishedTable,
    PublishedTableError,
    anchor_row,
    batch1_speed,
    load_published,
    read_table,
)
from pareto_atlas.cli import app
from pareto_atlas.simulate.params import CalibParams, default_params
from pareto_atlas.spec.cards import shipped_hardware, shipped_models
from pareto_atlas.store import Store

GOOD = {
    "source_id": "s1",
    "source": "https://example.org/bench",
    "date": "2025-03",
    "engine": "vllm",
    "engine_version": "0.8",
    "gpu": "L4",
    "gpu_published": "L4",
    "model": "qwen2.5-7b",
    "model_published": "Qwen",
    "weights": "BF16",
    "weights_published": "bf16",
    "kv": "f16",
    "prompt_tokens": "512",
    "output_tokens": "128",
    "load": "concurrency",
    "load_value": "4",
    "n_requests": "",
    "stat": "p50",
    "ttft_ms": "80",
    "tpot_ms": "50",
    "itl_ms": "",
    "e2e_ms": "",
    "out_tok_s": "75",
    "notes": "",
}
L4 = shipped_hardware()["L4"]


def _write(path, rows: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, COLUMNS, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    path.write_text(buf.getvalue())
    return str(path)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("engine", "triton", "field 'engine': 'triton' is not allowed; allowed: vllm, trtllm"),
        ("gpu", "A100", "field 'gpu': 'A100' is not allowed; allowed: A100-80G-PCIe"),
        ("model", "falcon-180b", "field 'model': 'falcon-180b' is not allowed; allowed: "),
        ("weights", "Q4_K_M", "field 'weights': 'Q4_K_M' is not allowed; allowed: F16, BF16, FP8, AWQ4"),
        ("kv", "q8_0", "field 'kv': 'q8_0' is not allowed; allowed: f16, fp8, unstated"),
        ("load", "burst", "field 'load': 'burst' is not allowed; allowed: batch, concurrency, rate, offline"),
        ("date", "March 2025", "field 'date': 'March 2025' is not YYYY, YYYY-MM, YYYY-MM-DD or undated"),
        ("prompt_tokens", "-5", "field 'prompt_tokens': '-5' must be > 0"),
        ("load_value", "4.5", "field 'load_value': '4.5' is not an integer"),
        ("source", "", "field 'source' is empty (required: "),
        ("stat", "-", "field 'stat': '-' but ttft_ms, tpot_ms given; say which statistic"),
        ("e2e_ms", "900", "field 'e2e_ms': only for load 'batch'"),
    ],
)
def test_a_bad_row_is_one_line_naming_file_line_field_and_what_is_allowed(tmp_path, field, value, message):
    path = _write(tmp_path / "mine.csv", [GOOD, {**GOOD, field: value}])
    with pytest.raises(PublishedTableError) as e:
        read_table(path)
    assert str(e.value).startswith(f"{path}:3: {message}")
    assert "\n" not in str(e.value)


def test_a_row_needs_a_metric_and_a_table_its_columns(tmp_path):
    no_metric = {**GOOD, "ttft_ms": "", "tpot_ms": "", "out_tok_s": "", "stat": "-"}
    with pytest.raises(PublishedTableError, match=r"mine.csv:2: no metric: give at least one of ttft_ms"):
        read_table(_write(tmp_path / "mine.csv", [no_metric]))
    (tmp_path / "cols.csv").write_text("source,gpu\nx,L4\n")
    with pytest.raises(PublishedTableError, match=r"cols.csv:1: missing columns source_id, date, engine"):
        read_table(tmp_path / "cols.csv")
    with pytest.raises(FileNotFoundError):
        read_table(tmp_path / "absent.csv")


def test_shipped_rows_map_to_cards_and_cover_the_gpus_sources_and_precisions():
    t = load_published()
    gpus = {n for n, h in shipped_hardware().items() if h.kind == "gpu"}
    assert set(t.rows.gpu) <= gpus and set(t.rows.model) <= set(shipped_models())
    assert len(t.rows) >= 20 and t.rows.source_id.nunique() >= 4
    assert {"L4", "A100-80G-PCIe", "H200"} <= set(t.rows.gpu) and t.rows.gpu.str.startswith("H100").any()
    assert set(t.rows.weights) & {"BF16", "F16"} and set(t.rows.weights) & {"FP8", "AWQ4"}
    assert t.rows.source.str.match(r"^https://").all()
    # each source states one engine, and every row becomes a fit anchor with at least one target
    assert (t.rows.groupby("source_id").engine.nunique() == 1).all()
    for _, r in t.rows.iterrows():
        a = anchor_row(r, max_seqs=64)
        assert any(k in a for k in TARGETS), r.origin


# A document that is not dated must be pinned: a commit in its URL, a numbered CI build, or the
# run's commit named in the notes, so a reader finds the very figures the row copies.
PINNED = re.compile(r"/blob/[0-9a-f]{40}/|/builds/\d+$")


def test_every_shipped_row_cites_a_dated_or_pinned_document():
    for r in load_published().rows.itertuples():
        assert r.source.startswith("https://"), r.origin
        pinned = PINNED.search(r.source) or re.search(r"\bcommit [0-9a-f]{7,40}\b", r.notes)
        assert r.date != "undated" or pinned, f"{r.origin}: undated and unpinned source {r.source}"
        assert r.notes, f"{r.origin}: no note saying how the row was read from the source"


def test_a_users_table_adds_to_the_shipped_one_under_another_hash(tmp_path):
    shipped = load_published()
    both = load_published([_write(tmp_path / "mine.csv", [GOOD])])
    assert len(both.rows) == len(shipped.rows) + 1 and both.sha256 != shipped.sha256
    assert both.rows.origin.iloc[-1] == f"{tmp_path / 'mine.csv'}:2"
    assert both.only(["trtllm"]).rows.engine.eq("trtllm").all()


def _log_err(pred: np.ndarray, meas: np.ndarray) -> float:
    ok = np.isfinite(meas) & (meas > 0) & np.isfinite(pred)
    return float(np.median(np.abs(np.log(pred[ok] / meas[ok]))))


def test_the_fit_reduces_error_against_the_defaults_on_every_shipped_card_and_engine():
    t = load_published()
    cards = shipped_hardware()
    for (gpu, engine), rows in t.rows.groupby(["gpu", "engine"]):
        hw = cards[gpu]
        frame, models = card_frame(rows.reset_index(drop=True), hw)
        meas = frame[list(TARGETS)].to_numpy(float)
        before = _log_err(predict(_anchors(frame), models, hw, default_params(hw, "vllm")), meas)
        _, fitted = fit_card(frame, models, hw)
        assert _log_err(fitted, meas) < before, (gpu, engine)


# A synthetic card calibrated by the simulator itself: three "sources" (batch-1 decode at several
# contexts, a closed-loop sweep, a static batch) on two models, generated with known parameters.
TRUTH = replace(
    default_params(L4, "vllm"),
    eff_bw=0.55,
    overhead_step_s=3.0e-3,
    overhead_seq_s=2.0e-5,
    gemm_s_per_weight={"BF16": 2.0 / (121e12 * 0.35)},
)


def _synthetic_rows(truth: CalibParams = TRUTH) -> pd.DataFrame:
    base = {**GOOD, "engine": "vllm", "gpu": "L4", "kv": "f16", "weights": "BF16", "n_requests": ""}
    rows = [
        {
            **base,
            "source_id": "a",
            "model": m,
            "prompt_tokens": str(p),
            "output_tokens": "256",
            "load": "batch",
            "load_value": "1",
            "stat": "-",
            "ttft_ms": "",
            "tpot_ms": "",
            "out_tok_s": "1",
        }
        for m in ("qwen2.5-7b", "qwen2.5-0.5b")
        for p in (1, 2048)
    ]
    rows += [
        {
            **base,
            "source_id": "b",
            "model": "qwen2.5-0.5b",
            "prompt_tokens": "256",
            "output_tokens": "128",
            "load": "concurrency",
            "load_value": str(c),
            "stat": "p50",
        }
        for c in (1, 4, 16)
    ]
    rows += [
        {
            **base,
            "source_id": "c",
            "model": "qwen2.5-7b",
            "prompt_tokens": "512",
            "output_tokens": "64",
            "load": "batch",
            "load_value": str(b),
            "stat": "-",
            "ttft_ms": "",
            "tpot_ms": "",
            "out_tok_s": "1",
        }
        for b in (4, 16)
    ]
    df = pd.DataFrame(rows).assign(origin="synthetic")
    frame, models = card_frame(df, L4)
    truth = predict(_anchors(frame), models, L4, truth)
    col = {t: i for i, t in enumerate(TARGETS)}
    for i, r in df.iterrows():
        if r.ttft_ms:
            df.loc[i, "ttft_ms"] = f"{truth[i, col['ttft_p50_ms']]:.6g}"
            df.loc[i, "tpot_ms"] = f"{truth[i, col['tpot_p50_ms']]:.6g}"
        df.loc[i, "out_tok_s"] = f"{truth[i, col['throughput_tok_s']]:.6g}"
    return df


def test_leave_one_source_out_recovers_parameters_the_simulator_generated():
    cal = calibrate_card(_synthetic_rows(), L4)
    assert cal.held_out == LOSO and cal.n_sources == 3
    assert cal.params.eff_bw == pytest.approx(TRUTH.eff_bw, rel=0.1)
    assert cal.params.overhead_step_s == pytest.approx(TRUTH.overhead_step_s, rel=0.15)
    assert cal.params.gemm_s_per_weight["BF16"] == pytest.approx(TRUTH.gemm_s_per_weight["BF16"], rel=0.1)
    # each source predicted by a fit on the other two, within a few percent of what generated it
    assert max(v for v in cal.errors.values() if v == v) < 0.05
    assert cal.params.lat_rel_err < 0.1 and cal.params.thr_rel_err < 0.1
    assert cal.params.provenance.startswith("calibrated on 9 published anchors (vllm: a 4, b 3, c 2)")
    assert cal.anchors.provenance.str.startswith("published:").all()


def test_a_requests_overhead_outside_the_steps_is_fitted_on_a_gpu_from_the_ttft_a_source_publishes():
    # source b publishes TTFT at 1-16 clients; 25 ms of each is the API server's, not a step's
    slow = replace(TRUTH, overhead_req_s=0.025)
    rows = _synthetic_rows(slow)
    cal = calibrate_card(rows, L4)
    assert cal.params.overhead_req_s == pytest.approx(0.025, rel=0.15)
    assert cal.params.overhead_step_s == pytest.approx(slow.overhead_step_s, rel=0.15)
    frame, models = card_frame(rows, L4)
    b = (rows.source_id == "b").to_numpy()
    ttft = frame[["ttft_p50_ms"]].to_numpy(float)[b, 0]
    fitted = predict(_anchors(frame), models, L4, cal.params)[b, TARGETS.index("ttft_p50_ms")]
    np.testing.assert_allclose(fitted, ttft, rtol=0.05)
    # without it (the default's 5 ms) every TTFT of b comes out short by about the missing 20 ms
    short = predict(_anchors(frame), models, L4, replace(cal.params, overhead_req_s=0.005))[
        b, TARGETS.index("ttft_p50_ms")
    ]
    assert (ttft - short > 15).all()


def test_a_card_fitted_on_another_engine_says_so_and_one_anchor_keeps_the_default_bar():
    rows = _synthetic_rows()
    one = calibrate_card(rows.iloc[[0]].assign(engine="trtllm"), L4)
    assert "(trtllm: " in one.params.provenance  # the fit says its engine
    # a vLLM point on a card with only this fit takes it, saying the engine differs
    assert (
        "engine mismatch: vllm's points on the card's trtllm fit"
        in published.for_engine([one], "vllm")["L4"].provenance
    )
    assert one.held_out == "" and one.params.lat_rel_err >= 0.25 and one.params.thr_rel_err >= 0.25


def _folds(monkeypatch, rows: pd.DataFrame, card: str):
    """Calibrate one card, recording the rows each fit was trained on (the first is the full fit)."""
    seen, real = [], published.fit_card

    def spy(frame, models, hw):
        seen.append(sorted(frame.index))
        return real(frame, models, hw)

    monkeypatch.setattr(published, "fit_card", spy)
    return calibrate_card(rows, shipped_hardware()[card]), seen


def test_a_card_with_two_sources_is_held_out_by_source(monkeypatch):
    rows = load_published().rows
    rows = rows[(rows.gpu == "A100-80G-PCIe") & (rows.engine == "vllm")].reset_index(drop=True)
    cal, seen = _folds(monkeypatch, rows, "A100-80G-PCIe")
    sources = rows.source_id
    assert cal.held_out == LOSO and cal.n_sources == sources.nunique() >= 2
    n_src, models = sources.nunique(), list(dict.fromkeys(rows.model))
    assert seen[0] == list(rows.index) and len(seen) == 1 + n_src + len(models)
    for train, held in zip(seen[1 : 1 + n_src], dict.fromkeys(sources)):
        # each fold trains on every source but one, and no row of that one
        assert train == list(rows.index[sources != held]), held
    assert np.isfinite(cal.anchors.throughput_tok_s_held_out).all()
    # then leave-one-model-out: each model's rows predicted by a fit on the card's other models only
    assert len(models) >= 2
    for train, held in zip(seen[1 + n_src :], models):
        assert train == list(rows.index[rows.model != held]), held
    assert set(cal.lomo_errors) == set(models) and np.isfinite(cal.anchors.throughput_tok_s_lomo).all()
    p = cal.params
    assert p.xfer_lat_rel_err > 0 and p.xfer_thr_rel_err > 0 and "leave-one-model-out" in p.provenance


def test_a_card_with_one_source_is_held_out_by_anchor_and_says_so(monkeypatch):
    rows = load_published().rows
    rows = rows[(rows.gpu == "L4") & (rows.engine == "vllm") & (rows.source_id == "wmx-l4-sweep")].reset_index(
        drop=True
    )
    assert len(rows) >= 3
    cal, seen = _folds(monkeypatch, rows, "L4")
    assert cal.held_out == LOAO and LOSO not in cal.params.provenance
    assert [len(t) for t in seen[1:]] == [len(rows) - 1] * len(rows)
    assert tpot_held_out_by_source([cal]) == []  # by anchor is not by source


def test_the_summary_counts_the_cards_whose_tpot_is_held_out_by_source():
    rows = _synthetic_rows()
    three = calibrate_card(rows, L4)  # three sources, TPOT in one, batch-1 speed in another
    one = calibrate_card(rows[rows.source_id == "b"], L4)  # TPOT, one source: by anchor
    assert tpot_held_out_by_source([three]) == ["L4"] and tpot_held_out_by_source([one]) == []
    assert tpot_held_out_by_source([three], engine="trtllm") == []
    assert three.tpot_basis == ("TPOT/ITL", B1) and one.tpot_basis == ("TPOT/ITL",)
    lines = published_stage.summary_lines([three])
    # a TPOT error that counts batch-1 decode speed is starred wherever it is printed, and the star explained
    assert lines[-1].startswith("vllm TPOT held out by source on 1 GPU card: L4* (bar: 4, not met")
    assert re.search(r"^L4 .*%\* ", lines[2]) and lines[-2].startswith(f"* TPOT incl. {B1}: a single request's")
    held, lomo = published_stage.card_lines(three, used=True)[-2:]
    assert f"TPOT (incl. {B1})" in held and lomo.startswith("  leave-one-model-out median |error|")
    plain = published_stage.summary_lines([one])
    assert "*" not in plain[2] and not plain[-2].startswith("*")


def _b1_row(**kw) -> pd.Series:
    return pd.Series(
        {
            **GOOD,
            "load": "batch",
            "load_value": "1",
            "stat": "mean",
            "ttft_ms": "",
            "tpot_ms": "",
            "out_tok_s": "",
            "e2e_ms": "1500",
            **kw,
        }
    )


def test_batch1_speed_is_one_request_publishing_e2e_or_speed_and_no_tpot():
    assert batch1_speed(_b1_row()) and batch1_speed(_b1_row(e2e_ms="", out_tok_s="84.28", stat="-"))
    assert not batch1_speed(_b1_row(tpot_ms="11"))  # a published TPOT is TPOT itself
    assert not batch1_speed(_b1_row(itl_ms="11"))
    assert not batch1_speed(_b1_row(load_value="8"))  # a batch of 8 shares its steps
    assert not batch1_speed(_b1_row(load="concurrency"))
    assert not batch1_speed(_b1_row(output_tokens="1", e2e_ms="", ttft_ms="16"))  # a prefill, not a speed
    # its fit target stays the throughput of that request: output tokens / e2e
    a = anchor_row(_b1_row(), max_seqs=64)
    assert a["throughput_tok_s"] == pytest.approx(128 / 1.5) and "tpot_p50_ms" not in a
    assert a["slots"] == 1 and a["send_offsets"] == [0.0]


def test_batch1_speed_is_held_out_as_latency_per_output_token_with_its_label():
    # source "a" publishes batch-1 speeds 1.25x slower than the truth that generated b and c: a fit on b
    # and c predicts a's latency per output token 20 % short (1 / 1.25 - 1), its throughput 25 % high
    rows = _synthetic_rows()
    a = rows.source_id == "a"
    rows.loc[a, "out_tok_s"] = [f"{float(v) / 1.25:.6g}" for v in rows.loc[a, "out_tok_s"]]
    cal = calibrate_card(rows, L4)
    t = cal.anchors
    tok, thr = t.per_token_held_out.to_numpy(), t.throughput_tok_s_held_out.to_numpy()
    assert np.isfinite(tok[a.to_numpy()]).all() and np.isnan(tok[~a.to_numpy()]).all()
    np.testing.assert_allclose(tok[a.to_numpy()], 1 / (1 + thr[a.to_numpy()]) - 1)
    np.testing.assert_allclose(tok[a.to_numpy()], -0.2, atol=0.03)
    np.testing.assert_allclose(thr[a.to_numpy()], 0.25, atol=0.04)
    # the TPOT median runs over b's TPOT (near 0) and a's per-token errors (0.2): 3 against 4
    assert cal.errors["TPOT"] == pytest.approx(0.2, abs=0.03) and B1 in cal.tpot_basis
    assert cal.params.lat_rel_err >= 0.17  # the latency error bar carries them too
    assert "per output token (e2e / output) -2" in "\n".join(published_stage.card_lines(cal, used=True))


@pytest.fixture(scope="module")
def shipped_vllm():
    return calibrate_published(load_published().only(["vllm"]))


def test_the_shipped_table_holds_out_batch1_decode_speed_by_source_on_a100_and_h100_sxm(shipped_vllm):
    held = tpot_held_out_by_source(shipped_vllm)
    assert {"A100-80G-PCIe", "H100-SXM"} <= set(held)
    for c in shipped_vllm:
        if c.hardware in ("A100-80G-PCIe", "H100-SXM"):
            assert c.tpot_basis == (B1,) and c.held_out == LOSO  # no TPOT or ITL published there: labelled
            assert np.isfinite(c.anchors.per_token_held_out).sum() >= 28


def test_the_shipped_table_holds_out_published_tpot_by_source_on_l4(shipped_vllm):
    # two independent vLLM sources on L4 (a 0.5B sweep's ITL, a 7B sweep's TPOT): each predicts the other
    l4 = next(c for c in shipped_vllm if c.hardware == "L4")
    assert "L4" in tpot_held_out_by_source(shipped_vllm)
    assert l4.held_out == LOSO and l4.n_sources >= 2 and B1 not in l4.tpot_basis
    assert np.isfinite(l4.errors["TPOT"])


def test_the_shipped_table_holds_out_vllm_tpot_by_source_on_four_cards_and_calibrates_all_five(shipped_vllm):
    held = tpot_held_out_by_source(shipped_vllm)
    assert len(held) >= published_stage.BAR_CARDS and {"L4", "H200"} <= set(held)
    # every card the one-GPU table covers (B200's published rows are multi-GPU: spec/published_multigpu.csv)
    gpus = set(load_published().rows.gpu) & {n for n, h in shipped_hardware().items() if h.kind == "gpu"}
    assert len(gpus) == 5
    assert {c.hardware for c in shipped_vllm} == gpus  # no card left an uncalibrated default
    assert all(np.isfinite(c.errors["TPOT"]) for c in shipped_vllm)  # each with a held-out TPOT error


# The command on the three cards whose fits take seconds (H200's and H100-SXM's took 86 s of CPU here):
# the same path as on all five (every card the table covers is calibrated: the test of shipped_vllm above)
CHEAP_CARDS = ("L4", "A100-80G-PCIe", "H100-PCIe")
_FITS: dict = {}


def _fit_once(table, hardware=None):
    """calibrate_published_formats, really run, but once per table and cards in this module (~20 s on
    these cards on 2 cores): the three tests below check what the command and the fit cache do with a
    fit (how often they ask for one, what they keep and read back), each given a fit of its own copy."""
    key = (published_cache.fit_key(table), tuple(hardware or ()))
    if key not in _FITS:
        _FITS[key] = calibrate_published_formats(table, hardware)
    return copy.deepcopy(_FITS[key])


def test_simulate_fits_the_shipped_table_once_and_a_users_run_takes_precedence(tmp_path, monkeypatch):
    shipped = load_published()
    calls = []

    def fake(table, hardware=None):  # the real fit, counted
        calls.append((table.sha256, tuple(hardware)))
        return _fit_once(table, hardware)

    monkeypatch.setattr(published_cache, "calibrate_published_formats", fake)  # where simulate fits
    con = Console(file=io.StringIO())
    with Store(tmp_path / "s.duckdb") as store:
        first = published_stage.published_params("st", store, con, list(CHEAP_CARDS))
        again = published_stage.published_params("st", store, con, list(CHEAP_CARDS))
        assert calls == [(shipped.sha256, CHEAP_CARDS)]  # fitted once, then read back
        assert set(first) == set(again) == set(CHEAP_CARDS) and again["L4"] == first["L4"]
        # a user's own run (another table: here the shipped rows re-keyed) is what simulate uses from then on
        mine = PublishedTable(shipped.rows, shipped.paths, "mine")
        cals = [replace(c, params=replace(c.params, provenance="mine")) for c in calibrate_published(mine, ["L4"])]
        published_stage.store_published(store, "st", mine, cals, by="command")
        assert published_stage.published_params("st", store, con, ["L4"])["L4"].provenance == "mine"
        assert len(calls) == 1  # nothing refitted


def test_the_published_command_exits_0_on_the_shipped_table(tmp_path, monkeypatch):
    monkeypatch.setattr(published_cache, "calibrate_published_formats", _fit_once)  # where the command fits
    cards = [a for c in CHEAP_CARDS for a in ("--hardware", c)]
    r = CliRunner().invoke(app, ["calibrate", "--published", *cards, "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    out = " ".join(r.output.split())
    for card in ("L4 / vllm (used by the atlas)", "A100-80G-PCIe / vllm", "A100-80G-PCIe / trtllm"):
        assert card in out
    assert "leave-one-source-out median |error|" in out and "Seed paper vs projection" in out
    assert re.search(r"vllm TPOT held out by source on \d+ GPU cards?\b.* \(bar: 4", out)
    with Store(tmp_path / "store.duckdb") as store:
        params = published_stage.stored_published(store, "default-cpu")
    assert set(params) == set(CHEAP_CARDS)
    assert all(p.provenance.startswith("calibrated on") for p in params.values())
    # a card no table has an anchor of is an error naming it (every shipped GPU card now has one)
    rows = load_published().rows
    no_pcie = PublishedTable(rows[rows.gpu != "H100-PCIe"].reset_index(drop=True), (), "no-pcie")
    with pytest.raises(ValueError, match="no published anchor on H100-PCIe"):
        calibrate_published(no_pcie, ["H100-PCIe"])


def test_a_fresh_store_reads_the_fit_from_the_cache_and_a_damaged_cache_file_is_refitted(tmp_path, monkeypatch):
    calls = []

    def fake(table, hardware=None):
        calls.append(tuple(hardware))
        return _fit_once(table, hardware)

    monkeypatch.setattr(published_cache, "calibrate_published_formats", fake)  # where simulate fits
    out = io.StringIO()
    con = Console(file=out, width=200)
    stored, first = [], None
    for name in ("a", "b"):  # two stores, same table and code: the second reads the cache
        with Store(tmp_path / f"{name}.duckdb") as st:
            got = published_stage.published_params("st", st, con, list(CHEAP_CARDS))
            first = got if name == "a" else first
            second = got
            stored.append(
                sorted((r.calib_id, r.params_json, r.fidelity_json) for r in st.calibrations("st").itertuples())
            )
    assert stored[0] == stored[1]  # what the store keeps, bit for bit (NaN and float repr included)
    assert calls == [CHEAP_CARDS] and "from the cache" in out.getvalue()
    assert all(first[c].to_dict() == second[c].to_dict() for c in first)
    # the cards asked for are part of the key; a damaged file is ignored and refitted
    key = published_cache.cache_key(published_stage.fit_key(load_published()), list(CHEAP_CARDS))
    assert key != published_cache.cache_key(published_stage.fit_key(load_published()), ["L4", "A100-80G-PCIe"])
    (published_cache.cache_dir() / f"{key}.json").write_text('{"key": "' + key + '", "fits": [{"hardware": 1}]}')
    with Store(tmp_path / "c.duckdb") as c:
        third = published_stage.published_params("st", c, con, list(CHEAP_CARDS))
    assert len(calls) == 2 and third["A100-80G-PCIe"].to_dict() == first["A100-80G-PCIe"].to_dict()


def _two_engine_fits() -> list:
    """One card fitted twice, vLLM's and TensorRT-LLM's, told apart by their parameters and bars."""
    rows = _synthetic_rows()
    v = calibrate_card(rows, L4)
    t = replace(
        calibrate_card(rows.assign(engine="trtllm"), L4),
        params=replace(v.params, overhead_step_s=0.123, lat_rel_err=0.0777, provenance="calibrated on (trtllm: t)"),
    )
    return [v, t]


def test_a_tensorrt_llm_point_takes_the_cards_tensorrt_llm_fit_not_vllms(tmp_path):
    v, t = _two_engine_fits()
    assert published.for_atlas([v, t])["L4"] is v  # the card's atlas fit stays vLLM's
    trt = published.for_engine([v, t], "trtllm")["L4"]
    # its figures and its bar are that fit's; its engine the point's (every fit starts from vLLM's defaults)
    assert t.params.engine == "vllm" and trt == replace(t.params, engine="trtllm") and trt.lat_rel_err == 0.0777
    assert published.for_engine([v, t], "vllm")["L4"] == v.params
    # an engine the card has no fit of takes the atlas fit, and says which it rests on
    sg = published.for_engine([v, t], "sglang")["L4"]
    assert sg.overhead_step_s == v.params.overhead_step_s and sg.engine == "sglang"
    assert "sglang's points on the card's vllm fit" in sg.provenance
    # the same from the store, as `simulate` reads it: fitted automatically and kept, or asked for
    shipped = load_published()
    key = published_cache.fit_key(shipped)
    con = Console(file=io.StringIO())
    with Store(tmp_path / "s.duckdb") as store:
        published_stage.store_published(store, "st", shipped, [v, t], by="simulate")
        got = published_stage.stored_published(store, "st", key, engine="trtllm")["L4"]
        assert got == trt
        assert published_stage.stored_published(store, "st", key)["L4"] == v.params
        assert published_stage.published_params("st", store, con, ["L4"], engine="trtllm")["L4"] == trt
        assert "sglang's points" in published_stage.stored_published(store, "st", key, engine="sglang")["L4"].provenance
        # a user's later run of one engine only: its fit for every engine, TensorRT-LLM's own where it made one
        mine = PublishedTable(shipped.rows, shipped.paths, "mine")
        published_stage.store_published(
            store, "st", mine, [replace(v, params=replace(v.params, provenance="mine"))], by="command"
        )
        assert published_stage.stored_published(store, "st", key, engine="trtllm")["L4"].provenance.startswith("mine")
