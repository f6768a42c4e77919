"""On a fresh machine llama.cpp's tools are built after the anchors are measured, so an arm whose model
llama-quantize builds (the default's Q4_K kernel anchor) fails first; the build measures it once the
tools are done, and only it."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

import importlib
from pareto_atlas import stages
from pareto_atlas.spec.study import load_study
from pareto_atlas.store import Store
from pareto_atlas.store.db import now

build_stage = importlib.import_module("pareto_atlas.stages.build")  # the module: `stages.build` is also its function


def _failed(aid: str, study: str, arm: str, reason: str) -> dict:
    return {
        "anchor_id": aid,
        "study": study,
        "arm": arm,
        "repeat": 0,
        "status": "failed",
        "reason": reason,
        "knobs_json": "{}",
        "metrics_json": "{}",
        "started_at": now(),
        "finished_at": now(),
    }


def test_only_the_arms_that_waited_for_the_tools_are_measured_again(tmp_path: Path, monkeypatch):
    study = load_study("default")
    kernel_arm = next(a.name for a in study.arms if a.name.startswith("kq-"))
    other = study.arms[0].name
    asked: list[list[str]] = []
    monkeypatch.setattr(build_stage, "measure", lambda ctx, arms=None: asked.append(arms))
    buf = io.StringIO()
    with stages.Context(study, tmp_path, Store(tmp_path / "store.duckdb"), Console(file=buf, width=200)) as ctx:
        build_stage.measure_waiting_for_tools(ctx)
        assert asked == []  # nothing failed: nothing to measure again
        waited = f"model 'x' is quantized by llama.cpp's {build_stage.WAITED_FOR_TOOLS}"
        ctx.store.put_anchor(_failed("a1", study.name, kernel_arm, waited), [])
        ctx.store.put_anchor(_failed("a2", study.name, other, "engine exited during start: out of memory"), [])
        build_stage.measure_waiting_for_tools(ctx)
    assert asked == [[kernel_arm]]
    assert f"now that llama.cpp's tools are built: {kernel_arm}" in buf.getvalue()


def test_the_reason_the_build_looks_for_is_the_one_the_model_source_gives():
    import inspect

    from pareto_atlas.measure import weights

    assert build_stage.WAITED_FOR_TOOLS in inspect.getsource(weights._random_kquant)
