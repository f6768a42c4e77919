"""Load generator: patterns, TTFT definition, warm-up, errors recorded not raised, traces."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pareto_atlas.measure.fakeserver import FakeBehaviour, FakeOpenAIServer
from pareto_atlas.measure.loadgen import load_trace, poisson_schedule, run_load_sync
from pareto_atlas.spec.think import think_times


def prompts(n: int, P: int = 8) -> list[str]:
    return [" ".join([f"r{i}"] + ["w"] * (P - 1)) for i in range(n)]


def test_poisson_schedule_is_seeded_and_has_the_rate():
    a, b = poisson_schedule(50.0, 2000, seed=1), poisson_schedule(50.0, 2000, seed=1)
    assert a == b and a != poisson_schedule(50.0, 2000, seed=2)
    assert np.all(np.diff(a) > 0)
    assert 2000 / a[-1] == pytest.approx(50.0, rel=0.1)
    with pytest.raises(ValueError, match="rate_rps"):
        poisson_schedule(0, 3)


def test_trace_csv_and_jsonl(tmp_path):
    csv_path = tmp_path / "t.csv"
    csv_path.write_text("timestamp,input_len,output_len\n12.5,10,3\n10.0,20,4\n")
    rows = load_trace(csv_path)
    assert [(r.arrival_s, r.prompt_tokens, r.output_tokens) for r in rows] == [(0.0, 20, 4), (2.5, 10, 3)]
    jl = tmp_path / "t.jsonl"
    jl.write_text("\n".join(json.dumps(d) for d in [{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 2}]))
    assert load_trace(jl)[0].prompt_tokens == 5
    bad = tmp_path / "bad.csv"
    bad.write_text("arrival_s,prompt_tokens\n0,5\n")
    with pytest.raises(ValueError, match="line 2: missing column 'output_tokens'"):
        load_trace(bad)


def test_ttft_ignores_role_and_empty_chunks_and_warmup_is_flagged():
    beh = FakeBehaviour(prefill_s=0.05, token_s=0.005, empty_first_chunk=True)
    with FakeOpenAIServer(beh) as srv:
        for api in ("chat", "completions"):
            seen = []
            recs = run_load_sync(srv.base_url, prompts(4), 5, concurrency=2, warmup=1, api=api, on_record=seen.append)
            assert [r.warmup for r in recs] == [True, False, False, False] and len(seen) == 4
            for r in recs:
                assert r.ok, r
                assert r.ttft_s >= 0.05  # the role-only/empty chunks came at once; they must not count
                assert len(r.chunk_ts) == 5 and r.first_token_ts == r.chunk_ts[0]
                assert r.server_timings["prompt_ms"] == pytest.approx(50.0)


def test_poisson_and_trace_patterns_send_on_schedule(tmp_path):
    with FakeOpenAIServer() as srv:
        recs = run_load_sync(srv.base_url, prompts(21), 2, rate_rps=10.0, warmup=1, seed=4)
        sched = poisson_schedule(10.0, 20, seed=4)
        sends = np.array([r.send_ts for r in recs[1:]])
        lag = np.abs((sends - sends[0]) - (np.array(sched) - sched[0]))
        # Against a 2-second schedule (0.1 s between arrivals on average), sending all at once would
        # lag ~1 s at the median: bounds of half a mean gap separate the two by 20x and leave room for a
        # loaded runner's late wake-ups (tens of ms), which a 0.4-second schedule and 30 ms did not.
        assert np.median(lag) < 0.05 and np.percentile(lag, 90) < 0.15
        tr = tmp_path / "t.csv"
        tr.write_text("arrival_s,prompt_tokens,output_tokens\n0,8,2\n0.3,8,3\n")
        recs = run_load_sync(srv.base_url, prompts(3), None, trace=tr, warmup=1, prompt_tokens=8)
        assert [r.completion_tokens for r in recs] == [2, 2, 3] and all(r.ok for r in recs)
        assert recs[2].send_ts - recs[1].send_ts == pytest.approx(0.3, abs=0.1)


def test_errors_are_recorded_not_raised():
    recs = run_load_sync("http://127.0.0.1:9", prompts(3), 2, concurrency=2, warmup=0, timeout_s=2)
    assert len(recs) == 3 and all(not r.ok and r.error for r in recs)
    assert all("\n" not in r.error for r in recs)


def test_request_timeout_is_an_error():
    with FakeOpenAIServer(FakeBehaviour(prefill_s=2.0)) as srv:
        recs = run_load_sync(srv.base_url, prompts(1), 2, concurrency=1, warmup=0, timeout_s=0.3)
    assert recs[0].error == "timeout after 0.3 s"


def test_exactly_one_pattern():
    with pytest.raises(ValueError, match="exactly one of"):
        run_load_sync("http://x", prompts(1), 1, concurrency=1, rate_rps=2.0)


def test_closed_loop_clients_pause_their_seeded_think_times_before_each_send():
    beh = FakeBehaviour(prefill_s=0.04, token_s=0.002)
    with FakeOpenAIServer(beh) as srv:
        recs = run_load_sync(srv.base_url, prompts(9), 3, concurrency=2, warmup=1, think="auto", seed=3)
        again = run_load_sync(srv.base_url, prompts(9), 3, concurrency=2, warmup=1, think=0.2, seed=3)
    assert recs[0].think_s == 0.0 and all(r.ok for r in recs)
    # "auto": the warm-up's TTFT is the mean; the pauses are the seeded draws, in request order
    mean = recs[0].ttft_s
    assert [r.think_s for r in recs[1:]] == pytest.approx(list(think_times(mean, 8, seed=3)))
    assert [r.think_s for r in again[1:]] == pytest.approx(list(think_times(0.2, 8, seed=3)))
    # each client's first request leaves after its pause, each later one a pause after one of them ended
    # (to 0.1 s: half the mean pause, so a skipped or doubled pause still shows, and a loaded runner's
    # late wake-ups do not)
    sends = sorted((r.send_ts, r.think_s) for r in again[1:])
    t_start = again[0].end_ts
    ends = [r.end_ts for r in again[1:]]
    for send, think in sends:
        starts = [t_start] + [e for e in ends if e <= send]
        assert any(0 <= send - s - think < 0.1 for s in starts), (send, think)
    # no pause when asked for none; a bad value is one line naming the field
    assert not think_times(0.0, 4).any()
    with pytest.raises(ValueError, match="think: 'soon'"):
        run_load_sync("http://x", prompts(2), 1, concurrency=2, think="soon")
