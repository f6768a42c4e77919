"""The study: models, hardware, workloads, knobs, regimes and quality guards."""
