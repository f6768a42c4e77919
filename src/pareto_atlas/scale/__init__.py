"""Where the work runs: in this process (the default; Ray is never imported) or on a Ray cluster.

Both run any job: a task, the jobs, the hardware card each needs (scale.local.Executor). The campaigns
(measure.campaign.measure_on, quality.campaign.score_on) and the sweep (simulate.shards.sweep_on) hand
theirs in and take the results back; the caller alone writes the store. scale imports none of them.
"""

from __future__ import annotations

from pareto_atlas.scale.local import Executor, InProcess


def executor_for(ray: str | None) -> Executor:
    """`None`: in-process. `local`: a Ray cluster started in this process; `auto` or HOST:PORT: an existing one."""
    if not ray:
        return InProcess()
    from pareto_atlas.scale.ray_exec import RayExecutor  # lazily: Ray is an optional extra

    return RayExecutor.connect(ray)


__all__ = ["Executor", "InProcess", "executor_for"]
