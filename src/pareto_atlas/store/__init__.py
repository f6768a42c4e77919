"""The DuckDB store: the only way stages talk to each other."""

from pareto_atlas.store.db import Store, StoreError

__all__ = ["Store", "StoreError"]
