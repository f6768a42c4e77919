"""This machine's card: moved to measure.hwprobe (the measure campaign needs it, and a module imports
only its own layer or an earlier one); the old names stay importable from here."""

from __future__ import annotations

from pareto_atlas.measure.hwprobe import (
    THIS,
    measure_this_machine,
    mem_total_gib,
    read_bandwidth_gbs,
    sgemm_gflops,
    this_machine,
)

__all__ = ["THIS", "measure_this_machine", "mem_total_gib", "read_bandwidth_gbs", "sgemm_gflops", "this_machine"]
