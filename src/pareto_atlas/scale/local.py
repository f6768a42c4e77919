"""The executor interface, and its in-process implementation: one job after another, here.

An executor runs jobs it knows nothing about: a task (a module-level function, so that it can be sent to
another process), the jobs, the hardware card each job needs, and what a job that comes back without a
result counts as. The campaigns (measure, quality) and the sweep (simulate.shards.sweep_on) bring their own;
scale imports none of them.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Protocol, TypeVar

Progress = Callable[[str, dict], None]
J = TypeVar("J")
R = TypeVar("R")


class Executor(Protocol):
    # True: tasks run in this process, one after another (a task may then report progress and save as it goes)
    here: bool

    def run(
        self,
        task: Callable[..., R],
        jobs: Iterable[J],
        *,
        shared: tuple = (),
        hardware_of: Callable[[J], str],
        lost: Callable[[J, str], R],
        name: str,
    ) -> Iterator[tuple[J, R, dict]]:
        """`task(*shared, job)` for each job, on a worker offering `hardware_of(job)`; yield (job, result, where)
        as each finishes (where: {} here; on a cluster, the node and resources it held). A job whose worker or
        node was lost yields `lost(job, one line saying why)`: never raises for a lost job."""
        ...

    def map(self, task: Callable[..., R], args: list[Any], *, shared: tuple = (), name: str) -> list[R]:
        """`task(*shared, arg)` for each arg on any CPU; the results in the order of `args`."""
        ...

    def width(self) -> int:
        """How many CPU tasks run at once."""
        ...

    def close(self) -> None: ...


class InProcess:
    """Runs every job in this process, in order; `jobs` is consumed lazily so each result is handled (written)
    before the next job is looked at, exactly as a plain loop would."""

    here = True

    def run(self, task, jobs, *, shared=(), hardware_of=None, lost=None, name=""):
        for job in jobs:
            yield job, task(*shared, job), {}

    def map(self, task, args, *, shared=(), name=""):
        return [task(*shared, a) for a in args]

    def width(self) -> int:
        return 1

    def close(self) -> None:
        pass
