"""End to end: the tiny study through the real llama.cpp engine, all the way to the HTML atlas,
and the failure modes a user meets (bad study file, an engine that dies, a rerun)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pareto_atlas.store import Store

pytestmark = pytest.mark.engine

CLI = [sys.executable, "-m", "pareto_atlas"]
# The campaigns killed below run two of the tiny study's three arms: a kill and a resume need two
# anchors, and each anchor more is an engine start and a measurement (22-44 s a test here).
TWO_ARMS = ["--arm", "q4_1", "--arm", "q8_0"]


def run(args: list[str], timeout: float = 900, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + args, capture_output=True, text=True, timeout=timeout, **kw)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tiny")
    p = run(["build", "--study", "tiny", "--out", str(out)])
    assert p.returncode == 0, p.stderr[-3000:]
    return out


def test_build_writes_the_atlas(built: Path):
    for name in ("atlas.html", "frontier.csv", "winners.json"):
        assert (built / name).exists(), name
    winners = json.loads((built / "winners.json").read_text())
    regimes = winners["regimes"] if isinstance(winners, dict) and "regimes" in winners else winners
    assert regimes, "no regime winners"
    # models are an axis: each winner names its model; the GPU cards answer for the GPU-sized target only
    assert {w["model"] for w in regimes} == {"smollm2-135m-instruct", "llama-3.1-8b-instruct"}
    gpu = [w for w in regimes if w["hardware"] in ("L4", "H100-SXM")]
    assert gpu and {w["model"] for w in gpu} == {"llama-3.1-8b-instruct"}
    assert {w["workload"] for w in gpu} == {"chat-512-128"}
    assert all(w["hardware"] in ("this-cpu", "all") for w in regimes if w["model"] == "smollm2-135m-instruct")
    html = (built / "atlas.html").read_text()
    # one file that opens offline: no element loads anything from a host (the inlined plotly.js names a
    # few hosts in its own strings and licences, which load nothing; tests/browser sees no request at all)
    assert "measured" in html
    assert not re.findall(r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*[\"']?(?:https?:)?//", html, re.I)


def test_store_keeps_every_stage_with_provenance(built: Path):
    with Store(built / "store.duckdb") as s:
        anchors = s.anchors("tiny")
        assert len(anchors) == 3 and set(anchors.status) == {"ok"}
        assert anchors.model_sha256.str.len().min() == 64 and anchors.engine_version.notna().all()
        assert len(s.requests(anchors.anchor_id.iloc[0])) == 5  # 4 measured + 1 warm-up, raw
        assert len(s.quality_runs("tiny")) >= 1
        # the measured anchors calibrated this CPU (the published GPU fits alone would fill the table)
        cals = s.calibrations("tiny")
        measured = cals[(cals.hardware == "this-cpu") & ~cals.calib_id.str.startswith("published-")]
        assert len(measured) == 1, cals[["calib_id", "hardware", "n_anchors"]].to_string()
        assert 2 <= measured.n_anchors.iloc[0] <= len(anchors)
        assert "measured anchors" in json.loads(measured.params_json.iloc[0])["provenance"]
        sim = s.sim_points(study="tiny")
        assert len(sim) > 0 and set(sim.provenance) <= {"simulated", "prior"}


def test_rerun_keeps_finished_anchors(built: Path):
    p = run(["measure", "--study", "tiny", "--out", str(built)], timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "3 kept from earlier runs" in p.stderr and "0 measured" in p.stderr


def test_corrupt_study_is_one_line(tmp_path: Path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n[model]\nname = "smollm2-135m-instruct"\n[[arms]]\nname = "a"\nweights = "Q9"\n')
    p = run(["build", "--study", str(bad), "--out", str(tmp_path / "o")], timeout=60)
    assert p.returncode == 2
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "arms.0" in lines[0] and "Q9" in lines[0] and "Traceback" not in p.stderr


def test_engine_killed_mid_campaign_fails_that_anchor_and_rerun_resumes(tmp_path: Path):
    out = tmp_path / "kill"
    proc = subprocess.Popen(
        CLI + ["measure", "--study", "tiny", *TWO_ARMS, "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # kill the first engine worker we catch alive, a moment after it appears (an arm of the
    # tiny study lasts only seconds, so a worker may finish before we reach it: try the next)
    killed = False
    deadline = time.monotonic() + 120
    while not killed and time.monotonic() < deadline and proc.poll() is None:
        ps = subprocess.run(["pgrep", "-f", "llamacpp_worker", "-P", str(proc.pid)], capture_output=True, text=True)
        if ps.stdout.strip():
            time.sleep(0.5)
            try:
                os.kill(int(ps.stdout.split()[0]), signal.SIGKILL)
                killed = True
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    assert killed, "no engine worker could be killed"
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-2000:]
    assert "failed" in err and "Traceback" not in err
    with Store(out / "store.duckdb") as s:
        all_ = s.anchors("tiny", status=None)
        assert (all_.status == "failed").sum() == 1 and (all_.status == "ok").sum() == 1
        assert all_.loc[all_.status == "failed", "reason"].iloc[0]
    p = run(["measure", "--study", "tiny", *TWO_ARMS, "--out", str(out)], timeout=300)
    assert p.returncode == 0 and "1 measured, 1 kept" in p.stderr, p.stderr[-2000:]


# `make test-slow`: the default run checks the same on a fake OpenAI server, where an anchor takes a
# second, not tens (tests/unit/test_store_damage.py::test_a_campaign_killed_with_sigkill_resumes_without_remeasuring)
@pytest.mark.slow
def test_campaign_killed_with_sigkill_resumes_without_remeasuring(tmp_path: Path):
    out = tmp_path / "sigkill"
    proc = subprocess.Popen(
        CLI + ["measure", "--study", "tiny", *TWO_ARMS, "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    first_ok = ""
    for line in proc.stderr:  # the first anchor's line ends when it is written to the store
        if " ok " in line:
            first_ok = line
            break
    proc.kill()  # SIGKILL: no cleanup, no atexit, nothing flushed on the way out
    proc.wait(timeout=30)
    assert first_ok, "no anchor finished before the kill"
    p = run(["measure", "--study", "tiny", *TWO_ARMS, "--out", str(out)], timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    kept = int(p.stderr.split(" kept from earlier runs")[0].rsplit(",", 1)[-1].strip().split()[0])
    assert kept >= 1 and "0 failed" in p.stderr
    with Store(out / "store.duckdb") as s:
        assert (s.anchors("tiny").status == "ok").sum() == 2


# `make test-slow`: the default run checks the same, and that only the missing items are asked again, on a
# fake server (tests/unit/test_resume_stages.py::test_quality_stopped_midway_resumes_asking_only_the_items_it_had_not_saved)
@pytest.mark.slow
def test_quality_arm_stopped_midway_keeps_its_finished_items(tmp_path: Path):
    from pareto_atlas.quality.campaign import run_quality_campaign
    from pareto_atlas.spec.study import load_study

    study = load_study("tiny")

    class Stop(KeyboardInterrupt):
        pass

    def stop_after_first_item(ev: str, info: dict) -> None:
        if ev == "item":  # fires after the item's record was handed over to be saved
            raise Stop

    with Store(tmp_path / "store.duckdb") as s:
        with pytest.raises(Stop):
            run_quality_campaign(study, s, on_progress=stop_after_first_item)
        assert s.quality_runs("tiny", status=None).empty  # the arm did not finish...
        saved = s.con.execute("SELECT count(*) FROM quality_items").fetchone()[0]
        assert saved >= 1  # ...but what it scored is kept
        run_quality_campaign(study, s)
        run = s.quality_runs("tiny")
        summary = json.loads(run.summary_json.iloc[0])
        assert summary["kept_from_earlier_try"] == saved and summary["n"] == 3
        assert len(s.quality_items(run.qrun_id.iloc[0])) == 3
