"""Fit the simulator's efficiencies and overheads to measured anchors; report fidelity; propose anchors."""

from pareto_atlas.calibrate.fidelity import Calibration, fit
from pareto_atlas.calibrate.propose import propose_next_anchor

__all__ = ["Calibration", "fit", "propose_next_anchor"]
