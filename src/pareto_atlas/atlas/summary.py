"""What recurs on the frontier: optimization frequency and stacked versus single methods.

Both read a table marked by `frontier()`; counts are over its rows (configuration x hardware x
workload x load), the unit the paper counts in ("9 of 15 stacked vs 9 of 21 single").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from pareto_atlas.store.quality import TOKEN_KNOBS  # noqa: F401  (its home: the knobs that change quality)


def _on(marked: pd.DataFrame, raw: bool) -> np.ndarray:
    if raw:
        return marked["raw_frontier"].to_numpy(dtype=bool)
    return (marked["frontier_status"] == "frontier").to_numpy()


def frontier_frequency(marked: pd.DataFrame, *, raw: bool = True) -> pd.DataFrame:
    """Per optimization family: rows on the frontier that use it, rows that use it, and the shares."""
    considered = marked[marked["frontier_status"] != "excluded"]
    on = _on(considered, raw)
    opts = considered["optimizations"].fillna("").astype(str)
    codes, uniques = pd.factorize(opts)
    parts = [set(u.split("+")) for u in uniques]
    families = sorted({o for s in parts for o in s if o})
    n_front = int(on.sum())
    rows = []
    for fam in families:
        uses = np.array([fam in s for s in parts], dtype=bool)[codes] if len(parts) else np.zeros(0, bool)
        k = int((uses & on).sum())
        rows.append(
            {
                "optimization": fam,
                "on_frontier": k,
                "configs": int(uses.sum()),
                "frontier_size": n_front,
                "share_of_frontier": k / n_front if n_front else np.nan,
                "reach_rate": k / int(uses.sum()) if uses.any() else np.nan,
            }
        )
    cols = ["optimization", "on_frontier", "configs", "frontier_size", "share_of_frontier", "reach_rate"]
    return pd.DataFrame(rows, columns=cols).sort_values(
        ["on_frontier", "optimization"], ascending=[False, True], ignore_index=True
    )


def stacked_vs_single(marked: pd.DataFrame, *, raw: bool = True, by: Sequence[str] = ()) -> pd.DataFrame:
    """Rows `baseline` (n_opts 0), `single` (1) and `stacked` (>= 2): on frontier / total, rate."""
    considered = marked[marked["frontier_status"] != "excluded"].copy()
    considered["_on"] = _on(considered, raw)
    considered["kind"] = np.select(
        [considered["n_opts"] >= 2, considered["n_opts"] == 1], ["stacked", "single"], default="baseline"
    )
    g = considered.groupby([*by, "kind"], sort=True)["_on"]
    out = pd.DataFrame({"on_frontier": g.sum().astype(int), "total": g.size()}).reset_index()
    out["rate"] = out["on_frontier"] / out["total"]
    return out


def provenance_counts(marked: pd.DataFrame) -> pd.DataFrame:
    """How many frontier / tied / dominated points are measured, simulated or prior."""
    return marked.groupby(["frontier_status", "provenance"]).size().rename("n").reset_index()


def guard_by_workload(points: pd.DataFrame, floor: float) -> pd.DataFrame:
    """Per (model, token-changing configuration, workload): the quality guard's verdict (in / out /
    boundary of the 95 % interval of quality_rel against `floor`, "" where unknown) on the task that
    guards that workload, with its interval and evidence; `differs` marks a configuration whose
    verdict is not the same on every workload of its model it has evidence for. One configuration
    can pass the floor for math and fail it for long context: each workload is guarded by its own task."""
    from pareto_atlas.atlas.regimes import task_status
    from pareto_atlas.atlas.winners import model_column

    if points.empty:
        return pd.DataFrame()
    cols = [c for c in TOKEN_KNOBS if c in points]
    p = points.assign(model=model_column(points), quality_task=points.get("quality_task", ""))
    keep = [
        "model",
        "workload",
        "quality_task",
        *cols,
        "quality_rel",
        "quality_rel_lo",
        "quality_rel_hi",
        "quality_evidence",
    ]
    p = p[keep].drop_duplicates(subset=["model", "workload", *cols]).reset_index(drop=True)
    p["verdict"] = task_status(
        p["quality_rel_lo"].to_numpy(float),
        p["quality_rel_hi"].to_numpy(float),
        p["quality_rel"].to_numpy(float),
        floor,
    )
    known = p[p["verdict"] != ""]
    n_verdicts = known.groupby(["model", *cols])["verdict"].nunique()
    differs = n_verdicts[n_verdicts > 1].reset_index()[["model", *cols]].assign(differs=True)
    p = p.merge(differs, on=["model", *cols], how="left")
    p["differs"] = p["differs"].fillna(False).astype(bool)
    return p
