"""simulate asks for its GPU points' published fits by the engine that serves them (issue 31)."""

from __future__ import annotations

import pytest
from rich.console import Console

from pareto_atlas.spec.study import load_study


class _Asked(Exception):
    pass


@pytest.mark.parametrize(("engine", "serves"), [("trtllm", "trtllm"), ("sglang", "sglang"), ("vllm", "vllm")])
def test_simulate_asks_for_the_fit_of_the_engine_that_serves_its_gpu_points(tmp_path, monkeypatch, engine, serves):
    import pareto_atlas.calibrate.published_stage as ps
    from pareto_atlas.simulate.stage import simulate_study
    from pareto_atlas.store import Store

    study = load_study("llama70b")
    study = study.model_copy(update={"engine": study.engine.model_copy(update={"name": engine})})
    asked = []

    def spy(study, store, con, cards, **k):
        asked.append(k.get("engine"))
        raise _Asked

    monkeypatch.setattr(ps, "published_params", spy)
    with Store(tmp_path / "s.duckdb") as store, pytest.raises(_Asked):
        simulate_study(study, store, Console(quiet=True))
    assert asked == [serves]
