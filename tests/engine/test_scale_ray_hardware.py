"""On a local Ray cluster of two nodes (this CPU offering `hw:this-cpu`, a second node offering
`hw:H100-SXM`), with an OpenAI-compatible endpoint serving a Llama-3.1-8B card (the project's fake
server: no GPU can exist here): a study measuring on H100-SXM runs there, is stored, calibrated and
simulated as H100-SXM; a card no node has is a one-line error in seconds; a node lost mid-anchor
leaves that anchor failed with its reason while the rest is measured."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import pytest
from rich.console import Console

ray = pytest.importorskip("ray", reason="Ray not installed (pip install '.[ray]')")
from ray.cluster_utils import Cluster  # noqa: E402

from pareto_atlas import stages  # noqa: E402
from pareto_atlas.atlas.stage import study_points  # noqa: E402
from pareto_atlas.measure.campaign import measure_anchor, run_campaign  # noqa: E402
from pareto_atlas.measure.fakeserver import FakeBehaviour, FakeOpenAIServer  # noqa: E402
from pareto_atlas.scale.ray_exec import RayExecutor  # noqa: E402
from pareto_atlas.spec.study import load_study  # noqa: E402
from pareto_atlas.store import Store  # noqa: E402

pytestmark = [pytest.mark.engine, pytest.mark.slow]

LLAMA_ID = "meta-llama/Llama-3.1-8B-Instruct"
NODE_ARGS = {"object_store_memory": 80 * 2**20}


@pytest.fixture(scope="module")
def cluster():
    t0 = time.monotonic()
    c = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "resources": {"hw:this-cpu": 1}, "include_dashboard": False, **NODE_ARGS},
    )
    h100 = c.add_node(num_cpus=1, resources={"hw:H100-SXM": 1}, **NODE_ARGS)
    ray.init(address=c.address, logging_level=30)
    c.wait_for_nodes()
    print(f"\ncluster of 2 nodes: {time.monotonic() - t0:.1f} s")
    yield c, h100
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def endpoint():
    with FakeOpenAIServer(FakeBehaviour(prefill_s=0.01, token_s=0.002, model_id=LLAMA_ID)) as srv:
        yield srv


def write_study(path: Path, url: str, hardware: str = "H100-SXM", arms: str | None = None) -> Path:
    arms = arms or (
        '[[arms]]\nname = "bf16-c1"\nweights = "BF16"\n'
        '[[arms]]\nname = "bf16-c2"\nweights = "BF16"\nslots = 2\nconcurrency = 2\nrequests = 8\n'
        '[[arms]]\nname = "fp8-c1"\nweights = "FP8"\n'
    )
    path.write_text(
        f'name = "h100"\n[model]\nname = "llama-3.1-8b-instruct"\nserved = "{LLAMA_ID}"\n'
        f'card = "llama-3.1-8b"\n[engine]\nname = "openai"\nbase_url = "{url}"\nhardware = "{hardware}"\n'
        f'[workload]\nprompt_tokens = 32\noutput_tokens = 8\n[load]\nrequests = 4\nwarmup = 1\n'
        f'[simulate]\nhardware = ["H100-SXM"]\nconcurrency = [1, 4]\nn_requests = 20\nmax_configs = 40\n'
        f'{arms}'
    )
    return path


def test_a_study_on_h100_runs_on_the_h100_node_and_is_calibrated_and_simulated_as_h100(
    cluster, endpoint, tmp_path: Path
):
    c, h100 = cluster
    console = Console(record=True, width=240)
    with stages.Context.open(
        str(write_study(tmp_path / "h100.toml", endpoint.base_url)), tmp_path / "out", console, ray=c.address
    ) as ctx:
        stages.measure(ctx)
        anchors = ctx.store.anchors("h100")
        assert len(anchors) == 3 and set(anchors.status) == {"ok"} and set(anchors.hardware) == {"H100-SXM"}
        for hw in map(json.loads, anchors.hardware_json):
            assert hw["card"] == "H100-SXM" and hw["ray"]["node_id"] == h100.node_id
            assert hw["ray"]["resources"].get("hw:H100-SXM") == 1.0
            assert hw["endpoint"]["models"][0]["id"] == LLAMA_ID
        stages.calibrate(ctx)
        cal = ctx.store.calibrations("h100")
        mine = cal[~cal.calib_id.str.startswith("published-")]
        assert list(mine.hardware) == ["H100-SXM"] and list(mine.engine) == ["openai"]
        n = len(json.loads(mine.fidelity_json.iloc[0])["anchors"]) // 5  # a row per anchor and target
        out = console.export_text()
        assert "published fit on the measured anchors: TTFT" in out and "measured fit on the published anchors" in out
        stages.simulate(ctx)
        pts = study_points(ctx.study, ctx.store)
    sim = pts[pts.provenance == "simulated"]
    assert len(sim) and set(sim.hardware) == {"H100-SXM"}
    labels = set(sim.calib_provenance)
    assert len(labels) == 1 and re.match(rf"calibrated on {n} measured anchors \(H100-SXM\)", labels.pop())
    assert set(pts[pts.provenance == "measured"].hardware) == {"H100-SXM"}


def test_a_card_no_node_offers_is_a_one_line_error_within_seconds(cluster, endpoint, tmp_path: Path):
    study = load_study(write_study(tmp_path / "h200.toml", endpoint.base_url, hardware="H200"))
    t0 = time.monotonic()
    with Store(tmp_path / "s.duckdb") as s:
        with pytest.raises(ValueError) as e:
            run_campaign(study, s, executor=RayExecutor.connect("auto"))
        assert len(s.anchors("h100", status=None)) == 0
    assert time.monotonic() - t0 < 10
    msg = str(e.value)
    assert "\n" not in msg and "no node offers hardware H200 (resource 'hw:H200'" in msg and "hw:H100-SXM" in msg


def test_a_node_lost_mid_anchor_fails_that_anchor_with_its_reason_and_the_rest_goes_on(
    cluster, endpoint, tmp_path: Path
):
    c, _ = cluster
    l4 = c.add_node(num_cpus=1, resources={"hw:L4": 1}, **NODE_ARGS)
    c.wait_for_nodes()
    started = tmp_path / "started"
    arms = '[[arms]]\nname = "on-l4"\nweights = "BF16"\nhardware = "L4"\n[[arms]]\nname = "on-h100"\nweights = "BF16"\n'
    study = load_study(write_study(tmp_path / "lost.toml", endpoint.base_url, arms=arms))

    def measure(study, p, on_progress, bandwidth_gbs):
        if p.arm.hardware == "L4":  # the L4 anchor is under way when its node goes
            started.touch()
            time.sleep(300)
        return measure_anchor(study, p, on_progress, bandwidth_gbs)

    def kill_when_started() -> None:
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        c.remove_node(l4)

    killer = threading.Thread(target=kill_when_started, daemon=True)
    killer.start()
    t0 = time.monotonic()
    with Store(tmp_path / "s.duckdb") as s:
        summary = run_campaign(study, s, executor=RayExecutor(c.address, disconnect=False), measure_fn=measure)
        rows = s.anchors("h100", status=None).set_index("arm")
    killer.join(5)
    assert started.exists() and time.monotonic() - t0 < 120
    assert (summary.measured, summary.failed) == (1, 1), summary.failures
    assert rows.status["on-h100"] == "ok" and rows.hardware["on-h100"] == "H100-SXM"
    assert rows.status["on-l4"] == "failed" and rows.hardware["on-l4"] == "L4"
    assert rows.reason["on-l4"].startswith("lost on Ray (") and "L4" in rows.reason["on-l4"]
