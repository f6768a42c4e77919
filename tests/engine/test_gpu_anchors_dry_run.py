"""scripts/gpu_anchors.py, the prepared GPU check, run on the CPU with a tiny model (--dry-run): the
same code path (random Qwen2 weights, prefill, decode steps on a growing cache, FP8 matmuls through
torch._scaled_mm) in seconds, so the script is known to run before a GPU is lent for it."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_anchors.py"
VLLM_PYTHON = Path(__file__).resolve().parents[2] / ".venv-vllm" / "bin" / "python"


def torch_python() -> str:
    """An interpreter with torch and transformers: this one (`make test-slow` installs them), else vLLM's venv."""
    if importlib.util.find_spec("torch") and importlib.util.find_spec("transformers"):
        return sys.executable
    if VLLM_PYTHON.is_file():
        return str(VLLM_PYTHON)
    pytest.skip("no torch + transformers here: scripts/setup.sh slow or make setup-vllm installs them")


def test_dry_run_times_every_path(tmp_path):
    out = tmp_path / "dry.json"
    res = subprocess.run([torch_python(), str(SCRIPT), "--dry-run", "--out", str(out)], capture_output=True,
                         text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["engine"] == "torch-eager" and data["dry_run"] and data["hardware"] == "H200"
    recs = data["records"]
    assert {(r["matmuls"], r["batch"]) for r in recs} == {("bf16", 1), ("bf16", 2), ("fp8", 1), ("fp8", 2)}
    assert all(r["fp8_linears"] == 14 for r in recs if r["matmuls"] == "fp8")   # 7 linears x 2 layers
    for r in recs:
        assert r["prefill_s"] > 0 and r["decode_step_s_median"] > 0 and len(r["decode_step_s"]) == 3
        assert r["achieved_gbs"] > 0 and r["decode_ctx_last"] == r["decode_ctx_first"] + 3
