"""pareto-atlas: measure anchors on a real engine, calibrate a simulator, and name the
configuration that dominates each deployment regime on the cost-quality-latency frontier."""

__version__ = "0.2.0"
