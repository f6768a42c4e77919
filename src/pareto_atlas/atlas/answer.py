"""The atlas's answer to a study's questions, as one frozen value: the points with their derived
columns (derived once, here or by the caller), the regimes, the frontier marks, the winner of each
cell and the boundary and projected cases beside them.

    answer = Answer.of(with_derived(points), regimes, allow_priors=False, study_ref=ref)
    answer.cells, answer.boundary, answer.marked, answer.pick(Question.make("tpot_p99_ms<=40"))

`pareto-atlas atlas` prints it (atlas.tables), `pick` asks it questions and the report writes it
(report.build); none of them derives the points again. Each part is computed the first time it is
read: `pick` reads no winners unless it reprices.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from pareto_atlas.atlas.evidence import StudyRef
from pareto_atlas.atlas.frontier import frontier
from pareto_atlas.atlas.objectives import DEFAULT_OBJECTIVES, Objective
from pareto_atlas.atlas.pick import PickResult, best_under, reprice
from pareto_atlas.atlas.question import Question
from pareto_atlas.atlas.regimes import Regime
from pareto_atlas.atlas.winners import ALL, boundary_of, model_column, projected_of, winner_cells


@dataclass(frozen=True)
class Answer:
    # cached_property fills the instance's __dict__ directly, so the frozen value computes each part
    # once and never changes: every part is a function of these fields
    points: pd.DataFrame  # derived (objectives.with_derived), indexed 0..n-1
    regimes: tuple[Regime, ...]
    allow_priors: bool = False  # points resting only on priors may win
    study_ref: str | StudyRef = "default"  # how the confirm commands name the study
    objectives: tuple[Objective, ...] = DEFAULT_OBJECTIVES

    @classmethod
    def of(
        cls,
        points: pd.DataFrame,
        regimes: Sequence[Regime],
        *,
        allow_priors: bool = False,
        study_ref: str | StudyRef = "default",
        objectives: Sequence[str | Objective] = DEFAULT_OBJECTIVES,
    ) -> "Answer":
        """The answer over a derived points table (the caller derived it, once)."""
        return cls(
            points.reset_index(drop=True),
            tuple(regimes),
            allow_priors,
            study_ref,
            tuple(Objective.parse(o) for o in objectives),
        )

    @cached_property
    def cells(self) -> pd.DataFrame:
        """One row per (regime, model, workload, card) and per (regime, model, workload, "all"):
        winners.WINNER_COLUMNS."""
        return winner_cells(self.points, self.regimes, allow_priors=self.allow_priors, study_ref=self.study_ref)

    @cached_property
    def best_cells(self) -> pd.DataFrame:
        """The best-card cells ("all") alone: what a repricing compares, without the per-card ones."""
        if "cells" in self.__dict__:
            return self.cells[self.cells.hardware == ALL].reset_index(drop=True)
        return winner_cells(
            self.points, self.regimes, per_hardware=False, allow_priors=self.allow_priors, study_ref=self.study_ref
        )

    @cached_property
    def uncrowned(self) -> pd.DataFrame:
        """The cells whose best point is not crowned: a tie with its runner-up (both named) or a
        winner whose latency or throughput bar is wider than ±50 % (winners.verdict)."""
        return self.cells[self.cells.verdict.isin(("tie", "low-confidence"))].reset_index(drop=True)

    @cached_property
    def placed_cells(self) -> pd.DataFrame:
        """The cells with `win_hardware`: the card each winner runs on (a best-card cell's winner
        is on one of them)."""
        hw_of = dict(zip(self.points.point_id, self.points.hardware))
        return self.cells.assign(win_hardware=self.cells.point_id.map(hw_of).fillna(""))

    @cached_property
    def boundary(self) -> pd.DataFrame:
        """Points whose quality interval straddles a regime's floor, and what the verdict changes."""
        return boundary_of(self.points, self.regimes, self.cells)

    @cached_property
    def projected(self) -> pd.DataFrame:
        """Per card cell, the projected points (resting on priors) that would beat its winner."""
        return projected_of(self.points, self.regimes, self.cells, study_ref=self.study_ref)

    @cached_property
    def marked(self) -> pd.DataFrame:
        """The frontier marks over the objectives, per (model, workload)."""
        return frontier(self.points, self.objectives)

    @cached_property
    def marked_per_hardware(self) -> pd.DataFrame:
        """The frontier marks per (model, workload, card)."""
        return frontier(self.points, self.objectives, by=("workload", "hardware"))

    @cached_property
    def prefix_moves(self) -> pd.DataFrame:
        """Per regime winner of a workload that shares prefixes, with the cache allowed and without
        (atlas.prefix.regime_moves); empty where no workload shares."""
        from pareto_atlas.atlas.prefix import regime_moves

        return regime_moves(self)

    @cached_property
    def models(self) -> np.ndarray:
        """Each point's model ("" for a table that predates the column)."""
        return model_column(self.points)

    def pairs(self) -> list[tuple[str, str]]:
        """The (model, workload) pairs the atlas answers for, in the points' order."""
        both = pd.DataFrame({"model": self.models, "workload": self.points["workload"].astype(str).to_numpy()})
        return list(both.drop_duplicates().itertuples(index=False, name=None))

    def pick(self, question: Question, *, top: int = 5) -> PickResult:
        """The best admitted point for one question, and its runners-up (atlas.pick)."""
        return best_under(question.select(self.points), question, top=top, study_ref=self.study_ref)

    def repriced(self, prices: Mapping[str, float], price_date: str = "") -> "Answer":
        """The same answer with new $/hour for the named cards, cost re-derived from throughput."""
        return Answer(
            reprice(self.points, prices, price_date), self.regimes, self.allow_priors, self.study_ref, self.objectives
        )
