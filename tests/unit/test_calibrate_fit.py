"""Calibration recovers parameters it generated, reports fidelity, and proposes the next anchor."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from pareto_atlas.calibrate import fit, propose_next_anchor
from pareto_atlas.calibrate.fit import TARGETS, _anchors, predict
from pareto_atlas.calibrate.hwprobe import measure_this_machine
from pareto_atlas.simulate.params import default_params, kernel_format
from pareto_atlas.simulate.space import Load, Workload, default_space
from pareto_atlas.simulate.sweep import sweep
from pareto_atlas.spec.cards import HardwareCard, shipped_models

M = shipped_models()["qwen2.5-0.5b"]
CPU = HardwareCard("this-cpu", "cpu", 20.0, {"fp32": 0.1}, 24.0, price_per_hour=0.05, price_date="2026-11")
QK = kernel_format("Q4_K_M", M)  # the 0.5B's rows (hidden 896) do not fit K-quant blocks
TRUTH = replace(
    default_params(CPU),
    eff_bw=1.2,
    gemv_s_per_weight={QK: 50e-12, "F16": 30e-12},
    gemm_s_per_weight={QK: 18e-12, "F16": 28e-12},
    head_ratio=2.0,
    overhead_step_s=3e-3,
    step_cv=0.05,
)


def synthetic_anchors(noise: float, seed: int = 1) -> pd.DataFrame:
    rows = [
        dict(
            weights=w,
            slots=c,
            concurrency=c,
            prompt_tokens=p,
            output_tokens=o,
            n_requests=16,
            campaign_id="c1",
            engine_version="b1",
        )
        for w in ("Q4_K_M", "F16")
        for c in (1, 2, 4)
        for p, o in ((128, 32), (512, 64))
    ]
    df = pd.DataFrame(rows)
    pred = predict(_anchors(df), M, CPU, TRUTH)
    rng = np.random.default_rng(seed)
    for i, t in enumerate(TARGETS):
        df[t] = pred[:, i] * np.exp(rng.normal(0, noise, len(df)))
    return df


def test_fit_recovers_known_parameters_from_noisy_synthetic_anchors():
    cal = fit(synthetic_anchors(0.02), M, CPU, loo=False)
    p = cal.params
    # Each format's dequantize+dot cost per weight is identified from the anchors, not typed in.
    for d in (QK, "F16"):
        assert p.gemv_s_per_weight[d] == pytest.approx(TRUTH.gemv_s_per_weight[d], rel=0.1)
        assert p.gemm_s_per_weight[d] == pytest.approx(TRUTH.gemm_s_per_weight[d], rel=0.1)
    # Per-step and per-sequence overheads trade off against each other; what they must get right
    # together is an unseen configuration.
    unseen = pd.DataFrame(
        [dict(weights="Q4_K_M", slots=3, concurrency=3, prompt_tokens=300, output_tokens=48, n_requests=16)]
    )
    truth, got = predict(_anchors(unseen), M, CPU, TRUTH), predict(_anchors(unseen), M, CPU, p)
    assert np.abs(got / truth - 1).max() < 0.05
    assert cal.summary["fit"]["tpot_p50_ms"] < 0.03
    assert p.provenance.startswith("calibrated")


def test_fidelity_report_flags_versions_and_scores_heldout_and_drift():
    a = synthetic_anchors(0.01)
    b = a.copy()
    b["campaign_id"] = "c2"
    b["tpot_p50_ms"] *= 1.02
    odd = a.iloc[:2].assign(engine_version="b0")
    anchors = pd.concat([a, b, odd], ignore_index=True)
    cal = fit(anchors, M, CPU, heldout=[0, 5], loo=False)
    assert len(cal.flagged) == 2 and (cal.flagged.engine_version == "b0").all()
    assert cal.heldout is not None and len(cal.heldout) == 2
    assert cal.drift["tpot_p50_ms"].median() == pytest.approx(0.02, abs=0.005)
    assert cal.params.lat_rel_err > 0 and "held-out" in cal.report()


@pytest.fixture(scope="module")
def loo_cal():
    """One leave-one-out fit for the two tests below (each fit of it ~10-40 s on 2 cores): half the
    synthetic anchors, plus the only Q8_0 anchor, which no other anchor supports."""
    df = synthetic_anchors(0.03).iloc[::2]
    df = pd.concat([df, df.iloc[[0]].assign(weights="Q8_0")], ignore_index=True)
    return fit(df, M, CPU, loo=True)


def test_leave_one_out_error_is_reported_and_sets_the_error_bar(loo_cal):
    cal = loo_cal
    assert cal.loo is not None and len(cal.loo) == len(cal.residuals)
    sup = cal.loo[cal.loo["extrapolated"].eq("")]
    assert len(sup) == len(cal.loo) - 1  # the Q8_0 anchor is the one not counted in the bar
    expect = np.nanpercentile(np.abs(sup[["ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms"]]), 90)
    assert cal.params.lat_rel_err == pytest.approx(expect)


def test_leave_one_out_flags_extrapolations_and_keeps_them_out_of_the_error_bar(loo_cal):
    cal = loo_cal
    assert cal.loo["extrapolated"].iloc[-1] == "format Q8_0"
    assert (cal.loo["extrapolated"].iloc[:-1] == "").all()
    assert "extrapolated: " in cal.report() and "leave-one-out over" in cal.params.provenance


def test_unseen_format_borrows_its_family_cost_never_a_typed_in_one():
    p = replace(TRUTH, gemv_s_per_weight={"Q4_0": 20e-12, "Q8_0": 45e-12})
    got, how = p.weight_cost("Q5_0", "gemv")
    assert how == "family" and got == pytest.approx(np.sqrt(20e-12 * 45e-12))
    assert p.weight_cost("RANDOM", "gemv") == (20e-12, "fitted")  # stored as Q4_0
    assert p.weight_cost("F16", "gemv")[1] == "derived"


def test_propose_next_anchor_picks_a_contested_unmeasured_point():
    anchors = synthetic_anchors(0.01).assign(
        kv="f16", kv_keep=1.0, sparse_budget=1.0, spec="none", spec_k=0, batching="continuous"
    )
    sp = default_space(M, [CPU], [Workload("w", 128, 32)], [Load(concurrency=2)])
    pts = sweep(replace(sp, knobs=sp.knobs[::7]), {CPU.name: TRUTH}, n_requests=16)
    best = propose_next_anchor(pts, anchors, 0.05)
    assert best["feasible"] and best["distance"] > 0 and isinstance(best["reason"], str)


def test_measure_this_machine_is_a_cpu_card():
    card = measure_this_machine(price_per_hour=0.05)
    assert card.kind == "cpu" and card.name == "this-cpu" and card.mem_bw_gbs > 0.5
    assert card.tflops["fp32"] > 0 and card.mem_gib > 0 and card.source.startswith("measured:")


def test_replayed_sends_group_requests_the_server_prefilled_in_one_step(tmp_path):
    from pareto_atlas.calibrate.stage import anchor_load
    from pareto_atlas.store import Store
    from pareto_atlas.store.db import now

    def rec(idx, send, first, prompt_ms, warmup=False):
        return {
            "idx": idx,
            "ok": True,
            "warmup": warmup,
            "send_ts": send,
            "first_token_ts": first,
            "server_timings": {"prompt_ms": prompt_ms},
        }

    # two clients send at once (0.2 ms apart); in run "a" the server prefilled both in one 2.3 s
    # step, in run "b" the first alone and the second after it; a third request comes much later
    runs = {
        "a": [
            rec(0, 99.0, 99.5, 400, warmup=True),
            rec(1, 100.0, 102.33, 2326),
            rec(2, 100.0002, 102.33, 2328),
            rec(3, 104.5, 105.9, 1377),
        ],
        "b": [rec(1, 100.0, 100.83, 826), rec(2, 100.0002, 101.67, 844), rec(3, 103.3, 104.2, 850)],
    }
    with Store(tmp_path / "s.duckdb") as s:
        for aid, recs in runs.items():
            s.put_anchor(
                {
                    "anchor_id": aid,
                    "study": "s",
                    "arm": aid,
                    "repeat": 0,
                    "status": "ok",
                    "reason": None,
                    "knobs_json": "{}",
                    "metrics_json": "{}",
                    "started_at": now(),
                    "finished_at": now(),
                },
                recs,
            )
        (a, _), (b, _) = anchor_load(s, "a"), anchor_load(s, "b")
    assert a == [0.0, 0.0, pytest.approx(4.5)]  # replayed together: one prefill step
    assert b[0] == 0.0 and b[1] == pytest.approx(0.0002) and b[2] == pytest.approx(3.3)  # the second waited


def test_closed_loops_are_simulated_with_their_pauses_and_open_loops_replayed():
    # A closed loop's measured send times are when the real engine finished earlier requests:
    # replaying them would queue requests behind a slightly slower simulation. So a closed-loop
    # anchor runs the closed loop with its clients' recorded pauses; an open-loop one its sends.
    base = dict(weights="Q4_K_M", slots=2, prompt_tokens=128, output_tokens=32, n_requests=6)
    sends = [0.0] * 6  # all at once: a replay would queue five of them
    think = [0.3, 0.1, 0.2, 0.5, 0.4, 0.6]
    df = pd.DataFrame(
        [
            {**base, "concurrency": 2, "send_offsets": sends, "think_s": think},
            {**base, "concurrency": 2, "send_offsets": [], "think_s": think},
            {**base, "concurrency": 0, "rate_rps": 1.0, "send_offsets": sends, "think_s": []},
        ]
    )
    closed, same, opened = _anchors(df)
    assert closed.sends is None and closed.think == tuple(think) and opened.think is None
    assert opened.sends == tuple(sends)
    pred = predict([closed, same, opened], M, CPU, replace(TRUTH, step_cv=0.0))
    assert (pred[0] == pred[1]).all()
    assert pred[2][0] > 2 * pred[0][0]  # replayed at once, the open loop queues: TTFT p50 far higher


# llama.cpp on this CPU: reading f16 KV in a decode step is slow (~6 us per cached cell), yet a
# prompt's attention runs as a GEMM and is almost free. One attention efficiency cannot be both.
ATTN_TRUTH = replace(TRUTH, eff_attn_by_kv={"f16": 0.02, "q8_0": 0.03}, eff_attn_flops_by_kv={"f16": 0.9, "q8_0": 0.05})


def _shaped(shapes, kvs=("f16", "q8_0")) -> pd.DataFrame:
    rows = [
        dict(
            weights="Q4_K_M",
            kv=kv,
            slots=c,
            concurrency=c,
            prompt_tokens=p,
            output_tokens=o,
            n_requests=12,
            campaign_id="c1",
            engine_version="b1",
        )
        for kv in kvs
        for c in (1, 2)
        for p, o in shapes
    ]
    df = pd.DataFrame(rows)
    pred = predict(_anchors(df), M, CPU, ATTN_TRUTH)
    for i, t in enumerate(TARGETS):
        df[t] = pred[:, i] * np.exp(np.random.default_rng(3).normal(0, 0.01, len(df)))
    return df


def test_attention_cost_against_context_is_learnt_from_two_shapes_and_only_then():
    long = pd.DataFrame(
        [
            dict(weights="Q4_K_M", kv=kv, slots=1, concurrency=1, prompt_tokens=1024, output_tokens=64, n_requests=8)
            for kv in ("f16", "q8_0")
        ]
    )
    truth = predict(_anchors(long), M, CPU, ATTN_TRUTH)
    two = fit(_shaped(((128, 32), (512, 64))), M, CPU, loo=False).params
    one = fit(_shaped(((128, 32),)), M, CPU, loo=False).params
    # with two prompt lengths the decode and prompt attention efficiencies are both fitted ...
    assert two.eff_attn_flops_by_kv and set(two.eff_attn_flops_by_kv) == {"f16", "q8_0"}
    assert two.eff_attn_flops_by_kv["q8_0"] < 0.5 * two.eff_attn_flops_by_kv["f16"]
    got = predict(_anchors(long), M, CPU, two)
    assert np.abs(got[:, [0, 2]] / truth[:, [0, 2]] - 1).max() < 0.05  # TTFT and TPOT p50, twice the longest prompt
    # ... with one, the prompt's attention is confounded with the weights' cost: not fitted, and a
    # 1024-token prompt is mispredicted by far more
    assert one.eff_attn_flops_by_kv == {}
    off = predict(_anchors(long), M, CPU, one)
    assert np.abs(off[:, [0, 2]] / truth[:, [0, 2]] - 1).max() > 0.15


def test_padded_kv_costs_a_short_context_its_whole_pad():
    from pareto_atlas.simulate.cost_model import coeffs
    from pareto_atlas.simulate.kernels import step_time
    from pareto_atlas.spec.knobs import Knobs

    k = Knobs(weights="Q4_K_M")
    padded, flat = coeffs(M, CPU, k, ATTN_TRUTH), coeffs(M, CPU, k, replace(ATTN_TRUTH, kv_pad=0))
    assert step_time(padded, 1.0, 100.0, 0, 0, 0, 1.0) > step_time(flat, 1.0, 100.0, 0, 0, 0, 1.0)
    # half a pad per decoding sequence, in expectation: an empty context reads 128 cells, two read 256
    assert step_time(padded, 1.0, 0.0, 0, 0, 0, 1.0) == pytest.approx(step_time(flat, 1.0, 128.0, 0, 0, 0, 1.0))
    assert step_time(padded, 2.0, 0.0, 0, 0, 0, 2.0) == pytest.approx(step_time(flat, 2.0, 256.0, 0, 0, 0, 2.0))
    # a prompt's attention pairs are not padded
    assert step_time(padded, 0.0, 0.0, 64, 2080.0, 0, 1.0) == step_time(flat, 0.0, 0.0, 64, 2080.0, 0, 1.0)


def test_a_prompt_longer_than_any_calibrated_one_is_an_extrapolation():
    from pareto_atlas.calibrate.fidelity import support

    train = _shaped(((128, 32), (512, 64)))
    assert support(train, train.iloc[0].copy()) == ""
    row = train.iloc[0].copy()
    row["prompt_tokens"] = 1024
    assert support(train, row) == "prompt 1024"


def test_one_anchor_a_neighbour_slowed_cannot_drag_the_fit():
    df = synthetic_anchors(0.01)
    df.loc[3, ["tpot_p50_ms", "tpot_p99_ms"]] *= 5.0  # a job beside it, unnoticed
    df.loc[3, "throughput_tok_s"] /= 4.0
    p = fit(df, M, CPU, loo=False).params
    unseen = pd.DataFrame(
        [dict(weights="Q4_K_M", slots=3, concurrency=3, prompt_tokens=300, output_tokens=48, n_requests=16)]
    )
    truth, got = predict(_anchors(unseen), M, CPU, TRUTH), predict(_anchors(unseen), M, CPU, p)
    assert np.abs(got / truth - 1).max() < 0.10  # an unweighted least squares: 48 % off in TPOT


def test_contended_anchors_are_left_out_of_the_fit_and_named():
    df = synthetic_anchors(0.01).assign(
        arm=lambda d: [f"a{i}" for i in range(len(d))], contended=False, other_cpu_cores=0.02
    )
    df.loc[5, ["tpot_p50_ms", "contended", "other_cpu_cores"]] = [df.loc[5, "tpot_p50_ms"] * 3, True, 0.9]
    cal = fit(df, M, CPU, loo=False)
    assert len(cal.residuals) == len(df) - 1 and "a5" not in set(cal.residuals["arm"])
    assert len(cal.contended) == 1 and "a5 ran beside 0.90 cores of other work" in cal.report()
    # with fewer than two quiet anchors, nothing is left out (a fit on what there is, said so by the bar)
    two = df.iloc[:2].assign(contended=True)
    assert len(fit(two, M, CPU, loo=False).contended) == 0


def test_the_measured_fit_line_counts_the_anchors_fitted_and_says_which_were_left_out_and_why():
    """calibrate.measured's "measured fit (N anchors)" counts what the fit used: with 2 of 4 anchors
    contended it says 2, and that 2 were left out as contended, not 4."""
    from pareto_atlas.calibrate.measured import fitted_words

    df = (
        synthetic_anchors(0.01)
        .iloc[:4]
        .assign(
            arm=lambda d: [f"a{i}" for i in range(len(d))], contended=[False, False, True, True], other_cpu_cores=0.02
        )
    )
    words = fitted_words(fit(df, M, CPU, loo=False))
    assert words == "2 anchors of this study; 2 left out (2 contended: ran beside other work on the machine)"
    assert fitted_words(fit(df.assign(contended=False), M, CPU, loo=False)) == "4 anchors of this study"


def test_a_k_quant_on_rows_its_blocks_do_not_fit_is_another_kernel_format():
    # llama.cpp stores a K-quant tensor whose rows are not a multiple of 256 in a legacy type: the
    # 0.5B's Q4_K_M (hidden 896) is mostly Q5_0, the 1.5B's (hidden 1536) real Q4_K
    small, large = shipped_models()["qwen2.5-0.5b"], shipped_models()["qwen2.5-1.5b"]
    assert kernel_format("Q4_K_M", small) == "Q4_K_M/legacy-rows" and kernel_format("Q4_K_M", large) == "Q4_K_M"
    assert kernel_format("Q4_0", small) == "Q4_0" and kernel_format("RANDOM", small) == "Q4_0"
    p = replace(default_params(CPU), gemv_s_per_weight={QK: 50e-12}, gemm_s_per_weight={QK: 18e-12})
    assert p.weight_cost("Q4_K_M", "gemm", small) == (18e-12, "fitted")
    # the 1.5B's Q4_K_M never borrows the 0.5B's fitted cost as its own: another format's kernels
    assert p.weight_cost("Q4_K_M", "gemm", large)[1] != "fitted"


def test_a_format_whose_gemv_cost_stalled_under_the_streaming_time_is_restarted_at_the_ridge(monkeypatch):
    # On this CPU the fit left F16's and Q8_0's GEMV costs where the step's soft max no longer felt
    # them (in-sample TPOT +54 % and -21 %). Here F16's truth is compute-bound and the fit starts with
    # its GEMV cost 4000x under it (a token's compute far below streaming its weights): only a
    # restart at the ridge recovers it.
    import sys

    from pareto_atlas.calibrate.fit import _ridge_start, _Space, fit_params

    truth = replace(TRUTH, gemv_s_per_weight={**TRUTH.gemv_s_per_weight, "F16": 120e-12})
    df = synthetic_anchors(0.0)
    df = df[df.weights.eq("F16")].reset_index(drop=True)
    pred = predict(_anchors(df), M, CPU, truth)
    for i, t in enumerate(TARGETS):
        df[t] = pred[:, i]
    stalled = replace(default_params(CPU), gemv_s_per_weight={"F16": 3e-14})
    x = _Space.for_anchors(_anchors(df), True, cards=[M] * len(df))
    r = _ridge_start(x.get(stalled, CPU), x, stalled, _anchors(df), [M] * len(df), CPU)
    # the ridge: a weight's compute as long as streaming its 2 bytes at the fitted bandwidth
    assert np.exp(r[x.names.index("gemv:F16")]) == pytest.approx(2.0 / (CPU.mem_bw_gbs * 1e9 * stalled.eff_bw))

    def tpot_err() -> float:
        _, got = fit_params(df, M, CPU, start=stalled, head_ratio_starts=(2.0,))
        return float(np.max(np.abs(got[:, TARGETS.index("tpot_p50_ms")] / df.tpot_p50_ms - 1)))

    assert tpot_err() < 0.02
    monkeypatch.setattr(sys.modules["pareto_atlas.calibrate.fit"], "_ridge_start", lambda *a: None)
    assert tpot_err() > 0.2  # without the restart the fit stays where it started


def test_a_format_measured_at_one_and_two_slots_gets_its_own_streaming_efficiency(monkeypatch):
    # Q8_0's step hardly grew from one slot to two here (its time: streaming at ~7.5 GB/s), F16's did
    # (streaming at ~14 GB/s, then compute): one efficiency for both mispredicted batched Q8_0 by +98 %
    import sys

    from pareto_atlas.calibrate.fit import _batched_formats, _Space, fit_params

    # both formats' steps streaming-bound, at rates 5x apart (keyed by the kernel format, as the cost model reads them)
    truth = replace(TRUTH, eff_bw_by_dtype={QK: 0.3, "F16": 1.5}, gemv_s_per_weight={QK: 5e-12, "F16": 10e-12})
    df = synthetic_anchors(0.0)
    df = df[df.prompt_tokens.eq(128) & df.slots.isin([1, 2])].reset_index(drop=True)
    pred = predict(_anchors(df), M, CPU, truth)
    for i, t in enumerate(TARGETS):
        df[t] = pred[:, i]
    assert _batched_formats(_anchors(df), [M] * len(df)) == ["F16", QK]
    assert _batched_formats(_anchors(df[df.slots.eq(1)])) == []  # one batch size: not separable, not fitted
    assert "bw:F16" in _Space.for_anchors(_anchors(df), True, cpu=True).names
    assert (
        "bw:F16" not in _Space.for_anchors(_anchors(df), True, fixed=("eff_bw",), cpu=True).names
    )  # the machine's, kept
    assert "bw:F16" not in _Space.for_anchors(_anchors(df), True).names  # a GPU card keeps one

    def fitted():
        p, got = fit_params(df, M, CPU, head_ratio_starts=(2.0,))
        return p, float(np.max(np.abs(got[:, TARGETS.index("tpot_p50_ms")] / df.tpot_p50_ms - 1)))

    p, err = fitted()
    assert p.bw_eff("F16") == pytest.approx(1.5, rel=0.15) and p.bw_eff("Q4_K_M", M) == pytest.approx(0.3, rel=0.15)
    assert err < 0.03
    monkeypatch.setattr(sys.modules["pareto_atlas.calibrate.fit"], "_batched_formats", lambda *a: [])
    assert fitted()[1] > 0.05  # one efficiency for both formats cannot fit them


def test_a_legacy_row_files_streaming_rate_stays_with_the_legacy_kernels():
    # The 0.5B's Q4_K_M file runs mostly legacy kernels (its rows do not fit K-quant blocks), the 1.5B's
    # real Q4_K rows: the rate the 0.5B's one- and two-slot anchors fit is the legacy kernels' (QK), and
    # the 1.5B's Q4_K_M keeps the machine's. Keyed by the weight format, the 0.5B's slow legacy streaming
    # set the 1.5B's (its two-slot TPOT came out far off)
    from pareto_atlas.calibrate.fit import _batched_formats, fit_params
    from pareto_atlas.simulate.cost_model import coeffs
    from pareto_atlas.simulate.kernels.layout import W_T
    from pareto_atlas.spec.knobs import Knobs

    big = shipped_models()["qwen2.5-1.5b"]
    assert kernel_format("Q4_K_M", big) == "Q4_K_M" != QK  # hidden 1536: K-quant blocks fit

    def rows(w, slots, cards):
        return pd.DataFrame(
            [dict(weights=w, slots=s, concurrency=s, prompt_tokens=128, output_tokens=32, n_requests=16) for s in slots]
        ).assign(card=cards)

    # the truth: legacy kernels stream at 0.3 of the card's bandwidth, the rest at TRUTH's 1.2 (no per-format key)
    legacy = replace(TRUTH, eff_bw=0.3, step_cv=0.0)
    rest = replace(TRUTH, step_cv=0.0)
    parts = [(rows("Q4_K_M", (1, 2), "small"), M, legacy), (rows("F16", (1, 2), "small"), M, rest)]
    parts += [(rows("Q4_K_M", (1,), "big"), big, rest)]
    held = rows("Q4_K_M", (2,), "big")
    for df, card, truth in parts + [(held, big, rest)]:
        pred = predict(_anchors(df), card, CPU, truth)
        for i, t in enumerate(TARGETS):
            df[t] = pred[:, i]
    df = pd.concat([p[0] for p in parts], ignore_index=True)
    cards = [M if c == "small" else big for c in df.card]
    assert _batched_formats(_anchors(df), cards) == ["F16", QK]
    p, _ = fit_params(df, cards, CPU, start=replace(TRUTH, step_cv=0.0), fit_cv=False, head_ratio_starts=(2.0,))
    assert p.bw_eff("Q4_K_M", M) == pytest.approx(0.3, rel=0.15)
    # and informs the other legacy kernels, which no anchor here batched (their family's rate), not a K-quant's
    assert p.bw_eff("Q8_0") == pytest.approx(p.bw_eff("Q4_K_M", M)) == p.bw_eff("Q4_0", big)
    assert p.bw_eff("Q4_K_M", big) == p.bw_eff("Q3_K", big) == p.eff_bw == pytest.approx(1.2, rel=0.15)
    # the cost model streams each model's rows at its kernels' rate
    w_t = {c.hidden: coeffs(c, CPU, Knobs(weights="Q4_K_M"), p)[W_T] for c in (M, big)}
    assert w_t[896] == pytest.approx(
        M.matmul_params * M.bits_per_weight("Q4_K_M") / 8 / (CPU.mem_bw_gbs * 1e9 * p.bw_eff("Q4_K_M", M))
    )
    assert w_t[1536] == pytest.approx(
        big.matmul_params * big.bits_per_weight("Q4_K_M") / 8 / (CPU.mem_bw_gbs * 1e9 * p.eff_bw)
    )
    # the 1.5B's two-slot TPOT, held out, from its one-slot anchor and the machine's rate
    got = predict(_anchors(held), big, CPU, p)[0, TARGETS.index("tpot_p50_ms")]
    assert got == pytest.approx(held.tpot_p50_ms.iloc[0], rel=0.05)
