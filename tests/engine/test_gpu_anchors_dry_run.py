"""scripts/gpu_anchors.py, the prepared GPU campaign, run on the CPU with a tiny model (--dry-run): the
same torch code path (random Qwen2 weights, prefill, decode steps on a growing cache, FP8 matmuls
through torch._scaled_mm, the linear layers' GEMMs) in seconds, its anchors loaded into a study's
store and calibrated, so the script is known to run before a GPU is lent for it."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_anchors.py"
VLLM_PYTHON = Path(__file__).resolve().parents[2] / ".venv-vllm" / "bin" / "python"


def torch_python() -> str:
    """An interpreter with torch and transformers: $PARETO_ATLAS_TORCH_PYTHON, this one (`make test-slow`
    installs them), else vLLM's venv."""
    if os.environ.get("PARETO_ATLAS_TORCH_PYTHON"):
        return os.environ["PARETO_ATLAS_TORCH_PYTHON"]
    if importlib.util.find_spec("torch") and importlib.util.find_spec("transformers"):
        return sys.executable
    if VLLM_PYTHON.is_file():
        return str(VLLM_PYTHON)
    pytest.skip("no torch + transformers here: scripts/setup.sh slow or make setup-vllm installs them")


def test_dry_run_times_every_path_and_its_anchors_calibrate(tmp_path):
    out = tmp_path / "dry.json"
    res = subprocess.run(
        [torch_python(), str(SCRIPT), "--dry-run", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    data = json.loads(out.read_text())
    # a CPU's timings are never written under a GPU's name
    assert data["engine"] == "torch-eager" and data["dry_run"] and data["hardware"] == "this-cpu"
    assert data["host"]["torch"] and "vllm" in data["host"]
    recs = data["records"]
    assert {(r["matmuls"], r["batch"]) for r in recs} == {("bf16", 1), ("bf16", 2), ("fp8", 1), ("fp8", 2)}
    assert all(r["fp8_linears"] == 14 for r in recs if r["matmuls"] == "fp8")  # 7 linears x 2 layers
    for r in recs:
        assert r["prefill_s"] > 0 and r["decode_step_s_median"] > 0 and len(r["decode_step_s"]) == 3
        assert r["achieved_gbs"] > 0 and r["decode_ctx_last"] == r["decode_ctx_first"] + 3

    gemms = {g["gemm"] for g in data["gemms"]}
    assert gemms == {"qkv", "o", "gate_up", "down", "lm_head"} and all(g["s"] > 0 for g in data["gemms"])
    assert [a["row"]["arm"] for a in data["anchors"]] == [
        "torch-bf16-b1",
        "torch-bf16-b2",
        "torch-fp8-b1",
        "torch-fp8-b2",
    ]

    # back here: into a study naming the same card, then one fit for (this-cpu, torch-eager)
    card = "\n".join(f"{k} = {str(v).lower() if isinstance(v, bool) else v}" for k, v in data["card_fields"].items())
    study = tmp_path / "tiny-gpu.toml"
    study.write_text(f'name = "tiny-gpu"\n[model]\nname = "tiny"\n[model.card]\n{card}\n[[arms]]\nname = "a"\n')
    env = {**os.environ, "PYTHONPATH": str(SCRIPT.parents[1] / "src")}
    res = subprocess.run(
        [sys.executable, str(SCRIPT), "load", str(out), "--study", str(study), "--out", str(tmp_path / "atlas")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert res.returncode == 0 and "4 anchors on this-cpu (torch-eager)" in res.stdout, res.stderr[-2000:]
    res = subprocess.run(
        [sys.executable, "-m", "pareto_atlas", "calibrate", "--study", str(study), "--out", str(tmp_path / "atlas")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert "calibration this-cpu / torch-eager: 4 anchors fitted" in res.stderr
    assert "calibrated on 4 measured anchors (this-cpu)" in res.stderr
