"""The atlas answers a question once: a study's points are derived once (objectives.with_derived),
and `atlas`, `pick` and the report read the same answer object (atlas.answer) from there on."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from pareto_atlas.atlas import objectives
from pareto_atlas.atlas import stage as S
from pareto_atlas.atlas.answer import Answer
from pareto_atlas.atlas.evidence import quality_evidence
from pareto_atlas.atlas.question import Question
from pareto_atlas.atlas.winners import boundary_cases, projected_cases, winners
from pareto_atlas.spec.study import load_study
from pareto_atlas.store import Store
from synthetic import synthetic_points

POINTS = synthetic_points(seed=3, workloads=("chat-512-128", "rag-2048-128"), measured_fraction=0.3)
POINTS = POINTS.assign(quality_evidence=quality_evidence(POINTS))  # as the store's points table has it


@pytest.fixture()
def study_on_synthetic(tmp_path: Path, monkeypatch):
    """The default study over a synthetic points table (two workloads, three cards), in an empty store."""
    monkeypatch.setattr(S, "all_points", lambda study, store: POINTS.copy())
    with Store(tmp_path / "store.duckdb") as store:
        yield load_study("default"), store


@pytest.fixture()
def derivations(monkeypatch) -> list[int]:
    """Every call of with_derived, wherever a module imported it."""
    calls: list[int] = []
    real = objectives.with_derived

    def counted(points: pd.DataFrame) -> pd.DataFrame:
        calls.append(len(points))
        return real(points)

    for mod in [m for name, m in sys.modules.items() if name.startswith("pareto_atlas") and m is not None]:
        if getattr(mod, "with_derived", None) is real:
            monkeypatch.setattr(mod, "with_derived", counted)
    return calls


def _console() -> tuple[io.StringIO, Console]:
    buf = io.StringIO()
    return buf, Console(file=buf, width=200)


def test_the_atlas_derives_its_points_once(study_on_synthetic, derivations):
    study, store = study_on_synthetic
    buf, con = _console()
    cells = S.atlas_study(study, store, con)
    assert len(derivations) == 1 and derivations[0] == len(POINTS)
    assert cells.point_id.astype(bool).any() and "dominant configuration per regime" in buf.getvalue()


def test_pick_derives_once_for_every_model_and_workload_and_a_repricing(study_on_synthetic, derivations):
    study, store = study_on_synthetic
    buf, con = _console()
    S.pick_question(study, store, con, S.study_question(study, "tpot_p99_ms<=200"), ["L4=0.3"])
    out = buf.getvalue()
    assert out.count("winner: ") == 2 and "regime winners (best card) after repricing L4 $0.3/h" in out
    assert len(derivations) == 1


def test_the_report_derives_once_and_writes_what_the_atlas_prints(study_on_synthetic, derivations, tmp_path: Path):
    from pareto_atlas.report.stage import report_study

    study, store = study_on_synthetic
    paths = report_study(study, store, tmp_path / "report", Console(quiet=True))
    assert len(derivations) == 1
    printed = S.atlas_study(study, store, Console(quiet=True)).drop(columns="win_hardware")
    written = pd.read_json(paths["winners_json"], orient="records", dtype=False)
    assert list(written.point_id.fillna("")) == list(printed.point_id.fillna(""))


def test_the_answer_holds_what_the_functions_compute_one_by_one():
    pts = objectives.with_derived(POINTS)
    study = load_study("default")
    regs = S.study_regimes(study, pts)
    answer = Answer.of(pts, regs, study_ref="default")
    pd.testing.assert_frame_equal(answer.cells, winners(POINTS, regs))
    pd.testing.assert_frame_equal(answer.boundary, boundary_cases(POINTS, regs, answer.cells))
    pd.testing.assert_frame_equal(answer.projected, projected_cases(POINTS, regs, answer.cells))
    best = answer.cells[answer.cells.hardware == "all"].reset_index(drop=True)
    pd.testing.assert_frame_equal(Answer.of(pts, regs).best_cells, best)  # computed alone, the same cells
    q = Question.make("tpot_p99_ms<=200", workload="rag-2048-128")
    from pareto_atlas.atlas.pick import pick

    assert answer.pick(q).winner == pick(POINTS, question=q).winner
    cheaper = answer.repriced({"L4": 0.01}, "test")
    assert (
        cheaper.points.loc[cheaper.points.hardware == "L4", "cost_per_mtok"]
        < answer.points.loc[answer.points.hardware == "L4", "cost_per_mtok"]
    ).all()
    assert answer.points is not cheaper.points and (answer.points.price_per_hour != 0.01).all()
