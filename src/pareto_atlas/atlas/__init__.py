"""The atlas: error-bar-aware Pareto frontier, regimes with quality guards, winners, re-planning."""

from __future__ import annotations

from pareto_atlas.atlas.answer import Answer
from pareto_atlas.atlas.constraints import Constraint, ConstraintError, parse_constraints
from pareto_atlas.atlas.frontier import frontier, pareto_mask, projection
from pareto_atlas.atlas.objectives import DEFAULT_OBJECTIVES, Objective
from pareto_atlas.atlas.pick import PickResult, pick, reprice
from pareto_atlas.atlas.regimes import Regime, admission, default_regimes, regimes_from_study
from pareto_atlas.atlas.summary import frontier_frequency, stacked_vs_single
from pareto_atlas.atlas.winners import boundary_cases, winners

__all__ = [
    "Answer",
    "Constraint",
    "ConstraintError",
    "DEFAULT_OBJECTIVES",
    "Objective",
    "PickResult",
    "Regime",
    "admission",
    "boundary_cases",
    "default_regimes",
    "frontier",
    "frontier_frequency",
    "pareto_mask",
    "parse_constraints",
    "pick",
    "projection",
    "regimes_from_study",
    "reprice",
    "stacked_vs_single",
    "winners",
]
