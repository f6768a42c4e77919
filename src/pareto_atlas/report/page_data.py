"""What the HTML atlas embeds, read from one `atlas.answer.Answer`: the points of each (model,
workload) view with their layout and guard verdicts, the winners, the boundary and projected cases,
and the tables beside them. Nothing here derives a frontier or a winner again.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from pareto_atlas.atlas.answer import Answer
from pareto_atlas.atlas.evidence import (
    evidence_label,
    evidence_ok,
    quality_evidence,
    speed_evidence,
)
from pareto_atlas.atlas.objectives import UNITS, quality_rel_interval
from pareto_atlas.atlas.regimes import admission
from pareto_atlas.spec.knobs import Knobs

POINT_FIELDS = (
    "point_id",
    "label",
    "model",
    "hardware",
    "workload",
    "provenance",
    "quality_provenance",
    "frontier_status",
    "quality",
    "quality_rel",
    "quality_task",
    "quality_benchmark",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "tpot_p50_ms",
    "tpot_p99_ms",
    "e2e_p99_ms",
    "throughput_tok_s",
    "throughput_per_device_tok_s",
    "cost_per_mtok",
    "price_per_hour",
    "price_date",
    "lat_rel_err",
    "thr_rel_err",
    "n_opts",
    "optimizations",
    "mem_gb",
    "kld",
    "kld_lo",
    "kld_hi",
    "top1",
    "calib_provenance",
    "gpus",
    "tp",
    "pp",
    "replicas",
    "prefill_workers",
    "prefill_tp",
    "decode_workers",
    "concurrency",
    "rate_rps",
)
MAX_POINTS = 5000
MAX_BOUNDARY = 300
MAX_PROJECTED = 200

# The short evidence labels of the winners table, with the long form in the legend (and on hover).
QUALITY_SHORT = {
    "measured": "Q-meas",
    "inherited": "Q-inh",
    "measured-effect": "Q-eff",
    "published": "Q-pub",
    "carried": "Q-carr",
    "reference": "Q-ref",
    "kl-measured": "Q-KL",
    "prior": "Q-prior",
    "unmeasured": "Q-none",
}
SPEED_SHORT = {"measured": "S-meas", "calibrated": "S-cal", "uncalibrated": "S-uncal", "prior": "S-prior"}
EVIDENCE_LEGEND = {
    "Q-meas": "quality measured on this configuration's own tokens",
    "Q-inh": "quality inherited from a measured arm with the same token-changing knobs",
    "Q-eff": "a measured effect (eviction, top-k) on a measured core",
    "Q-pub": "a published score for this model and knobs beside its own baseline",
    "Q-carr": "a smaller model's measured effect carried over, interval widened",
    "Q-ref": "the model at its own precision (1.0 relative to itself)",
    "Q-KL": "KL divergence against the baseline measured; the task score is a prior",
    "Q-prior": "quality read from the literature only (projected, cannot win)",
    "Q-none": "no quality evidence",
    "S-meas": "speed measured on the engine",
    "S-cal": "speed simulated by a simulator calibrated on measured or published anchors",
    "S-uncal": "speed simulated with default efficiencies (no calibration)",
    "S-prior": "speed read from a prior (projected, cannot win)",
    "+roof": (
        "the weight format's kernels derived from the roofline: no anchor or published measurement of it on "
        "that card or its generation"
    ),
}


def clean(v: object) -> object:
    """JSON-safe scalars: numpy types unwrapped, NaN/inf -> null."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if v is pd.NA or v is pd.NaT:
        return None
    return v


def records(df: pd.DataFrame) -> list[dict]:
    cols = list(df.columns)
    return [{c: clean(v) for c, v in zip(cols, row)} for row in df.itertuples(index=False, name=None)]


def columnar(df: pd.DataFrame) -> dict:
    """A table as columns, compact: text columns as a list of distinct values and an index per row
    (the provenance phrases repeat on thousands of points), numbers to 5 significant digits."""
    out = {"n": int(len(df)), "text": {}, "num": {}}
    for c in df.columns:
        col = df[c]
        if pd.api.types.is_bool_dtype(col) or pd.api.types.is_numeric_dtype(col):
            vals = col.to_numpy(dtype=float, na_value=np.nan)
            out["num"][c] = [float(f"{v:.5g}") if math.isfinite(v) else None for v in vals]
        else:
            codes, uniques = pd.factorize(col.astype(object).where(col.notna(), None), use_na_sentinel=True)
            out["text"][c] = {"values": [clean(u) for u in uniques], "codes": codes.tolist()}
    return out


def short_evidence(df: pd.DataFrame) -> np.ndarray:
    """ "Q-meas S-cal" per row (the legend, EVIDENCE_LEGEND, says what each code means)."""
    q = pd.Series(quality_evidence(df)).map(QUALITY_SHORT).fillna("Q-?").to_numpy()
    s = pd.Series(speed_evidence(df)).map(SPEED_SHORT).fillna("S-?").to_numpy()
    roof = np.where(
        (df["weights_cost"].fillna("").astype(str).to_numpy() == "derived")
        if "weights_cost" in df.columns
        else np.zeros(len(df), bool),
        " +roof",
        "",
    )
    return np.char.add(np.char.add(np.char.add(q.astype(str), " "), s.astype(str)), roof.astype(str))


def layout_words(df: pd.DataFrame) -> np.ndarray:
    """Knobs.layout_words per row where the configuration holds several GPUs, else ""."""
    gpus = df["gpus"].to_numpy(dtype=float, na_value=1.0) if "gpus" in df.columns else np.ones(len(df))
    out = np.full(len(df), "", dtype=object)
    for i in np.flatnonzero(gpus > 1):
        row = df.iloc[i]
        out[i] = Knobs.from_row(row).layout_words(str(row.get("hardware", "")))
    return out


def _curve_ids(points: pd.DataFrame) -> set[str]:
    """Per (model, workload, card), the points on the throughput–interactivity curve (higher tokens/s
    per user and per GPU): the page draws that curve, so sampling must not drop them."""
    with np.errstate(divide="ignore", invalid="ignore"):
        user = 1000.0 / points["tpot_p50_ms"].to_numpy(dtype=float, na_value=np.nan)
    col = "throughput_per_device_tok_s" if "throughput_per_device_tok_s" in points.columns else "throughput_tok_s"
    gpu = points[col].to_numpy(dtype=float, na_value=np.nan)
    keys = [
        points[c].astype(str).to_numpy() if c in points.columns else np.full(len(points), "")
        for c in ("model", "workload", "hardware")
    ]
    out: set[str] = set()
    ids = points["point_id"].astype(str).to_numpy()
    for grp in pd.DataFrame({"m": keys[0], "w": keys[1], "h": keys[2]}).groupby(["m", "w", "h"]).indices.values():
        g = grp[np.isfinite(user[grp]) & np.isfinite(gpu[grp])]
        best = -np.inf
        for i in g[np.lexsort((-gpu[g], -user[g]))]:  # fastest per user first
            if gpu[i] > best:
                out.add(ids[i])
                best = gpu[i]
    return out


def embedded_points(answer: Answer, keep_ids: set[str], max_points: int = MAX_POINTS) -> pd.DataFrame:
    """What the page draws, within `max_points` where it can: every point a chart's line or a table
    needs (the frontier, per card too; the throughput–interactivity curves; the measured anchors;
    the winners and listed cases), then the points tied with the frontier, then a seeded sample of
    the rest."""
    marked = answer.marked
    ids = marked["point_id"].astype(str)
    per_hw = answer.marked_per_hardware
    hw_front = set(per_hw.loc[per_hw["frontier_status"] == "frontier", "point_id"].astype(str))
    must = (
        (marked["frontier_status"] == "frontier")
        | (marked["provenance"] == "measured")
        | ids.isin(keep_ids | hw_front | _curve_ids(marked))
    )
    tied = ~must & (marked["frontier_status"] == "tied")
    parts, room = [marked[must]], max(0, max_points - int(must.sum()))
    for tier in (marked[tied], marked[~must & ~tied]):
        take = tier if len(tier) <= room else tier.sample(n=room, random_state=0)
        parts.append(take)
        room -= len(take)
    return pd.concat(parts).sort_index()


def point_table(answer: Answer, pts: pd.DataFrame) -> pd.DataFrame:
    """The embedded points with what the page shows of them: interval, evidence, layout, per-user speed."""
    pts = pts.copy()
    lo, hi = quality_rel_interval(pts)
    pts["quality_rel_lo"], pts["quality_rel_hi"] = lo, hi
    if "quality_lo" in pts.columns:
        pts["quality_abs_lo"], pts["quality_abs_hi"] = pts["quality_lo"], pts["quality_hi"]
    labels = dict(zip(answer.marked["point_id"].astype(str), answer.marked["label"].astype(str)))
    pts["dominated_by_label"] = (
        pts.get("dominated_by", pd.Series("", index=pts.index)).astype(str).map(labels).fillna("")
    )
    pts["rests_on"] = np.where(
        pts["provenance"] == "measured", "measured", np.where(evidence_ok(pts), "simulated", "prior")
    )
    pts["evidence"] = evidence_label(pts)
    pts["evidence_short"] = short_evidence(pts)
    pts["layout"] = layout_words(pts)
    # what would confirm a point resting on priors (the tooltip says it), as projected.csv does
    from pareto_atlas.atlas.evidence import confirm_command

    prior = np.flatnonzero(pts["rests_on"].to_numpy() == "prior")
    confirm = np.full(len(pts), "", dtype=object)
    for i in prior:
        confirm[i] = confirm_command(pts.iloc[i], answer.study_ref)
    pts["confirm_command"] = confirm
    # the field's interactivity axis: one user's decode speed, 1000 / TPOT (P50)
    with np.errstate(divide="ignore", invalid="ignore"):
        pts["tok_s_per_user"] = 1000.0 / pts["tpot_p50_ms"].to_numpy(dtype=float, na_value=np.nan)
    if "throughput_per_device_tok_s" not in pts.columns:
        pts["throughput_per_device_tok_s"] = pts["throughput_tok_s"]
    if "model" not in pts.columns:
        pts["model"] = ""
    from pareto_atlas.simulate.space import load_label

    pts["load"] = [load_label(r) for _, r in pts.iterrows()] if len(pts) else []
    extra = (
        "quality_rel_lo",
        "quality_rel_hi",
        "quality_abs_lo",
        "quality_abs_hi",
        "dominated_by_label",
        "rests_on",
        "evidence",
        "evidence_short",
        "layout",
        "tok_s_per_user",
        "load",
        "confirm_command",
    )
    return pts[[c for c in (*POINT_FIELDS, *extra) if c in pts.columns]]


def guard_strings(answer: Answer, pts: pd.DataFrame) -> tuple[dict[str, str], dict[str, str]]:
    """Per regime, one character per embedded point: its guard verdict (i in / b boundary / o out)
    and whether it is admitted (1/0)."""
    guard, admitted = {}, {}
    for r in answer.regimes:
        a = admission(pts, r, allow_priors=answer.allow_priors)
        guard[r.name] = "".join({"in": "i", "boundary": "b", "out": "o"}.get(str(g), "o") for g in a["guard"])
        admitted[r.name] = "".join("1" if x else "0" for x in a["admitted"].to_numpy())
    return guard, admitted


def winner_table(answer: Answer) -> pd.DataFrame:
    """The winner cells with the card each winner runs on, its layout and its short evidence."""
    cells = answer.placed_cells.copy()
    by_id = answer.points.set_index(answer.points["point_id"].astype(str))
    won = cells["point_id"].fillna("").astype(str)
    has = won.isin(by_id.index).to_numpy()
    layout = np.full(len(cells), "", dtype=object)
    thr_dev = np.full(len(cells), np.nan)
    if has.any():
        rows = by_id.loc[won[has]].reset_index(drop=True)
        layout[has] = layout_words(rows)
        if "throughput_per_device_tok_s" in rows.columns:
            thr_dev[has] = rows["throughput_per_device_tok_s"].to_numpy(dtype=float, na_value=np.nan)
    cells["layout"] = layout
    cells["throughput_per_device_tok_s"] = thr_dev
    cells["evidence_short"] = np.where(has, short_evidence(cells), "")
    return cells


def _with_short(df: pd.DataFrame) -> pd.DataFrame:
    return df.assign(evidence_short=short_evidence(df) if len(df) else [])


def page_payload(
    answer: Answer,
    meta: dict,
    *,
    max_points: int = MAX_POINTS,
    claims: Sequence[dict] | None = None,
    quality_table: pd.DataFrame | None = None,
) -> dict:
    boundary, projected = answer.boundary, answer.projected
    bshow = (
        boundary.assign(_o=(boundary["effect"] == "none").astype(int))
        .sort_values("_o", kind="stable")
        .drop(columns="_o")
        .head(MAX_BOUNDARY)
    )
    cells = winner_table(answer)
    keep = set(cells["point_id"].astype(str)) | set(bshow["point_id"].astype(str))
    raw = embedded_points(answer, keep, max_points)
    pts = point_table(answer, raw)
    guard, admitted = guard_strings(answer, raw)
    pairs = [{"model": m, "workload": w} for m, w in answer.pairs()]
    by_wl: dict[str, list[str]] = {}
    for p in pairs:
        by_wl.setdefault(p["workload"], []).append(p["model"])
    prices = answer.points.groupby("hardware")[["price_per_hour", "price_date"]].first().reset_index()
    return {
        "points": columnar(pts),
        "guard": guard,
        "admitted": admitted,
        "winners": records(cells),
        "boundary": records(bshow),
        "projected": records(_with_short(projected.head(MAX_PROJECTED))),
        "projected_total": int(len(projected)),
        "boundary_total": int(len(boundary)),
        "regimes": [
            {
                "name": r.name,
                "description": r.describe(),
                "objective": r.objective,
                "direction": r.direction,
                "quality_floor": r.quality_floor,
            }
            for r in answer.regimes
        ],
        "pairs": pairs,
        "compare": {w: ms for w, ms in by_wl.items() if len(ms) > 1},
        "units": UNITS,
        "evidence_legend": EVIDENCE_LEGEND,
        "n_points_total": int(len(answer.points)),
        "n_points_drawn": int(len(pts)),
        "claims": list(claims or []),
        "quality_table": records(quality_table) if quality_table is not None else [],
        "prices": records(prices),
        "meta": {k: clean(v) if not isinstance(v, (dict, list)) else v for k, v in meta.items()},
    }
