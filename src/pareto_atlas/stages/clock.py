"""The build's clock: each stage's time, the elapsed total, and an ETA for the stages still to run (from
the last build's recorded times, else from first-build estimates)."""

from __future__ import annotations

import json
import time

from pareto_atlas.spec.study import Study
from pareto_atlas.stages.context import Context
from pareto_atlas.stages.estimates import FIRST_GUESS_S, TOOLS_BUILD_S
from pareto_atlas.stages.llama_tools import tools_to_build


def _work(study: Study, stage: str) -> float:
    """Units of work of a stage in FIRST_GUESS_S's terms."""
    if stage == "measure":
        return sum(a.repeats or study.load.repeats for a in study.arms)
    if stage == "quality":
        return sum(1 for a in study.arms if a.quality) * (study.quality.n + sum(study.quality.tasks.values()))
    if stage == "kld":
        return len({a.knobs().quality_key() for a in study.arms}) + 1
    if stage == "evict":  # the full cache and each (policy, keep), each a pass over the items
        return 1 + len(study.eviction.policies) * len(study.eviction.keeps)
    return 1.0


class BuildClock:
    """Each stage's time, the elapsed total and an ETA for the stages still to run."""

    def __init__(self, ctx: Context, stages: list[str]):
        self.ctx, self.stages, self.t0 = ctx, stages, time.monotonic()
        self.path = ctx.out / "build_times.json"
        try:
            self.last = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.last = {}
        self.took: dict[str, float] = {}

    def guess(self, stage: str) -> float:
        if stage in self.last:
            return float(self.last[stage])
        extra = 0.0
        if stage == "quality" and "kld" in self.stages:
            extra = TOOLS_BUILD_S if tools_to_build() else 0.0
        return FIRST_GUESS_S[stage] * _work(self.ctx.study, stage) + extra

    def start(self) -> None:
        eta = sum(self.guess(st) for st in self.stages)
        src = "the last build's times" if self.last else "first-build guesses"
        self.ctx.console.print(
            f"[bold]build[/] {self.ctx.study.name}: stages {', '.join(self.stages)}; ETA ~{eta / 60:.0f} min ({src})",
            highlight=False,
        )

    def done(self, stage: str, t_stage: float) -> None:
        self.took[stage] = round(time.monotonic() - t_stage, 1)
        rest = self.stages[self.stages.index(stage) + 1 :]
        eta = sum(self.guess(st) for st in rest)
        self.ctx.console.print(
            f"[dim]── {stage}: {self.took[stage]:.0f} s · elapsed {(time.monotonic() - self.t0) / 60:.1f} min"
            + (f" · ETA ~{eta / 60:.1f} min for {', '.join(rest)}" if rest else "")
            + "[/]",
            highlight=False,
        )
        try:
            self.path.write_text(json.dumps({**self.last, **self.took}, indent=1))
        except OSError:
            pass
