"""The built-in study measures a small eviction effect in `build` itself (its evict stage); without
torch the stage is a skip with a note, never a failed build; a study that does not ask has no stage."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from pareto_atlas import stages
from pareto_atlas.spec.study import load_study
from pareto_atlas.store import Store


def test_the_default_build_runs_an_eviction_stage_after_the_quality_stages():
    default = load_study("default")
    names = stages.build_stages(default)
    assert names.index("quality") < names.index("kld") < names.index("evict") < names.index("calibrate")
    assert "evict" not in stages.build_stages(default, with_quality=False)
    assert default.eviction.task == "retrieval" and default.eviction.policies and default.eviction.keeps
    assert "evict" not in stages.build_stages(load_study("sizes"))  # it does not ask
    paper = stages.build_stages(load_study("paper"))  # no arms: nothing measured
    assert paper == ["simulate", "atlas", "report"]


def test_without_torch_the_build_stage_skips_with_a_note(tmp_path: Path, monkeypatch):
    import pareto_atlas.quality.eviction.model as model

    def no_torch():
        raise ImportError("no module named torch")

    monkeypatch.setattr(model, "require_torch", no_torch)
    buf = io.StringIO()
    ctx = stages.Context(
        load_study("default"), tmp_path, Store(tmp_path / "store.duckdb"), Console(file=buf, width=200)
    )
    with ctx:
        stages.evict(ctx, required=False)
        assert ctx.store.eviction_points(ctx.study.name).empty
    assert "evict: skipped, torch is not installed" in buf.getvalue() and "projected" in buf.getvalue()
