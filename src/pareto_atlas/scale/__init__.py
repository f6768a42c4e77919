"""Where the work runs: in this process (the default; Ray is never imported) or on a Ray cluster.

Both executors take the same jobs — measure anchors, score quality arms, sweep a space — and hand
results back to the caller, which alone writes the store.
"""

from __future__ import annotations

from pareto_atlas.scale.local import Executor, InProcess


def executor_for(ray: str | None) -> Executor:
    """`None`: in-process. `local`: a Ray cluster started in this process; `auto` or HOST:PORT: an existing one."""
    if not ray:
        return InProcess()
    from pareto_atlas.scale.ray_exec import RayExecutor   # lazily: Ray is an optional extra

    return RayExecutor.connect(ray)


__all__ = ["Executor", "InProcess", "executor_for"]
