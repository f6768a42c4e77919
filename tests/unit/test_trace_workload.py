"""Trace workloads end to end without an engine: the study field, the anchor's identity, the
campaign replaying the trace under the per-request contract, calibration's replay, and the sweep."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pareto_atlas.calibrate.fit import _anchors, predict
from pareto_atlas.calibrate.stage import attach_load
from pareto_atlas.measure import campaign
from pareto_atlas.measure.fakeserver import FakeBehaviour, FakeOpenAIServer
from pareto_atlas.simulate.api import simulate_trace
from pareto_atlas.simulate.params import default_params
from pareto_atlas.simulate.space import Load, Space, Workload
from pareto_atlas.simulate.sweep import sweep
from pareto_atlas.spec.cards import shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.spec.study import StudyError, load_study, parse_study
from pareto_atlas.spec.trace import shipped_traces, trace_rows, typical_lengths
from pareto_atlas.store import Store
from pareto_atlas.store.points import measured_points

REPO = Path(__file__).resolve().parents[2]
STUDY = """
name = "t"
[model]
name = "smollm2-135m-instruct"
card = "smollm2-135m"
[workload]
{workload}
[[arms]]
name = "a"
{arm}
"""


def study(workload: str = "", arm: str = "", base: Path | None = None):
    return parse_study(STUDY.format(workload=workload, arm=arm), "t.toml", base)


def write_trace(path: Path, rows: list[tuple[float, int, int]]) -> Path:
    path.write_text("arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{t},{p},{o}\n" for t, p, o in rows))
    return path


def test_the_shipped_trace_is_what_its_script_makes_and_is_real_shaped():
    p = subprocess.run(
        [sys.executable, str(REPO / "scripts/make_example_trace.py"), "--check"], capture_output=True, text=True
    )
    assert p.returncode == 0, p.stderr
    rows = trace_rows("chat_small")
    assert "chat_small" in shipped_traces() and 40 <= len(rows) <= 60
    assert all(64 <= r.prompt_tokens <= 256 and 16 <= r.output_tokens <= 64 for r in rows)
    gaps = np.diff([r.arrival_s for r in rows])
    assert rows[-1].arrival_s < 240 and gaps.std() / gaps.mean() > 0.8  # bursty, a few minutes


def test_a_trace_workload_takes_its_lengths_from_the_trace(tmp_path):
    s = study('name = "chat"\ntrace = "chat_small"')
    assert (s.workload.prompt_tokens, s.workload.output_tokens) == typical_lengths(trace_rows("chat_small"))
    assert s.arms[0].n_requests(s.load, s.workload) == 48
    # a relative path is read from the study file's folder
    write_trace(tmp_path / "mine.csv", [(0.0, 20, 4), (0.5, 30, 6)])
    s = study('trace = "mine.csv"', base=tmp_path)
    assert Path(s.workload.trace) == tmp_path / "mine.csv" and s.workload.prompt_tokens == 25
    # an arm's own trace or lengths make its own workload
    s = study(arm='trace = "chat_small"\nrequests = 5')
    wl = s.arms[0].workload(s.workload)
    assert wl.name == "chat_small" and s.arms[0].n_requests(s.load, wl) == 5
    s = study(arm="prompt_tokens = 512\noutput_tokens = 64")
    assert s.arms[0].workload(s.workload).name == "p512-n64"


@pytest.mark.parametrize(
    "workload, arm, match",
    [
        ('trace = "nope.csv"', "", r"t.toml: workload: trace: 'nope.csv' is not allowed: a shipped trace \(chat_small"),
        ('trace = "chat_small"\nprompt_tokens = 100', "", "workload: prompt_tokens: the trace's rows give the lengths"),
        (
            'trace = "chat_small"',
            "concurrency = 2",
            "arms.a: a trace gives the arrivals; leave concurrency and rate_rps out",
        ),
        ('trace = "chat_small"', "prompt_tokens = 64", "arms.a: the workload replays a trace"),
        ("", 'trace = "chat_small"\nrate_rps = 1.0', "arms.a: a trace gives the arrivals"),
    ],
)
def test_trace_errors_name_the_field_and_what_is_allowed(workload, arm, match):
    with pytest.raises(StudyError, match=match) as e:
        study(workload, arm)
    assert "\n" not in str(e.value)


def test_an_anchor_is_keyed_by_the_traces_content_not_its_path(tmp_path):
    def in_folder(name: str, rows: list) -> object:
        (tmp_path / name).mkdir()
        write_trace(tmp_path / name / "x.csv", rows)
        return study('trace = "x.csv"', base=tmp_path / name)

    rows = [(0.0, 20, 4), (0.5, 30, 6)]
    a, b, c = in_folder("a", rows), in_folder("b", rows), in_folder("c", rows[:1] * 2)
    ids = [campaign.anchor_id(s, s.arms[0], 0) for s in (a, b, c)]
    assert ids[0] == ids[1] != ids[2]
    ident = campaign.workload_ident(a.workload)
    assert ident["trace"] == "x" and len(ident["trace_sha256"]) == 64 and str(tmp_path) not in json.dumps(ident)
    plain = load_study("default")  # studies without traces keep the ids they had  (an unset share is left out)
    assert campaign.workload_ident(plain.workload) == plain.workload.model_dump(exclude={"trace", "share"})


def test_a_trace_anchor_replays_every_row_under_its_own_contract(tmp_path, monkeypatch):
    # arrivals spread over 1.2 s, the last after a gap of 0.96 s
    rows = [(0.0, 24, 3), (0.2, 40, 5), (0.24, 16, 2), (1.2, 32, 4)]
    trace = write_trace(tmp_path / "t.csv", rows)
    monkeypatch.setattr(campaign, "served_model", lambda study, arm: (Path("fake.gguf"), "0" * 64, 1, 4.5))
    beh = FakeBehaviour(prefill_s=0.01, token_s=0.002)
    with FakeOpenAIServer(beh) as srv, Store(tmp_path / "s.duckdb") as store:
        s = parse_study(
            STUDY.format(workload=f'trace = "{trace}"', arm="")
            + f'[engine]\nname = "openai"\nbase_url = "{srv.base_url}"\noptions = {{check = false}}\n',
            "t.toml",
        )
        summary = campaign.run_campaign(s, store)
        assert summary.measured == 1, summary.failures
        aid = campaign.plan(s)[0].anchor_id
        recs = [r for r in store.requests(aid) if not r["warmup"]]
        row = store.anchors("t").iloc[0]
        df = attach_load(measured_points(s, store), store)
    assert [(r["prompt_tokens"], r["completion_tokens"]) for r in recs] == [(p, o) for _, p, o in rows]
    assert all(r["ok"] for r in recs)
    # each row goes at its own time: never early, in order, late by less than the 0.96 s gap before the
    # last row (a loaded runner wakes late, by tens to a hundred ms), and that gap is kept, so a replay
    # that sent every row at once, or ignored the arrivals, fails
    sends = np.array([r["send_ts"] for r in recs])
    due = np.array([t for t, _, _ in rows])
    late = (sends - sends[0]) - due
    assert (late > -0.02).all() and (np.diff(sends) >= 0).all() and (late < 0.5).all(), late
    assert sends[3] - sends[2] > 0.5, sends
    assert json.loads(row.workload_json)["trace"] == "t" and json.loads(row.load_json)["concurrency"] == 0
    # calibration replays the same requests: their send times and their own lengths
    (a,) = _anchors(df)
    assert a.concurrency == 0 and a.prompts == (24, 40, 16, 32) and a.outputs == (3, 5, 2, 4) and len(a.sends) == 4


def test_calibration_and_the_sweep_replay_a_trace_as_it_is():
    model, hw = shipped_models()["smollm2-135m"], shipped_hardware()["L4"]
    params, knobs = default_params(hw), Knobs(weights="F16", slots=2)
    rows = trace_rows("chat_small")
    t, p, o = (np.array(c) for c in zip(*[(r.arrival_s, r.prompt_tokens, r.output_tokens) for r in rows]))
    direct = simulate_trace(model, hw, knobs, t, p, o, params).summary
    wl = Workload("chat", *typical_lengths(rows), tuple(zip(t.tolist(), p.tolist(), o.tolist())))
    pts = sweep(Space(model, (hw,), (knobs,), (wl,), (Load(trace=True),)), {hw.name: params})
    assert pts.concurrency.iloc[0] == 0 and pts.ttft_p50_ms.iloc[0] == pytest.approx(direct["ttft_p50_ms"])
    assert pts.throughput_tok_s.iloc[0] == pytest.approx(direct["throughput_tok_s"])
    # the fit's replay of a trace anchor uses each request's own lengths, not the typical pair
    import pandas as pd

    base = {
        "weights": "F16",
        "slots": 2,
        "prompt_tokens": wl.prompt_tokens,
        "output_tokens": wl.output_tokens,
        "concurrency": 0,
        "send_offsets": t.tolist(),
        "think_s": [],
    }
    own, typical = _anchors(
        pd.DataFrame([{**base, "req_prompt_tokens": p.tolist(), "req_output_tokens": o.tolist()}, base])
    )
    pred = predict([own, typical], model, hw, params)
    assert pred[0][0] == pytest.approx(direct["ttft_p50_ms"], rel=1e-6) and pred[0][0] != pred[1][0]
    with pytest.raises(ValueError, match="has none"):
        sweep(Space(model, (hw,), (knobs,), (Workload("w", 128, 32),), (Load(trace=True),)), {hw.name: params})


def test_an_open_loop_anchor_has_no_clients_so_calibration_replays_it():
    # A Poisson arm was stored with the arm's default concurrency of 1, which made the fit simulate it as
    # a closed loop: a saturated throughput set against one limited by the arrivals.
    s = study(arm="rate_rps = 0.15")
    assert json.loads(campaign.anchor_row(s, campaign.plan(s)[0])["load_json"])["concurrency"] == 0
    import pandas as pd

    (a,) = _anchors(
        pd.DataFrame(
            [
                {
                    "weights": "Q4_0",
                    "slots": 2,
                    "prompt_tokens": 128,
                    "output_tokens": 32,
                    "concurrency": 0,
                    "rate_rps": 0.15,
                    "send_offsets": [0.0, 3.1, 9.4],
                    "think_s": [],
                }
            ]
        )
    )
    assert a.sends == (0.0, 3.1, 9.4) and a.concurrency == 0
