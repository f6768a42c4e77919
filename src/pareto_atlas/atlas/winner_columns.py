"""The winners table's columns, and the model axis of the atlas's points ("all" names a cell across hardware)."""

from __future__ import annotations

import numpy as np
import pandas as pd


ALL = "all"


WINNER_COLUMNS = (
    "regime",
    "model",
    "workload",
    "quality_task",
    "quality_benchmark",  # the benchmark the winner's score rests on (a published fallback's, where not the task's)
    "hardware",
    "point_id",
    "label",
    "deployment",
    "load",
    "concurrency",
    "rate_rps",
    "utilization",
    "provenance",
    "quality_provenance",
    "objective",
    "direction",
    "value",
    "value_lo",
    "value_hi",
    "quality",
    "quality_rel",
    "cost_per_mtok",
    "tpot_p99_ms",
    "ttft_p99_ms",
    "throughput_tok_s",
    "n_opts",
    "optimizations",
    "stacked",
    "stack_beats_singles",
    "best_single_label",
    "best_single_value",
    "runner_up_label",
    "runner_up_value",
    "runner_up_where",
    "separated",
    "n_candidates",
    "n_boundary",
    "note",
    "quality_rel_lo",
    "quality_rel_hi",
    "kld",
    "quality_evidence",
    "speed_evidence",
    "calib_provenance",
    "evidence",
    "lat_rel_err",
    "weights_cost",
    "n_projected",
    "projected_label",
    "projected_hardware",
    "projected_value",
    "projected_evidence",
    "confirm_command",
    "verdict",
    "verdict_note",
    "overlap",
)


def model_column(points: pd.DataFrame) -> np.ndarray:
    """Each point's model (the atlas's axis); "" for tables that predate it (one model)."""
    if "model" not in points.columns:
        return np.full(len(points), "", dtype=object)
    return points["model"].fillna("").astype(str).to_numpy()
