"""Metric definitions (docs/metrics.md): percentiles, TPOT, gaps, throughput, goodput, P99 CI."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pareto_atlas.measure.metrics import Dist, derive_metrics, quantile_ci
from pareto_atlas.measure.records import RequestRecord


def rec(idx, send, ttft, gaps, n=None, P=10, ok=True, warmup=False, error=None, timings=None, prompt=None):
    chunks = [send + ttft]
    for g in gaps:
        chunks.append(chunks[-1] + g)
    n = len(chunks) if n is None else n
    return RequestRecord(
        idx=idx,
        warmup=warmup,
        send_ts=send,
        chunk_ts=tuple(chunks),
        first_token_ts=chunks[0],
        end_ts=chunks[-1],
        prompt_tokens=P if prompt is None else prompt,
        completion_tokens=n,
        ok=ok and error is None,
        error=error,
        server_timings=timings,
    )


def test_percentiles_use_linear_interpolation():
    v = [1.0, 2.0, 3.0, 4.0, 10.0]
    d = Dist.of(v)
    # linear: rank (n-1)q -> p90 between 4 and 10 at 0.6
    assert d.p50 == 3.0
    assert d.p90 == pytest.approx(4.0 + 0.6 * 6.0)
    assert d.p99 == pytest.approx(4.0 + 0.96 * 6.0)
    assert "linear" in derive_metrics([]).percentile_method


def test_tpot_is_e2e_minus_ttft_over_n_minus_1_and_excludes_one_token_requests():
    records = [rec(0, 0.0, 0.1, [0.02, 0.04, 0.03]), rec(1, 0.0, 0.2, [])]  # second: one token
    m = derive_metrics(records)
    assert m.tpot.n == 1
    assert m.tpot.p50 == pytest.approx((0.09 / 3) * 1e3)
    assert m.ttft.n == 2
    assert m.itl.n == 3 and m.itl.p50 == pytest.approx(30.0)


def test_warmup_excluded_and_contract_recheck_rejects():
    records = [rec(0, 0.0, 5.0, [5.0], warmup=True), rec(1, 0.0, 0.1, [0.01]), rec(2, 0.0, 0.1, [0.01], prompt=11)]
    m = derive_metrics(records, P=10, N=2)
    assert m.n_measured == 2 and m.n_ok == 1 and m.n_rejected == 1
    assert "prompt_tokens 11 != contract P=10" in dict(m.reject_reasons)
    assert m.ttft.p50 == pytest.approx(100.0)  # the warm-up's 5 s never enters


def test_throughput_goodput_and_errors():
    records = [
        rec(0, 0.0, 0.1, [0.1] * 9),
        rec(1, 0.5, 0.5, [0.1] * 9),
        RequestRecord(idx=2, warmup=False, send_ts=0.2, end_ts=0.3, error="ConnectError"),
    ]
    m = derive_metrics(records, slo={"ttft_ms": 200})
    span = 0.5 + 0.5 + 0.9  # first send 0.0 to last completion 1.9
    assert m.duration_s == pytest.approx(span)
    assert m.throughput_tok_s == pytest.approx(20 / span)
    assert m.n_errors == 1 and m.error_reasons == (("ConnectError", 1),)
    assert m.goodput_rps == pytest.approx(1 / span)  # only request 0 meets TTFT<=200 ms; the error fails
    with pytest.raises(ValueError, match="slo: unknown key 'ttft'"):
        derive_metrics(records, slo={"ttft": 1})


def test_server_cross_check_and_speculation_acceptance():
    t = {"prompt_ms": 90.0, "predicted_per_token_ms": 9.0, "draft_n": 10, "draft_n_accepted": 4}
    records = [rec(i, 0.0, 0.1, [0.01, 0.01], timings=t) for i in range(3)]
    m = derive_metrics(records)
    assert m.ttft_minus_server_prompt_ms_p50 == pytest.approx(10.0)
    assert m.tpot_minus_server_tpot_ms_p50 == pytest.approx(1.0)
    assert m.spec_draft_n == 30 and m.spec_acceptance == pytest.approx(0.4)


def test_p99_order_statistic_ci_covers_and_is_nan_when_unbounded():
    rng = np.random.default_rng(0)
    hits = 0
    for _ in range(200):
        x = rng.exponential(1.0, 1000)
        lo, hi = quantile_ci(x, 0.99)
        hits += lo <= -math.log(0.01) <= hi
    assert hits >= 180  # nominal 95 %
    lo, hi = quantile_ci(rng.exponential(1.0, 20), 0.99)
    assert math.isnan(hi)


def test_record_round_trip():
    r = rec(3, 1.0, 0.1, [0.01], timings={"prompt_ms": 1.0})
    d = r.to_dict()
    assert isinstance(d["chunk_ts"], list)
    assert RequestRecord.from_dict(d) == r
    with pytest.raises(ValueError, match="unknown field 'bogus'"):
        RequestRecord.from_dict({**d, "bogus": 1})
