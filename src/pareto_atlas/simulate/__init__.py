"""Per-iteration cost model + request-level discrete-event simulation of batching policies; sweeps."""

from pareto_atlas.simulate.api import simulate_point
from pareto_atlas.simulate.params import CalibParams, default_params
from pareto_atlas.simulate.space import default_space
from pareto_atlas.simulate.sweep import sweep

__all__ = ["CalibParams", "default_params", "default_space", "simulate_point", "sweep"]
