"""The executor interface, and its in-process implementation: one job after another, here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Protocol

import pandas as pd

from pareto_atlas.measure.campaign import measure_here
from pareto_atlas.quality.campaign import score_here

if TYPE_CHECKING:
    from pareto_atlas.measure.campaign import AnchorPlan
    from pareto_atlas.simulate.params import CalibParams
    from pareto_atlas.simulate.space import Space
    from pareto_atlas.spec.study import ArmSpec, Study

Progress = Callable[[str, dict], None]
# (index in the plan, plan, store row, raw records)
AnchorResult = tuple[int, "AnchorPlan", dict, list[dict]]


class Executor(Protocol):
    def measure(self, study: Study, pending: Iterable[tuple[int, AnchorPlan]], n: int, on_progress: Progress,
                bandwidth_gbs: float | None) -> Iterator[AnchorResult]:
        """Measure each pending anchor; yield results as they finish. Never raises for a lost anchor:
        it comes back as a failed row with the reason."""
        ...

    def score(self, study: Study, pending: Iterable[tuple[ArmSpec, str, list[dict]]], n: int, items: list | None,
              on_progress: Progress) -> Iterator[tuple[ArmSpec, dict, list[dict]]]:
        """Score each pending (quality arm, qrun id, records saved by an earlier try); yield (arm, store
        row, item records) as they finish."""
        ...

    def sweep(self, space: Space, params: dict[str, CalibParams] | None, n_requests: int,
              seed: int = 0) -> pd.DataFrame:
        ...

    def close(self) -> None:
        ...


class InProcess:
    """Runs every job in this process, in order; `pending` is consumed lazily so each result is
    written before the next anchor's status is looked up, exactly as a plain loop would."""

    def measure(self, study, pending, n, on_progress, bandwidth_gbs):
        return measure_here(study, pending, n, on_progress, bandwidth_gbs)

    def score(self, study, pending, n, items, on_progress):
        return score_here(study, pending, n, items, on_progress)

    def sweep(self, space, params, n_requests, seed=0):
        from pareto_atlas.simulate.sweep import sweep   # numba compiles on first import: only when sweeping

        return sweep(space, params, n_requests=n_requests, seed=seed)

    def close(self) -> None:
        pass
