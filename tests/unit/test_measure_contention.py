"""Other work beside an anchor is measured, a contended anchor is measured again and the quieter try
kept, and calibration leaves contended anchors out (measure.contention)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import psutil
import pytest

from pareto_atlas.measure.campaign import anchor_row, finish_row, plan, run_campaign
from pareto_atlas.measure.contention import CONTENDED_CORES, ContentionMeter
from pareto_atlas.spec.study import load_study
from pareto_atlas.store import Store

BUSY = "import time\nt = time.time()\nwhile time.time() - t < {s}: pass"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/stat is Linux's")
def test_a_busy_neighbour_is_other_work_and_the_engines_work_is_not():
    # Two meters over the same window, beside one busy process this test starts: one takes it for the
    # engine, the other does not know it. Whatever else the machine runs meanwhile (CI shares it) is
    # the same for both, so their difference is that process alone.
    child = subprocess.Popen([sys.executable, "-c", BUSY.format(s=3.0)])
    try:
        time.sleep(0.3)  # interpreter start-up
        with ContentionMeter(None) as blind, ContentionMeter(child.pid) as aware:
            time.sleep(1.5)
    finally:
        child.wait()
    blind, aware = blind.result, aware.result
    child_cores = aware.own_cores - blind.own_cores
    assert child_cores > 0.1, f"the busy process got {child_cores:.2f} cores"
    # the engine's work is the measurement's own; a neighbour's is other work, to the tick (10 ms)
    assert blind.other_cores - aware.other_cores == pytest.approx(child_cores, abs=0.05)
    assert blind.other_cores >= child_cores - 0.05
    if child_cores > CONTENDED_CORES + 0.05:
        assert blind.contended
    for r in (blind, aware):
        assert ("CONTENDED" in r.line()) == r.contended


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/stat is Linux's")
def test_this_process_is_the_measurements_own_work():
    before = psutil.Process().cpu_times()
    with ContentionMeter(None) as own:
        t = time.time()
        while time.time() - t < 1.0:
            pass
    after = psutil.Process().cpu_times()
    spent = (after.user + after.system - before.user - before.system) / own.result.wall_s
    assert spent > 0.1 and own.result.own_cores == pytest.approx(spent, abs=0.05)


class _Tries:
    """What measures one anchor (run_campaign's measure_fn): each comes out with the given other-work
    figures, try after try."""

    def __init__(self, study, others: dict[str, list[float]]):
        self.study, self.others, self.calls = study, others, []

    def __call__(self, study, p, on_progress, bandwidth_gbs):
        cores = self.others[p.arm.name].pop(0)
        self.calls.append(p.arm.name)
        row = anchor_row(study, p)
        m = {"ttft": {"p50": 100.0 * (1 + cores)}, "other_cpu_cores": cores, "contended": cores > CONTENDED_CORES}
        row.update(status="ok", metrics_json=json.dumps(m))
        return finish_row(row, time.monotonic()), []


def test_a_contended_anchor_is_measured_again_and_the_quieter_try_kept(tmp_path):
    study = load_study("tiny")
    arms = [p.arm.name for p in plan(study)][:3]
    # first arm: contended, then quiet (kept); second: quiet once; third: contended twice, the
    # second try worse (the first is kept)
    others = {arms[0]: [1.2, 0.02], arms[1]: [0.03], arms[2]: [0.6, 0.9]}
    ex = _Tries(study, others)
    events = []
    with Store(tmp_path / "s.duckdb") as s:
        summary = run_campaign(
            study, s, arms=arms, measure_fn=ex, on_progress=lambda ev, info: events.append((ev, info))
        )
        kept = {r.arm: json.loads(r.metrics_json)["other_cpu_cores"] for r in s.anchors(study.name).itertuples()}
    assert ex.calls == [arms[0], arms[1], arms[2], arms[0], arms[2]]
    assert summary.measured == 3 and summary.remeasured == 2
    assert kept == {arms[0]: 0.02, arms[1]: 0.03, arms[2]: 0.6}
    again = [info for ev, info in events if ev == "remeasured"]
    assert [(a["arm"], a["kept"]) for a in again] == [(arms[0], "new"), (arms[2], "first")]
