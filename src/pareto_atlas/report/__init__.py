"""Reports: the paper's figures (PNG + SVG), the self-contained HTML atlas, JSON/CSV/Parquet exports."""

from __future__ import annotations

from pareto_atlas.report.build import build_report

__all__ = ["build_report"]
