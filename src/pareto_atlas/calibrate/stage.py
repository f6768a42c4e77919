"""The `calibrate` stage: probe this machine, fit the simulator to the study's anchors per
(hardware, engine), and keep the fit and its fidelity report in the store."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import numpy as np
import pandas as pd
from rich.console import Console

from pareto_atlas.calibrate.fidelity import TARGETS, fit

# card resolution and this machine's card live below the stages; their old names stay importable here
from pareto_atlas.measure.hwprobe import THIS, this_machine  # noqa: F401
from pareto_atlas.measure.model_card import anchor_cards, model_card, spec_card  # noqa: F401
from pareto_atlas.spec.card_resolve import study_model_card  # noqa: F401
from pareto_atlas.spec.cards import HardwareCard
from pareto_atlas.spec.study import Study
from pareto_atlas.store import Store
from pareto_atlas.store.db import dumps
from pareto_atlas.store.points import measured_points


def _fidelity_rows(cal, anchors: pd.DataFrame) -> list[dict]:
    # residual rows carry the labels of the anchors fitted (flagged and contended ones are not)
    rows = []
    res = cal.residuals
    for i in res.index:
        for t in TARGETS:
            m, p = res.at[i, f"{t}_measured"], res.at[i, f"{t}_predicted"]
            loo = cal.loo.at[i, t] if cal.loo is not None else np.nan
            rows.append(
                {
                    "metric": t,
                    "measured": float(m),
                    "simulated": float(p),
                    "label": anchors.label.loc[i],
                    "arm": anchors.arm.loc[i],
                    "loo_rel_err": float(loo),
                }
            )
    return rows


def _lomo_rows(cal, anchors: pd.DataFrame) -> list[dict]:
    if cal.lomo is None:
        return []
    return [
        {"arm": anchors.arm.loc[i], "held_model": r["held_model"], **{t: float(r[t]) for t in TARGETS}}
        for i, r in cal.lomo.iterrows()
    ]


# Requests whose prefill the server began within this window of each other shared one step.
SAME_STEP_S = 0.005


def anchor_load(store: Store, anchor_id: str) -> tuple[list[float], list[float]]:
    """The load an anchor's measured requests met, from one read of its records: (send offsets,
    think times); `anchor_columns` has them with each replayed request's lengths.

    Send offsets, for replaying an open-loop anchor (Poisson, trace): when each request reached the
    engine (s, from the first). Requests sent at the same instant race the server's loop: sometimes
    the first prompt gets a step of its own, sometimes all are prefilled together. The server's own
    prompt_ms says which: requests whose prefill began in the same step are replayed as arriving
    together, the others at their send times.

    Think times, for simulating a closed-loop anchor (see calibrate.fit._Anchor): the pause each
    request's client took before sending it (s, in request order; [] when its clients never paused),
    the load and not its outcome, so a prediction of the anchor may use it."""
    cols = anchor_columns(store, anchor_id)
    return cols["send_offsets"], cols["think_s"]


def anchor_columns(store: Store, anchor_id: str) -> dict[str, list]:
    """`anchor_load` as the fit's columns, plus the replayed requests' own lengths (a trace's differ
    request by request; the server's usage, which the contract checked): send_offsets, think_s,
    req_prompt_tokens, req_output_tokens (the last three in send order, like send_offsets)."""
    recs = [r for r in store.requests(anchor_id) if not r.get("warmup")]
    think = [float(r.get("think_s") or 0.0) for r in recs]
    sent = sorted((r for r in recs if r.get("ok")), key=lambda r: r["send_ts"])
    lengths = [(r.get("prompt_tokens"), r.get("completion_tokens")) for r in sent]
    known = all(p and n for p, n in lengths)
    return {
        "send_offsets": _send_offsets(sent),
        "think_s": think if any(think) else [],
        "req_prompt_tokens": [int(p) for p, _ in lengths] if known else [],
        "req_output_tokens": [int(n) for _, n in lengths] if known else [],
    }


def attach_load(anchors: pd.DataFrame, store: Store) -> pd.DataFrame:
    """The anchors with the load of each (`anchor_columns`) in the columns the fit reads."""
    cols = [anchor_columns(store, a) for a in anchors.anchor_id]
    for key in ("send_offsets", "think_s", "req_prompt_tokens", "req_output_tokens"):
        anchors[key] = [c[key] for c in cols]
    return anchors


def _send_offsets(recs: list[dict]) -> list[float]:
    recs = sorted(recs, key=lambda r: r["send_ts"])
    if not recs:
        return []
    t0 = recs[0]["send_ts"]
    out: list[float] = []
    starts: list[float] = []
    for r in recs:
        prompt_s = ((r.get("server_timings") or {}).get("prompt_ms") or 0.0) / 1e3
        start = (r["first_token_ts"] - prompt_s) if r.get("first_token_ts") and prompt_s else r["send_ts"]
        t = r["send_ts"] - t0
        for j, sj in enumerate(starts):
            if abs(start - sj) < SAME_STEP_S and out[j] <= t:
                t = out[j]
                break
        out.append(t)
        starts.append(start)
    return out


def calibrate_study(study: Study, store: Store, console: Console, allow: tuple[str, ...] = ()) -> None:
    """Fit the simulator per (hardware, engine): anchors of two engines on one machine (a study and
    the one it compares with) get two fits and two fidelity tables, each stored with its engine."""
    from pareto_atlas.calibrate.imported import calibrate_imported  # imported GPU anchors: a fit per card
    from pareto_atlas.calibrate.measured import by_hardware, hardware_card, versus_published, without_errored

    imported = calibrate_imported(study.name, store, console, allow)
    anchors = measured_points(study, store)
    if len(anchors) and "origin" in anchors:  # imported anchors have their own fit (above)
        anchors = anchors[anchors.origin.fillna("measured") == "measured"].reset_index(drop=True)
    if imported and not len(anchors):
        return
    console.print("[bold]calibrate[/]: one fit per (hardware, engine) of the measured anchors")
    anchors = without_errored(anchors, console)
    if len(anchors) < 2:
        raise ValueError(
            f"calibrate: {len(anchors)} finished anchors for {study.name!r}; need at least 2 "
            f"(run `pareto-atlas measure` first)"
        )
    anchors = attach_load(anchors, store)
    console.print(
        "  (closed-loop anchors simulated with their clients' recorded think times, open-loop ones replayed "
        "at their measured send times; simulated points run closed loops with the study's think times)",
        highlight=False,
    )
    for name, on_hw in by_hardware(anchors):
        hw, machine_bw = hardware_card(study, store, name), None
        if name == THIS:
            console.print(
                f"  {THIS} measured at {hw.mem_bw_gbs:.1f} GB/s read bandwidth (all cores), "
                f"{hw.tflops['fp32'] * 1e3:.0f} GFLOP/s fp32 SGEMM",
                highlight=False,
            )
        for engine in engines_of(on_hw, study.engine.name):
            mine = on_hw[on_hw.engine == engine].reset_index(drop=True)
            if len(mine) < 2:
                console.print(
                    f"  {name} / {engine}: {len(mine)} anchor(s), too few to fit (need 2); not calibrated",
                    highlight=False,
                )
                continue
            cal = calibrate_engine(study, store, console, hw, mine, engine, machine_bw)
            machine_bw = machine_bw or cal.params.eff_bw
            versus_published(study, store, console, hw, mine, cal, model_card(study, mine))


def engines_of(anchors: pd.DataFrame, default: str) -> list[str]:
    """The engines among the anchors (anchors stored before the column: the study's), llama.cpp first:
    the bandwidth its kernels reach is the machine's, which the engines fitted after it keep."""
    from pareto_atlas.store.compare import DEFAULT_ENGINE

    if "engine" not in anchors:
        anchors["engine"] = default
    anchors["engine"] = anchors["engine"].fillna(default)
    found = list(dict.fromkeys(anchors["engine"]))
    return sorted(found, key=lambda e: (e != DEFAULT_ENGINE, e != default))


def calibrate_engine(
    study: Study,
    store: Store,
    console: Console,
    hw: HardwareCard,
    anchors: pd.DataFrame,
    engine: str,
    machine_bw: float | None = None,
):
    """One fit, its fidelity report, and the stored calibration, for the anchors of one engine.

    machine_bw: the weight-streaming efficiency another engine's fit found on this machine. It is
    the machine's, not the engine's, and a second engine's few anchors (one prompt length, batch 1
    to 4) cannot split a decode step between streaming and fixed overhead by themselves: vLLM's
    alone put eff_bw at its bound (2x the probe, more than any engine reached here) and 46 ms in a
    per-step overhead. Kept fixed, the overhead left is the engine's own."""
    from pareto_atlas.simulate.params import default_params

    start, fixed = None, ()
    if machine_bw is not None:
        start, fixed = replace(default_params(hw, engine), eff_bw=machine_bw), ("eff_bw",)
        console.print(
            f"  {engine}: weight streaming kept at the machine's {machine_bw:.2f} x the probe's bandwidth "
            f"(fitted on the other engine's anchors); its kernels and overheads fitted",
            highlight=False,
        )
    cal = fit(anchors, anchor_cards(study, anchors), hw, engine=engine, loo=True, start=start, fixed=fixed)
    # the anchors' evidence level in the provenance every simulated point carries
    cal = replace(
        cal,
        params=replace(cal.params, provenance=cal.params.provenance.replace(" anchors (", " measured anchors (", 1)),
    )
    console.print(cal.report(), highlight=False)
    for t in TARGETS:
        if t in cal.loo.columns if cal.loo is not None else False:
            worst = cal.loo[t].abs().idxmax()
            if abs(cal.loo[t].loc[worst] if worst is not None else 0) > 0.15:
                console.print(
                    f"  worst leave-one-out {t}: {anchors.arm.loc[worst]} ({cal.loo[t].loc[worst]:+.0%})",
                    highlight=False,
                )
    fidelity = {
        "summary": cal.summary,
        "repeat_spread": cal.repeat_spread,
        "anchors": _fidelity_rows(cal, anchors),
        "drift": cal.drift.to_dict(orient="records"),
        "flagged": cal.flagged.get("anchor_id", pd.Series()).tolist(),
        "contended": cal.contended.get("anchor_id", pd.Series()).tolist(),
        # the models the fit saw (card names) and each model's anchors predicted without it
        "models": sorted(set(cal.residuals["model"])),
        "lomo": _lomo_rows(cal, anchors),
        "report": cal.report(),
    }
    # the engine enters the id only where it is not the study's own, so earlier ids stay
    key = [study.name, hw.name, sorted(anchors.anchor_id)] + ([engine] if engine != study.engine.name else [])
    calib_id = hashlib.sha256(dumps(key).encode()).hexdigest()[:16]
    versions = anchors.engine_version.dropna()
    store.put_calibration(
        {
            "calib_id": calib_id,
            "study": study.name,
            "hardware": hw.name,
            "engine": engine,
            "engine_version": versions.mode().iloc[0] if len(versions) else None,
            "params_json": dumps(cal.params.to_dict()),
            "fidelity_json": dumps(fidelity),
            "n_anchors": len(anchors),
        }
    )
    return cal
