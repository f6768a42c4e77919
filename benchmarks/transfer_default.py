"""bench_transfer on the default build's store: held-out anchors (benchmarks/transfer_study.toml:
Qwen2.5-Coder-1.5B at four shapes, a size the default never measures, and the 0.5B in F16 at a shape
its F16 anchor never ran) measured with the project's campaign code, each predicted from the default
study's latest calibration of this CPU with its own model card, and scored against the error bar the
atlas would give its point (simulate.targets.carried_params: the fit's leave-one-model-out error for
a model it did not see; the within-model bar for the model it fitted). Where that fit saw one size,
the 1.5B's points are projected, not carried: no bar is scored, and the command that would measure a
second size is printed.

    python benchmarks/bench_transfer.py --store atlas-out/default-cpu/store.duckdb [--measure]
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from pareto_atlas.calibrate.fidelity import contention_flags
from pareto_atlas.calibrate.fit import TARGETS, _anchors, predict
from pareto_atlas.calibrate.stage import THIS, anchor_cards, attach_load, model_card, this_machine
from pareto_atlas.simulate.params import kernel_format
from pareto_atlas.simulate.stage import fitted_models, latest_params
from pareto_atlas.simulate.space import Workload
from pareto_atlas.simulate.targets import SPEED_PROJECTED, Target, carried_params
from pareto_atlas.spec.study import load_study
from pareto_atlas.store import Store
from pareto_atlas.store.points import measured_points

HELD_OUT = Path(__file__).with_name("transfer_study.toml")
GOAL_MEDIAN = 0.15  # issue 34: median |error| on TTFT p50, TPOT p50 and TPOT p99
GOAL_COVERAGE = 0.90  # share of those figures inside the bar the points carry
LATENCY = ("ttft_p50_ms", "tpot_p50_ms", "tpot_p99_ms")
SCORED = (*LATENCY, "throughput_tok_s")


def calibrated(store: Store, study) -> tuple:
    """(this CPU's latest CalibParams of `study`, the model cards it was fitted on, the card)."""
    params = latest_params(study, store)[0].get(THIS)
    if params is None:
        raise SystemExit(f"no calibration of {study.name!r} on {THIS} in the store; run `pareto-atlas calibrate`")
    anchors = measured_points(study, store)
    hw = this_machine(study, store)
    return params, fitted_models(hw, study, model_card(study, anchors), anchors), hw


def held_out(store: Store, held, measure: bool) -> pd.DataFrame:
    if measure:
        from pareto_atlas.measure.campaign import run_campaign

        t0 = time.monotonic()
        s = run_campaign(
            held,
            store,
            bandwidth_gbs=this_machine(held, store).mem_bw_gbs,
            on_progress=lambda ev, info: ev == "done" and print(f"  measured {info['arm']}: {info['status']}"),
        )
        print(f"measured {s.measured}, kept {s.skipped}, failed {s.failed} ({time.monotonic() - t0:.0f} s)")
    df = measured_points(held, store)
    df = df[df.hardware.eq(THIS)].reset_index(drop=True) if len(df) else df
    if df.empty:
        raise SystemExit(f"no anchors of {held.name!r} in the store; run with --measure")
    return attach_load(df, store)


def score(df: pd.DataFrame, cards: list, params, fitted: set[str], hw) -> pd.DataFrame:
    """Per held-out anchor: its relative errors, the latency and throughput bars its point would
    carry, and whether that point is projected (its fit saw one size) rather than carried."""
    pred = predict(_anchors(df), cards, hw, params)
    meas = df.reindex(columns=list(TARGETS)).to_numpy(float)
    out = pd.DataFrame(pred / meas - 1.0, columns=list(TARGETS), index=df.index)
    bars = []
    for _, c in zip(df.itertuples(), cards):
        target = Target(c.name, c, (hw,), (Workload("w", 128, 32),), measured=False)
        p = carried_params(params, target, fitted, THIS)
        bars.append((p.lat_rel_err, p.thr_rel_err, SPEED_PROJECTED in p.provenance, c.name in fitted))
    out["lat_bar"], out["thr_bar"], out["projected"], out["fitted_model"] = zip(*bars)
    out["arm"], out["model"], out["shape"] = (
        df.arm.to_numpy(),
        [c.name for c in cards],
        [f"{p}/{n} x{c}" for p, n, c in zip(df.prompt_tokens, df.output_tokens, df.concurrency)],
    )
    # where each anchor's kernel cost comes from in this fit: fitted, borrowed from its family, or derived
    # from the roofline (e.g. the 1.5B's Q4_K_M runs real K-quant rows, which no default anchor runs)
    out["kernels"] = [f"{kernel_format(w, c)} {params.weight_cost(w, 'gemv', c)[1]}" for w, c in zip(df.weights, cards)]
    out["contended"] = contention_flags(df).to_numpy()
    out["other_cores"] = df.get("other_cpu_cores", pd.Series(np.nan, index=df.index)).to_numpy()
    return out


def group_lines(name: str, s: pd.DataFrame) -> list[str]:
    lines = [
        f"{name}: {len(s)} anchors ("
        + ", ".join(f"{a} {sh}, kernels {k}" for a, sh, k in zip(s.arm, s["shape"], s.kernels))
        + ")"
    ]
    if s.projected.all():
        return lines + [
            "  projected, not carried: the calibration saw one model size, so no transfer error stands behind "
            "a bar; signed median error " + ", ".join(f"{t} {np.nanmedian(s[t]):+.0%}" for t in SCORED)
        ]
    lines.append(
        f"  bar carried: latency ±{s.lat_bar.iloc[0]:.1%}, throughput ±{s.thr_bar.iloc[0]:.1%} "
        f"({'within-model: the fit saw this model' if s.fitted_model.all() else 'leave-one-model-out'})"
    )
    lines.append(
        f"  {'target':16s} {'median |err|':>12s} {'signed':>8s} {'goal':>5s} {'inside':>7s}  per anchor (error / bar)"
    )
    for t in SCORED:
        e = s[t].to_numpy(float)
        b = (s.thr_bar if t == "throughput_tok_s" else s.lat_bar).to_numpy(float)
        inside = np.abs(e) <= b
        goal = f"{GOAL_MEDIAN:.0%}" if t in LATENCY else "-"
        per = " ".join(f"{x:+.0%}" for x in e)
        lines.append(
            f"  {t:16s} {np.nanmedian(np.abs(e)):12.1%} {np.nanmedian(e):+8.1%} {goal:>5s} "
            f"{inside.sum():3d}/{len(e):<3d}  {per}"
        )
    e = s[list(LATENCY)].to_numpy(float)
    inside = np.abs(e) <= s.lat_bar.to_numpy(float)[:, None]
    med, cov = float(np.nanmedian(np.abs(e))), float(inside.mean())
    ok = med <= GOAL_MEDIAN and cov >= GOAL_COVERAGE
    lines.append(
        f"  pooled TTFT p50, TPOT p50, TPOT p99: median |err| {med:.1%} (goal <= {GOAL_MEDIAN:.0%}), "
        f"inside the bar {cov:.0%} (goal >= {GOAL_COVERAGE:.0%}): {'meets both' if ok else 'misses'}"
    )
    return lines


def run(store_path: Path, study_name: str, measure: bool) -> None:
    study, held = load_study(study_name), load_study(str(HELD_OUT))
    t0 = time.monotonic()
    with Store(store_path) as store:
        params, fitted, hw = calibrated(store, study)
        df = held_out(store, held, measure)
        cards = anchor_cards(held, df)
    s = score(df, cards, params, fitted, hw)
    print(
        f"\nbench_transfer on {store_path}: {study.name!r}'s calibration of {THIS} ({hw.mem_bw_gbs:.1f} GB/s probed), "
        f"fitted on {', '.join(sorted(fitted))}; load average {os.getloadavg()[0]:.2f}"
    )
    print(f"  {params.provenance}")
    if s.contended.any():
        print(
            "  measured beside other work (measure.contention, cores): "
            + ", ".join(f"{a} {c:.2f}" for a, c in zip(s.arm[s.contended], s.other_cores[s.contended]))
        )
    print("relative error: predicted / measured - 1; medians over anchors")
    unseen = s[~s.fitted_model]
    if len(unseen):
        print("\n".join(group_lines("held-out model (a size the fit never saw)", unseen)))
        if unseen.projected.all():
            p = carried_params(
                params, Target("x", cards[unseen.index[0]], (hw,), (), measured=False), fitted, THIS, study_name
            )
            print("  " + p.provenance.split(f"{SPEED_PROJECTED}", 1)[1].split("; ", 1)[-1])
    f16 = s[s.fitted_model]
    if len(f16):
        print("\n".join(group_lines("the fitted model at a new shape (F16)", f16)))
    fmt = params.weight_cost("F16", "gemv", cards[f16.index[0]] if len(f16) else None)[1] if len(f16) else ""
    if fmt:
        print(f"  F16's kernel cost in this calibration: {fmt}")
    print(f"\n{time.monotonic() - t0:.0f} s")


def wants_default(store_path: Path) -> bool:
    """Whether the store holds a calibration of the default study (it is then scored as such)."""
    if not store_path.exists():
        return False
    with Store(store_path) as store:
        return bool(len(store.calibrations(load_study("default").name)))
