"""On a local Ray cluster (2 CPUs, this machine offering `hw:this-cpu`): a real campaign against
llama.cpp and a sharded sweep give what the in-process run gives, and a worker that dies mid-campaign
loses nothing that finished."""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

ray = pytest.importorskip("ray", reason="Ray not installed (pip install '.[ray]')")

from pareto_atlas.atlas.frontier import frontier  # noqa: E402
from pareto_atlas.calibrate.stage import model_card  # noqa: E402
from pareto_atlas.measure.campaign import measure_anchor, plan, run_campaign  # noqa: E402
from pareto_atlas.scale import InProcess  # noqa: E402
from pareto_atlas.scale.ray_exec import RayExecutor  # noqa: E402
from pareto_atlas.simulate.shards import sweep_on  # noqa: E402
from pareto_atlas.simulate.stage import study_hardware, study_space  # noqa: E402
from pareto_atlas.spec.study import load_study  # noqa: E402
from pareto_atlas.store import Store  # noqa: E402

pytestmark = pytest.mark.engine

ARMS = ["q4_1", "q8_0"]
# Facts that differ between two runs of the same anchor: clocks, and the engine's port and pid.
VOLATILE = {"started_at", "finished_at", "campaign_id"}


@pytest.fixture(scope="module")
def cluster():
    t0 = time.monotonic()
    ex = RayExecutor.connect("local")
    print(f"\nray.init (local, 2 CPUs): {time.monotonic() - t0:.1f} s")
    yield ex
    ex.close()


@pytest.fixture(scope="module")
def study():
    return load_study("tiny")


def _provenance(js: str) -> dict:
    p = json.loads(js)
    p.pop("wall_s", None)
    p.pop("argv", None)  # carries the engine's port
    launch = p.get("launch")
    if isinstance(launch, dict):
        p["launch"] = {k: v for k, v in launch.items() if k not in ("port", "host")}
    return p


def _content(store: Store) -> pd.DataFrame:
    a = store.anchors("tiny", status=None).sort_values("anchor_id").reset_index(drop=True)
    a["provenance_json"] = a.provenance_json.map(_provenance)
    # where Ray placed a task (its node and resources) is the one thing an in-process run cannot have
    a["hardware_json"] = a.hardware_json.map(lambda js: {k: v for k, v in json.loads(js).items() if k != "ray"})
    a["n_requests"] = [len(store.requests(i)) for i in a.anchor_id]
    return a.drop(columns=[*VOLATILE, "metrics_json"])


def test_ray_campaign_and_sweep_equal_in_process(request, study, tmp_path: Path):
    stores = {}
    # the cluster starts after the in-process run, whose timings it would otherwise disturb
    for name, ex in (("in-process", InProcess()), ("ray", lambda: request.getfixturevalue("cluster"))):
        ex = ex() if callable(ex) else ex
        t0 = time.monotonic()
        with Store(tmp_path / f"{name}.duckdb") as s:
            summary = run_campaign(study, s, arms=ARMS, executor=ex)
            assert (summary.measured, summary.failed) == (2, 0), summary.failures
            stores[name] = _content(s)
        print(f"campaign of {len(ARMS)} anchors, {name}: {time.monotonic() - t0:.1f} s")
    local, remote = stores["in-process"], stores["ray"]
    assert list(local.anchor_id) == list(remote.anchor_id) and set(remote.status) == {"ok"}
    assert (remote.n_requests == study.load.requests + study.load.warmup).all()
    pd.testing.assert_frame_equal(local, remote)

    with Store(tmp_path / "in-process.duckdb") as s:
        space = study_space(study, study_hardware(study, s), model_card(study))
    # every 8th configuration of the study's ~4,000 (a sweep of all on 3 cards is ~20,000 points, 10-20 s a
    # pass here): still two shards, one a CPU, of every card, concatenated row for row
    space = replace(space, knobs=space.knobs[::8])
    n = study.simulate.n_requests
    t0 = time.monotonic()
    here = sweep_on(InProcess(), space, None, n)
    t1 = time.monotonic()
    there = sweep_on(ex, space, None, n)
    print(f"sweep of {len(here)} points: in-process {t1 - t0:.1f} s, ray {time.monotonic() - t1:.1f} s")
    assert len(here) > 1000 and set(here.hardware) == {"this-cpu", "L4", "H100-SXM"}
    pd.testing.assert_frame_equal(here, there, check_exact=True)
    objectives = ("tpot_p99_ms", "cost_per_mtok")
    f_here, f_there = frontier(here, objectives), frontier(there, objectives)
    pd.testing.assert_frame_equal(f_here, f_there, check_exact=True)
    assert f_here.raw_frontier.any()


def test_a_worker_dying_mid_campaign_loses_nothing_that_finished(cluster, study, tmp_path: Path):
    first, second = (p.anchor_id for p in plan(study, ARMS))
    marker = tmp_path / "died-once"

    def dies(study, p, on_progress, bandwidth_gbs):
        # The first anchor's worker dies once (Ray retries it); the second's dies every time.
        if p.anchor_id == second or (p.anchor_id == first and not marker.exists()):
            marker.touch()
            os._exit(1)
        return measure_anchor(study, p, on_progress, bandwidth_gbs)

    with Store(tmp_path / "store.duckdb") as s:
        flaky = RayExecutor("local", max_retries=1, disconnect=False)
        summary = run_campaign(study, s, arms=ARMS, executor=flaky, measure_fn=dies)
        assert (summary.measured, summary.failed) == (1, 1), summary.failures
        assert s.anchor_status(first) == "ok" and len(s.requests(first)) == study.load.requests + study.load.warmup
        lost = s.anchors("tiny", status="failed")
        assert list(lost.anchor_id) == [second] and s.requests(second) == []
        assert lost.reason.iloc[0].startswith("lost on Ray (") and "died" in lost.reason.iloc[0].lower()

        rerun = run_campaign(study, s, arms=ARMS, executor=cluster)
        assert (rerun.skipped, rerun.measured, rerun.failed) == (1, 1, 0)
        assert set(s.anchors("tiny", status=None).status) == {"ok"}
