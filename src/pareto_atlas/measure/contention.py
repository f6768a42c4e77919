"""Other work on the machine while an anchor ran: CPU time nobody in the measurement used.

On a shared machine a test suite or a neighbour's job that runs for twenty seconds beside an anchor
slows its engine by a factor (a TPOT of 500 ms instead of 25 ms was seen here), and no later
correction can tell such an anchor from a real effect. So every anchor measures it: the machine's busy
CPU time over the run (Linux `/proc/stat`: user, nice, system, irq, softirq and steal — time the
hypervisor gave another guest), minus the CPU time of the engine's process tree and of this process
(the load generator). What is left, per second of the run, is other work in cores. Above
`CONTENDED_CORES` the anchor is *contended*: the campaign measures it again at its end, keeps the less
contended try, and calibration leaves a contended anchor out of its fit and says so.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

# Other work above this many cores, on average over the run, marks an anchor contended. An idle
# 2-core VM shows 0.01-0.05 (kernel threads, the sandbox's agent).
CONTENDED_CORES = 0.25
PROC_STAT = Path("/proc/stat")
# /proc/stat's aggregate "cpu" line: user nice system idle iowait irq softirq steal guest guest_nice
_BUSY = (0, 1, 2, 5, 6, 7)
_STEAL = 7


def _machine_busy_s() -> tuple[float, float] | None:
    """(busy, steal) CPU seconds of the whole machine since boot, or None where /proc/stat is absent."""
    try:
        first = PROC_STAT.read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    if not first or first[0] != "cpu":
        return None
    ticks = [float(x) for x in first[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    return sum(ticks[i] for i in _BUSY if i < len(ticks)) / hz, (ticks[_STEAL] if len(ticks) > _STEAL else 0.0) / hz


def _own_cpu_s(engine_pid: int | None) -> float:
    """CPU seconds (user + system) of this process (not its children: a tool being built beside the
    campaign is other work) and of the engine's process tree; gone processes count 0."""
    return _cpu_s([os.getpid()], tree=False) + (_cpu_s([engine_pid], tree=True) if engine_pid else 0.0)


def _cpu_s(pids: list[int], tree: bool) -> float:
    total = 0.0
    seen: set[int] = set()
    for pid in pids:
        try:
            root = psutil.Process(pid)
            procs = [root, *root.children(recursive=True)] if tree else [root]
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        for p in procs:
            if p.pid in seen:
                continue
            seen.add(p.pid)
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
    return total


@dataclass(frozen=True)
class Contention:
    wall_s: float
    other_cores: float  # CPU time of other work per second of the run (cores)
    steal_cores: float  # of which the hypervisor gave to other guests
    own_cores: float  # the engine's and the load generator's, per second

    @property
    def contended(self) -> bool:
        return self.other_cores > CONTENDED_CORES

    def to_dict(self) -> dict:
        return {
            "other_cpu_cores": round(self.other_cores, 3),
            "steal_cpu_cores": round(self.steal_cores, 3),
            "own_cpu_cores": round(self.own_cores, 3),
            "contended": self.contended,
        }

    def line(self) -> str:
        what = "CONTENDED: " if self.contended else ""
        return (
            f"{what}other work on the machine {self.other_cores:.2f} cores (steal {self.steal_cores:.2f}) beside "
            f"the measurement's own {self.own_cores:.2f}, over {self.wall_s:.0f} s"
        )


class ContentionMeter:
    """Measures `Contention` between enter and exit for the given process (the engine) and this one."""

    def __init__(self, engine_pid: int | None):
        self.engine_pid = engine_pid
        self.result: Contention | None = None

    def __enter__(self) -> "ContentionMeter":
        self._t0, self._m0, self._own0 = time.monotonic(), _machine_busy_s(), _own_cpu_s(self.engine_pid)
        return self

    def __exit__(self, *exc) -> None:
        m1 = _machine_busy_s()
        if self._m0 is None or m1 is None:
            return
        wall = max(time.monotonic() - self._t0, 1e-9)
        own = max(_own_cpu_s(self.engine_pid) - self._own0, 0.0)
        busy, steal = m1[0] - self._m0[0], m1[1] - self._m0[1]
        self.result = Contention(wall, max(busy - own, 0.0) / wall, max(steal, 0.0) / wall, own / wall)
