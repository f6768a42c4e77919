"""Think times: how long each client of a closed loop pauses before each request.

Part of the load, like a trace's arrival times: the load generator pauses these and records them,
and the simulator's closed loops take the same draws, so a measured anchor and its simulated twin
run the same protocol. Every anchor uses seed 0, so repeats replay the same pauses.
"""

from __future__ import annotations

import numpy as np

SEED = 0


def check_think(value: float | str, unit: str = "s", field: str = "think") -> float | str:
    """A think setting as given ("auto" or a mean pause >= 0, in `unit`), else a one-line ValueError
    (naming `field`, where the caller does not name it already)."""
    if value == "auto":
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value)
    raise ValueError(f"{field + ': ' if field else ''}{value!r} is not allowed: a pause in {unit} >= 0, or 'auto'")


def think_times(mean_s: float, n: int, seed: int = SEED) -> np.ndarray:
    """The pauses (s) before a closed loop's n measured requests, in the order clients start to
    pause: exponential with this mean, seeded."""
    if not mean_s >= 0:
        raise ValueError(f"think: mean {mean_s} s must be >= 0")
    if mean_s == 0:
        return np.zeros(n)
    return np.random.default_rng([seed, 0x7468]).exponential(mean_s, n)
