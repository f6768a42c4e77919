"""What machine a measurement ran on: recorded with every anchor."""

from __future__ import annotations

import os
import platform
from functools import lru_cache


@lru_cache(maxsize=1)
def host_description() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_gib = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    mem_gib = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return {"hostname": platform.node(), "cpu": cpu, "cores": os.cpu_count(), "mem_gib": mem_gib,
            "os": platform.platform(), "python": platform.python_version(), "gpu": None}
