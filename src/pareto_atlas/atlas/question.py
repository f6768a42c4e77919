"""One question put to the atlas, as one frozen value: for which model and workload, on which cards,
optimising what, under which constraints, quality floor and KL limit, and whether priors may win.

    Question.make("tpot_p99_ms<=40", "cost_per_mtok", model="qwen2.5-7b-instruct")

`pick` answers it from the points table; the same question can be asked of a repriced table, of
another study's points, or once per (model, workload) the atlas answers for.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from pareto_atlas.atlas.constraints import Constraint, ConstraintError, parse_constraints
from pareto_atlas.atlas.objectives import DEFAULT_DIRECTION, OBJECTIVE_COLUMNS
from pareto_atlas.atlas.regimes import DEFAULT_QUALITY_FLOOR, Regime


@dataclass(frozen=True)
class Question:
    objective: str = "cost_per_mtok"
    direction: str = ""  # "" -> the objective's natural direction
    constraints: tuple[Constraint, ...] = ()
    model: str | None = None  # None: every model the points answer for
    workload: str | None = None  # None: every workload
    hardware: tuple[str, ...] = ()  # (): every card
    quality_floor: float | None = DEFAULT_QUALITY_FLOOR  # of quality_rel; None switches the guard off
    kld_max: float | None = None
    allow_priors: bool = False

    def __post_init__(self) -> None:
        if self.objective not in DEFAULT_DIRECTION:
            raise ConstraintError(
                f"objective {self.objective!r}: not an objective column; allowed: {', '.join(OBJECTIVE_COLUMNS)}"
            )
        if not self.direction:
            object.__setattr__(self, "direction", DEFAULT_DIRECTION[self.objective])
        if self.direction not in ("min", "max"):
            raise ConstraintError(f"direction {self.direction!r}: allowed: min, max")
        # a floor the user stated as a constraint (quality_rel >= x) is the guard's floor
        for c in self.constraints:
            if c.column == "quality_rel" and c.op in (">=", ">"):
                object.__setattr__(self, "quality_floor", float(c.value))
                break

    @classmethod
    def make(
        cls, constraints: str | Iterable[str | Constraint] | None = None, objective: str = "cost_per_mtok", **kw
    ) -> "Question":
        """A question from a constraint string (or clauses) and keyword fields."""
        return cls(objective=objective, constraints=parse_constraints(constraints), **kw)

    def regime(self, name: str = "pick") -> Regime:
        return Regime(name, self.objective, self.direction, self.constraints, self.quality_floor, kld_max=self.kld_max)

    def about(self, **kw) -> "Question":
        """The same question about another model, workload or set of cards."""
        return replace(self, **kw)

    def select(self, points: pd.DataFrame) -> pd.DataFrame:
        """The points this question is about; a model, workload or card the table lacks is an error
        naming what it has."""
        keep = np.ones(len(points), bool)
        for field, column, want in (
            ("model", "model", (self.model,) if self.model is not None else ()),
            ("workload", "workload", (self.workload,) if self.workload is not None else ()),
            ("hardware", "hardware", self.hardware),
        ):
            if not want:
                continue
            have = (
                points[column].fillna("").astype(str) if column in points.columns else pd.Series("", index=points.index)
            )
            missing = sorted(set(want) - set(have))
            if missing:
                raise ConstraintError(
                    f"{field} {missing[0]!r}: no points for it; known: {', '.join(sorted(set(have)))}"
                )
            keep &= have.isin(want).to_numpy()
        return points[keep]

    def describe(self) -> str:
        cons = ", ".join(str(c) for c in self.constraints) or "none"
        guard = f"quality_rel>={self.quality_floor:g}" if self.quality_floor is not None else "off"
        about = " · ".join(x for x in (self.model, self.workload, ",".join(self.hardware)) if x)
        return (
            f"{'minimise' if self.direction == 'min' else 'maximise'} {self.objective} | constraints: {cons} | "
            f"quality guard: {guard}" + (f" | {about}" if about else "")
        )
