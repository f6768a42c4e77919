"""GPU cards calibrated on anchors imported from other tools' result files (measure.imports): one
fit per (card, engine) over the study's imported anchors on that card, scored on anchors of files
it never saw, and kept in the store where `simulate` finds a card's fit (published_stage).

Imported anchors enter the fit like measured ones: their lengths (each request's own where the
file has them, else the mean per request), their load, and their TTFT / TPOT at P50 and P99 and
throughput as the targets. By default only anchors whose token-count contract is verified are
used; `allow` adds aggregate or unverified ones, and the provenance says how many of each.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd
from rich.console import Console

from pareto_atlas import __version__
from pareto_atlas.calibrate.fidelity import _error_bars
from pareto_atlas.calibrate.fit import TARGETS
from pareto_atlas.calibrate.published import GROUPS, LOAO, LOSO, _median_abs, _rel, fit_card, held_out_errors
from pareto_atlas.calibrate.published_stage import GOAL, PREFIX
from pareto_atlas.simulate.params import CalibParams, default_params, with_error_bars
from pareto_atlas.spec.cards import shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.store import Store
from pareto_atlas.store.db import dumps

CONTRACTS = ("verified", "aggregate", "unverified")
TAG = "imported"


def imported_rows(store: Store, study: str) -> pd.DataFrame:
    """The study's imported anchors on a shipped GPU card with a shipped model, one row each."""
    a = store.anchors(study)
    if a.empty:
        return a
    gpus = {n for n, h in shipped_hardware().items() if h.kind == "gpu"}
    rows = []
    for r in a.itertuples():
        prov = json.loads(r.provenance_json or "{}")
        if prov.get("origin") != "imported" or r.hardware not in gpus or r.model not in shipped_models():
            continue
        m, load, wl = json.loads(r.metrics_json), json.loads(r.load_json), json.loads(r.workload_json)
        rows.append(
            {
                "anchor_id": r.anchor_id,
                "hardware": r.hardware,
                "engine": r.engine,
                "model": r.model,
                "knobs": json.loads(r.knobs_json),
                "load": load,
                "prompt_tokens": wl["prompt_tokens"],
                "output_tokens": wl["output_tokens"],
                "metrics": m,
                "contract": prov.get("contract"),
                "source_id": f"import-{prov['sha256'][:8]}",
                "source": prov.get("source"),
                "file": prov.get("file"),
                "label": prov.get("label"),
            }
        )
    return pd.DataFrame(rows)


def _frame_row(store: Store, r: pd.Series) -> dict:
    """One anchor as a row of the fit (calibrate.fit._anchors), with its five targets."""
    knobs = Knobs.from_dict(r["knobs"]).to_dict()
    load, m = r["load"], r["metrics"]
    recs = [q for q in store.requests(r["anchor_id"]) if q.get("ok")]
    n = int(load.get("requests") or len(recs) or 32)
    row = {
        **knobs,
        "prompt_tokens": max(int(r["prompt_tokens"]), 1),
        "output_tokens": max(int(r["output_tokens"]), 1),
        "concurrency": 0,
        "rate_rps": np.nan,
        "send_offsets": None,
        "n_requests": n,
    }
    if load["load"] == "burst":  # every request sent at once: replayed as sends at t = 0, each its own lengths
        k = len(recs) or n
        row.update(slots=k, n_requests=k, send_offsets=[0.0] * k)
        if recs:
            row.update(
                req_prompt_tokens=[int(q["prompt_tokens"]) for q in recs],
                req_output_tokens=[int(q["completion_tokens"]) for q in recs],
            )
    elif load["load"] == "rate":
        row.update(slots=1024, rate_rps=float(load["load_value"]))
    else:
        c = int(load["load_value"])
        row.update(slots=c, concurrency=c)
    # on a GPU, F16 and BF16 run the same tensor-core GEMMs (calibrate.published.card_frame)
    row["weights"] = "BF16" if row["weights"] == "F16" else row["weights"]
    for t, (metric, stat) in {
        "ttft_p50_ms": ("ttft", "p50"),
        "ttft_p99_ms": ("ttft", "p99"),
        "tpot_p50_ms": ("tpot", "p50"),
        "tpot_p99_ms": ("tpot", "p99"),
    }.items():
        v = (m.get(metric) or {}).get(stat)
        row[t] = float(v) if v is not None and v == v else np.nan
    thr = m.get("throughput_tok_s")
    row["throughput_tok_s"] = float(thr) if thr is not None and thr == thr else np.nan
    return row


def _provenance(rows: pd.DataFrame, engine: str, how: str, lat: bool) -> str:
    files = ", ".join(f"{s} {n}" for s, n in rows.source_id.value_counts(sort=False).items())
    contracts = ", ".join(f"{n} {c}" for c, n in rows.contract.value_counts(sort=False).items())
    bar = f"error bar: p90 of {how}" if how else "error bar: none held out, kept at the uncalibrated default's"
    n = len(rows)
    return (
        f"calibrated on {n} imported anchor{'s' if n != 1 else ''} ({engine}: {files}; contract {contracts})"
        f"; {bar}{'' if lat or not how else ' (throughput only)'}"
    )


def fidelity_rows(rows: pd.DataFrame, meas: np.ndarray, fitted: np.ndarray, err: np.ndarray) -> list[dict]:
    """The fit at each imported anchor in the fidelity report's rows (calibrate.stage._fidelity_rows)."""
    out = []
    for i, r in rows.reset_index(drop=True).iterrows():
        for j, t in enumerate(TARGETS):
            if np.isfinite(meas[i, j]):
                out.append(
                    {
                        "metric": t,
                        "measured": float(meas[i, j]),
                        "simulated": float(fitted[i, j]),
                        "label": f"{r['file']}: {r['label']}",
                        "arm": f"imported:{r['source_id']}",
                        "loo_rel_err": float(err[i, j]),
                        "origin": r["source"],
                    }
                )
    return out


def calibrate_card(store: Store, rows: pd.DataFrame) -> tuple[CalibParams, dict, str, list[dict]]:
    """One card's fit on one engine's imported anchors: (params, median |held-out error| per
    group, held-out scheme, the fidelity report's rows)."""
    hw = shipped_hardware()[rows.hardware.iloc[0]]
    models = [shipped_models()[m] for m in rows.model]
    frame = pd.DataFrame([_frame_row(store, r) for _, r in rows.iterrows()])
    params, fitted = fit_card(frame, models, hw)
    err, how = held_out_errors(rows, frame, models, hw)
    meas = frame[list(TARGETS)].to_numpy(float)
    resid = pd.DataFrame(_rel(fitted, meas), columns=list(TARGETS))
    lat_err, thr_err = _error_bars(pd.DataFrame(err, columns=list(TARGETS)), resid, {})
    engine = str(rows.engine.iloc[0])
    if not how:
        d = default_params(hw, engine)
        lat_err, thr_err = max(lat_err, d.lat_rel_err), max(thr_err, d.thr_rel_err)
    lat = bool(np.isfinite(err[:, :4]).any())
    params = with_error_bars(params, lat_err, thr_err, _provenance(rows, engine, how, lat))
    errors = {g: _median_abs(err, cols) for g, cols in GROUPS.items()}
    return params, errors, how, fidelity_rows(rows, meas, fitted, err)


def calibrate_imported(study: str, store: Store, console: Console, allow: tuple[str, ...] = ()) -> int:
    """Fit every (card, engine) with imported anchors; returns the number of fits stored."""
    rows = imported_rows(store, study)
    if rows.empty:
        return 0
    use = ("verified",) + tuple(c for c in allow if c in CONTRACTS)
    left = rows[~rows.contract.isin(use)]
    if len(left):
        console.print(
            f"  imported: {len(left)} anchor(s) left out of the fit, contract "
            f"{', '.join(sorted(set(left.contract)))} (calibration uses verified anchors; "
            "--allow-aggregate / --allow-unverified add the others)",
            highlight=False,
        )
    rows = rows[rows.contract.isin(use)]
    done = 0
    for (card, engine), g in rows.groupby(["hardware", "engine"], sort=False):
        g = g.reset_index(drop=True)
        if engine == "unstated":  # one fit per engine: a file that does not name it needs --engine
            console.print(
                f"  {card}: {len(g)} imported anchor(s) name no engine; give --engine to calibrate them",
                highlight=False,
            )
            continue
        params, errors, how, fid = calibrate_card(store, g)
        key = hashlib.sha256(dumps([sorted(g.anchor_id), __version__]).encode()).hexdigest()[:12]
        meta = {
            "key": key,
            "by": "command",
            "used": True,
            "origin": TAG,
            "held_out": how,
            "errors": errors,
            "anchors": g.drop(columns=["knobs", "load", "metrics"]).to_dict(orient="records"),
            "table_sha256": None,
            "tables": sorted(set(g.source)),
            "tpot_basis": ["TPOT"],
        }
        store.put_calibration(
            {
                "calib_id": f"{PREFIX}{TAG}-{key}-{card}-{engine}",
                "study": study,
                "hardware": card,
                "engine": f"{TAG}:{engine}",
                "engine_version": None,
                "params_json": dumps(params.to_dict()),
                "fidelity_json": dumps({"published": meta, "anchors": fid}),
                "n_anchors": len(g),
            }
        )
        met = {k: v for k, v in errors.items() if v == v}
        verdict = (
            ""
            if not met
            else " -> " + ("meets" if all(v <= GOAL for v in met.values()) else "misses") + f" the {GOAL:.0%} goal"
        )
        errs = ", ".join(f"{k} {v:.1%}" for k, v in errors.items() if v == v) or "none (one anchor)"
        console.print(f"  {card} / {engine}: {params.provenance}", highlight=False, soft_wrap=True)
        console.print(
            f"    held-out ({how or 'none'}) median |error|: {errs}{verdict}; error bar carried: latency "
            f"±{params.lat_rel_err:.1%}, throughput ±{params.thr_rel_err:.1%}",
            highlight=False,
        )
        done += 1
    return done


__all__ = ["LOAO", "LOSO", "calibrate_imported", "imported_rows"]
