"""Anchors of a parallel deployment: the parallelism an arm states reaches vLLM's flags and the anchor's
knobs, an endpoint study names the layout of the server it measures, and calibration predicts each
anchor on its own layout (replicas share the load) and reports its error per parallelism."""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from pareto_atlas import stages
from pareto_atlas.calibrate.fidelity import support
from pareto_atlas.calibrate.fit import TARGETS, _Anchor, predict
from pareto_atlas.measure.engines.base import ArmLaunch
from pareto_atlas.measure.engines.vllm import cpu_threads_bind, vllm_argv
from pareto_atlas.measure.fakeserver import FakeBehaviour, FakeOpenAIServer
from pareto_atlas.measure.resolve import parse_study
from pareto_atlas.simulate.params import default_params
from pareto_atlas.spec.cards import shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_anchors.py"
LLAMA_ID = "meta-llama/Llama-3.1-8B-Instruct"


def _flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_the_arms_parallelism_becomes_vllms_flags_and_a_second_spelling_must_agree():
    argv = vllm_argv(ArmLaunch(model_path="m", knobs=Knobs(weights="BF16", tp=4, pp=2, replicas=2)), 1)
    assert (
        _flag(argv, "--tensor-parallel-size"),
        _flag(argv, "--pipeline-parallel-size"),
        _flag(argv, "--data-parallel-size"),
    ) == ("4", "2", "2")
    one = vllm_argv(ArmLaunch(model_path="m", knobs=Knobs(weights="BF16")), 1)
    assert not {"--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size"} & set(one)
    same = ArmLaunch(model_path="m", knobs=Knobs(weights="BF16", tp=2), extra={"tensor_parallel_size": 2})
    assert _flag(vllm_argv(same, 1), "--tensor-parallel-size") == "2"
    with pytest.raises(ValueError, match=r"^launch.extra.tensor_parallel_size: 2 differs from the arm's tp 1"):
        vllm_argv(ArmLaunch(model_path="m", knobs=Knobs(weights="BF16"), extra={"tensor_parallel_size": 2}), 1)


def test_on_a_cpu_each_rank_gets_its_own_cores():
    assert cpu_threads_bind(2, 1) == "0-1" and cpu_threads_bind(2, 2) == "0|1" and cpu_threads_bind(8, 2) == "0-3|4-7"


def _script():
    spec = importlib.util.spec_from_file_location("gpu_anchors", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_gpu_anchors_states_the_parallelism_in_every_arm_and_refuses_what_the_host_cannot_run(tmp_path):
    g = _script()
    args = argparse.Namespace(tp=4, pp=1, replicas=2, hardware="H100-SXM", model_label=None)
    study = parse_study(g.vllm_study_toml(args, "llama-3.1-8b", tmp_path / "ckpt", tmp_path / "tok", True), "x")
    assert [a.name for a in study.arms] == ["bf16-tp4-replicas2-c1", "bf16-tp4-replicas2-c8", "fp8-tp4-replicas2-c1"]
    assert all((a.knobs().tp, a.knobs().pp, a.knobs().replicas) == (4, 1, 2) for a in study.arms)
    # the parallelism keys the anchor: a TP4 anchor is never taken for a TP1 one
    assert json.loads(json.dumps(study.arms[0].knobs().to_dict()))["tp"] == 4
    eight = {"gpus": [{"name": "H100"}] * 8}
    g.check_parallel(args, eight, use_vllm=True)
    with pytest.raises(SystemExit, match=r"= 8 GPUs; this host has 4"):
        g.check_parallel(args, {"gpus": [{"name": "H100"}] * 4}, use_vllm=True)
    with pytest.raises(SystemExit, match=r"need the vLLM path"):
        g.check_parallel(args, eight, use_vllm=False)
    with pytest.raises(SystemExit, match=r"--tp 3: allowed: an integer >= 1, a power of two"):
        g.check_parallel(argparse.Namespace(tp=3, pp=1, replicas=1), eight, use_vllm=True)


def test_calibration_predicts_a_replicated_anchor_as_one_replica_under_its_share():
    m, hw = shipped_models()["llama-3.1-8b"], shipped_hardware()["H100-SXM"]
    p = default_params(hw)
    two = predict([_Anchor(Knobs(weights="BF16", slots=8, replicas=2), 512, 64, 8, 0.0, 32)], m, hw, p)[0]
    one = predict([_Anchor(Knobs(weights="BF16", slots=8), 512, 64, 4, 0.0, 32)], m, hw, p)[0]
    thr = TARGETS.index("throughput_tok_s")
    assert np.allclose(np.delete(two, thr), np.delete(one, thr)) and two[thr] == pytest.approx(2 * one[thr])
    tp4 = predict([_Anchor(Knobs(weights="BF16", slots=8, tp=4), 512, 64, 4, 0.0, 32)], m, hw, p)[0]
    assert tp4[TARGETS.index("tpot_p50_ms")] < one[TARGETS.index("tpot_p50_ms")]  # its own layout, not TP1's


def test_an_endpoint_study_names_its_servers_parallelism_and_calibration_keeps_layouts_apart(
    tmp_path: Path, monkeypatch
):
    """A user's own TP4 x 2 server measured through its endpoint beside a one-GPU one: the anchors record
    their layout, the fit predicts each on it, and the report gives each layout its own error; a layout
    no other anchor shares is an extrapolation in leave-one-out, never averaged in as supported."""
    from pareto_atlas.measure import contention

    # the layouts are what is checked, not the machine: an anchor left out as contended (a busy or stolen
    # core beside the fake server) would drop a layout's count
    monkeypatch.setattr(contention, "CONTENDED_CORES", float("inf"))
    srv = FakeOpenAIServer(FakeBehaviour(prefill_s=0.01, token_s=0.002, model_id=LLAMA_ID)).start()
    arms = (
        '[[arms]]\nname = "tp1-c1"\nweights = "BF16"\n'
        '[[arms]]\nname = "tp1-c2"\nweights = "BF16"\nslots = 2\nconcurrency = 2\n'
        '[[arms]]\nname = "tp4x2-c1"\nweights = "BF16"\ntp = 4\nreplicas = 2\n'
        '[[arms]]\nname = "tp4x2-c4"\nweights = "BF16"\ntp = 4\nreplicas = 2\nslots = 2\nconcurrency = 4\n'
    )
    study_file = tmp_path / "ep.toml"
    study_file.write_text(
        f'name = "ep"\n[model]\nname = "m"\nserved = "{LLAMA_ID}"\ncard = "llama-3.1-8b"\n'
        f'[engine]\nname = "openai"\nbase_url = "{srv.base_url}"\nhardware = "H100-PCIe"\n'
        f'[workload]\nprompt_tokens = 24\noutput_tokens = 8\n[load]\nrequests = 4\nwarmup = 1\n{arms}'
    )
    # on H100-PCIe: its published fit (one engine, 8 rows) takes seconds where H100-SXM's takes a minute
    console = Console(record=True, width=240)
    try:
        with stages.Context.open(str(study_file), tmp_path / "out", console) as ctx:
            stages.measure(ctx)
            stages.calibrate(ctx)
            anchors = ctx.store.anchors("ep")
            cal = ctx.store.calibrations("ep")
    finally:
        srv.stop()
    knobs = {a.arm: json.loads(a.knobs_json) for a in anchors.itertuples()}
    assert (knobs["tp4x2-c4"]["tp"], knobs["tp4x2-c4"]["replicas"]) == (4, 2) and "tp" not in knobs["tp1-c1"]
    out = console.export_text()
    assert "per parallelism" in out and "  one GPU: 2 anchors" in out and "  TP4 × 2 replicas: 2 anchors" in out
    fid = json.loads(cal.fidelity_json.iloc[0])
    assert {r["arm"] for r in fid["anchors"]} == {"tp1-c1", "tp1-c2", "tp4x2-c1", "tp4x2-c4"}


def test_a_layout_the_training_anchors_lack_is_an_extrapolation():
    import pandas as pd

    train = pd.DataFrame([{**Knobs(weights="BF16").as_row(), "prompt_tokens": 24}])
    row = pd.Series({**Knobs(weights="BF16", tp=4).as_row(), "prompt_tokens": 24})
    assert support(train, row) == "parallelism TP4"
    assert support(train, pd.Series({**Knobs(weights="BF16").as_row(), "prompt_tokens": 24})) == ""


@pytest.mark.parametrize(
    ("card", "hardware", "layout", "error"),
    [
        ("smollm2-135m", "H100-PCIe", "tp = 2", r"arms\.a\.tp: 2 does not divide smollm2-135m's 9 attention heads$"),
        ("qwen2.5-7b", "H100-SXM", "tp = 8", r"arms\.a\.tp: 8 does not divide qwen2\.5-7b's 28 attention heads$"),
        ("llama-3.1-8b", "H100-SXM", "attn_dp = 2", r"arms\.a\.attn_dp: llama-3\.1-8b is a dense model"),
        (
            "mixtral-8x7b",
            "H100-SXM",
            "ep = 16\nattn_dp = 16",
            r"arms\.a\.ep: 16 does not divide mixtral-8x7b's 8 experts$",
        ),
        ("llama-3.1-8b", "H100-SXM", "tp = 16", r"arms\.a\.tp x pp: 16 GPUs per worker exceed H100-SXM's 8 per node"),
    ],
)
def test_an_endpoint_studys_stated_layout_must_fit_its_card_and_node(card, hardware, layout, error):
    """A user's TP2 server of a 9-head model cannot exist: the study says so in one line before anything
    is measured, instead of calibrating anchors under a layout no engine serves."""
    from pareto_atlas.spec.study import StudyError

    head = (
        f'name = "ep"\n[model]\nname = "m"\ncard = "{card}"\n[engine]\nname = "openai"\n'
        f'base_url = "http://127.0.0.1:9"\nhardware = "{hardware}"\n[[arms]]\nname = "a"\nweights = "BF16"\n'
    )
    with pytest.raises(StudyError, match=error):
        parse_study(head + layout + "\n", "ep")
    parse_study(head, "ep")  # the same study on one GPU is fine


def test_a_tp4_anchors_decode_bandwidth_is_held_against_its_four_gpus(tmp_path: Path):
    """An endpoint's TP4 server reads a step's weights from four GPUs at once: its decode bandwidth is
    held against theirs together, not one GPU's (which overstated the fraction four times)."""
    from pareto_atlas.measure.campaign import AnchorPlan, anchor_id, measure_anchor

    hw = shipped_hardware()["H100-PCIe"]
    with FakeOpenAIServer(FakeBehaviour(prefill_s=0.01, token_s=0.002, model_id=LLAMA_ID)) as srv:
        study = parse_study(
            f'name = "bw"\n[model]\nname = "m"\nserved = "{LLAMA_ID}"\ncard = "llama-3.1-8b"\n'
            f'[engine]\nname = "openai"\nbase_url = "{srv.base_url}"\nhardware = "H100-PCIe"\n'
            f"[workload]\nprompt_tokens = 24\noutput_tokens = 8\n[load]\nrequests = 3\nwarmup = 1\n"
            f'[[arms]]\nname = "tp4"\nweights = "BF16"\ntp = 4\n[[arms]]\nname = "tp1"\nweights = "BF16"\n',
            "bw",
        )
        lines = {}
        for arm in study.arms:
            row, _ = measure_anchor(study, AnchorPlan(anchor_id(study, arm, 0), arm, 0), lambda ev, info: None)
            m = json.loads(row["metrics_json"])
            achieved = m["model_bytes"] / (m["tpot"]["p50"] / 1e3) / 1e9
            gpus = arm.knobs().tp
            assert m["decode_bw_fraction"] == pytest.approx(achieved / (gpus * hw.mem_bw_gbs))
            lines[arm.name] = m["decode_bw_line"]
    assert "of the memory bandwidth of the 4 GPUs a tensor-parallel step reads" in lines["tp4"]
    assert f"of {4 * hw.mem_bw_gbs:.1f} GB/s" in lines["tp4"]
    assert "of the machine's memory bandwidth" in lines["tp1"] and f"of {hw.mem_bw_gbs:.1f} GB/s" in lines["tp1"]


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--model", "nosuch"], r"--model 'nosuch': not a card of spec/models\.toml; allowed: .*llama-3\.1-8b"),
        (["--hardware", "NOPE"], r"--hardware 'NOPE': not a card of spec/hardware\.toml; allowed: .*H200"),
        (["--tp", "0"], r"--tp 0: allowed: an integer >= 1, a power of two"),
        (["--tp", "8", "--model", "qwen2.5-7b"], r"--tp: 8 does not divide qwen2\.5-7b's 28 attention heads"),
        (["--tp", "8", "--dry-run"], r"--tp: 8 does not divide tiny's 4 attention heads"),
        (["--tp", "8", "--pp", "2", "--model", "llama-3.1-70b", "--hardware", "H100-SXM"], r"16 GPUs per worker"),
    ],
)
def test_gpu_anchors_refuses_a_bad_card_or_layout_in_one_line_before_probing_the_host(tmp_path, argv, error):
    """What no host could run is refused before torch is looked for: on a host without torch every
    mistake read 'this Python has no torch', and with it an unknown card was a KeyError traceback."""
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, str(SCRIPT), *argv, "--path", "torch", "--out", str(tmp_path / "a.json")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1 and not (tmp_path / "a.json").exists()
    assert '"host"' not in r.stdout and "Traceback" not in r.stderr  # refused before the host was probed
    assert re.fullmatch(rf"gpu_anchors: .*{error}.*\n", r.stderr)


def test_an_moe_anchors_decode_reads_the_experts_one_token_runs_not_all_it_stores(tmp_path: Path):
    """Qwen3-30B-A3B's token runs 8 of 128 experts a layer: one sequence's decode step reads its 3.0 B
    active matmul weights, not the 30.2 B stored (the line said 60441 MB a step, 749 % of an H100's
    bandwidth, on a fake server that streams a token every 2 ms)."""
    from pareto_atlas.measure.campaign import AnchorPlan, anchor_id, measure_anchor

    card = shipped_models()["qwen3-30b-a3b"]
    with FakeOpenAIServer(FakeBehaviour(prefill_s=0.01, token_s=0.002, model_id="q")) as srv:
        study = parse_study(
            f'name = "moebw"\n[model]\nname = "m"\nserved = "q"\ncard = "qwen3-30b-a3b"\n'
            f'[engine]\nname = "openai"\nbase_url = "{srv.base_url}"\nhardware = "H100-SXM"\n'
            f"[workload]\nprompt_tokens = 24\noutput_tokens = 8\n[load]\nrequests = 3\nwarmup = 1\n"
            f'[[arms]]\nname = "one"\nweights = "BF16"\n',
            "moebw",
        )
        arm = study.arms[0]
        row, _ = measure_anchor(study, AnchorPlan(anchor_id(study, arm, 0), arm, 0), lambda ev, info: None)
    m = json.loads(row["metrics_json"])
    assert m["model_bytes"] == card.matmul_params * 2  # what the model stores, at 16 bits
    assert f": {card.active_params * 2 / 1e6:.0f} MB read per step" in m["decode_bw_line"]
    achieved = card.active_params * 2 / (m["tpot"]["p50"] / 1e3) / 1e9
    assert m["decode_bw_fraction"] == pytest.approx(achieved / shipped_hardware()["H100-SXM"].mem_bw_gbs)
