"""How far this CPU's calibration carries to a model it never saw: the held-out error of each model
size predicted from a fit on the others, and of Qwen2.5-Coder-1.5B-Instruct predicted from a fit on
the 0.5B alone (the default calibration's situation), with the coverage of the error bar the
predicted points carry.

Reads the store of the built-in `sizes` study (`pareto-atlas build --study sizes --skip-quality`
leaves atlas-out/sizes-cpu/store.duckdb), measured with the project's own campaign code on
llama.cpp; `--measure` first measures what the store lacks. Two scenarios:

  0.5B alone -> 1.5B   the fit the default study makes (one size), its within-model error bar
                       (p90 of its leave-one-out), which is all a point carried to the 1.5B had;
  leave-one-model-out  each size predicted by a fit on the other sizes; its bar: the transfer
                       error (CalibParams.xfer_*) that fit measured by leave-one-model-out among
                       the sizes it saw, so the held-out model never informs its own bar.

Per target: the median |relative error| (goal <= 10 % for TTFT p50, TPOT p50 and TPOT p99) and the
coverage: the share of figures inside the bar (goal >= 90 %). Anchors measured beside other work
(measure.contention) are left out of every fit when enough are left, and are scored with their
contention printed: on a shared machine that is what the figures rest on.

    python benchmarks/bench_transfer.py [--store atlas-out/sizes-cpu/store.duckdb] [--measure]

On the default build's store (`--store atlas-out/default-cpu/store.duckdb`, or `--study default`) it
scores the default's calibration instead: benchmarks/transfer_default.py.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

from pareto_atlas.calibrate.fidelity import contention_flags, fit
from pareto_atlas.calibrate.fit import TARGETS, _anchors, predict
from pareto_atlas.calibrate.stage import THIS, anchor_cards, attach_load, this_machine
from pareto_atlas.simulate.params import CalibParams
from pareto_atlas.spec.study import load_study
from pareto_atlas.store import Store
from pareto_atlas.store.points import measured_points

SCORED = ("ttft_p50_ms", "tpot_p50_ms", "tpot_p99_ms", "throughput_tok_s")
GOAL_MEDIAN = 0.10  # median |error| a carried prediction should reach (TTFT p50, TPOT p50, TPOT p99)
GOAL_COVERAGE = 0.90  # share of carried figures inside the error bar they carry
TODAY = "+58 % TPOT p50, +90 % TTFT p50, -41 % throughput, 6 % inside ±27 % (issue 20, before this fit)"
SMALL, LARGE = "qwen2.5-0.5b", "qwen2.5-1.5b"


def load_anchors(store: Store, study) -> tuple[pd.DataFrame, list]:
    a = measured_points(study, store)
    a = a[a.hardware == THIS].reset_index(drop=True) if len(a) else a
    if a.empty:
        raise SystemExit(
            f"no anchors of study {study.name!r} in the store; run with --measure or "
            f"`pareto-atlas build --study sizes --skip-quality`"
        )
    a = attach_load(a, store)
    return a, anchor_cards(study, a)


def bar(p: CalibParams, target: str, carried: bool) -> float:
    if carried:
        return p.xfer_thr_rel_err if target == "throughput_tok_s" else p.xfer_lat_rel_err
    return p.thr_rel_err if target == "throughput_tok_s" else p.lat_rel_err


def errors(held: pd.DataFrame, cards: list, hw, p: CalibParams) -> pd.DataFrame:
    pred = predict(_anchors(held), cards, hw, p)
    meas = held.reindex(columns=list(TARGETS)).to_numpy(float)
    return pd.DataFrame(pred / meas - 1.0, columns=list(TARGETS), index=held.index)


def row(scenario: str, target: str, err: pd.Series, b: float) -> dict:
    """One scored line: the errors, which of them fall inside the bar `b` carried, and its label."""
    return {
        "scenario": scenario,
        "target": target,
        "err": err,
        "inside": err.abs() <= b if b == b else None,
        "bar": f"±{b:.0%}" if b == b else "n/a",
    }


def table(rows: list[dict]) -> list[str]:
    """One line per (scenario, target): median |err| and the coverage of the bar carried, goals beside."""
    out = [
        f"  {'scenario':34s} {'target':16s} {'n':>3s} {'median |err|':>12s} {'goal':>5s} {'bar':>8s} "
        f"{'coverage':>8s} {'goal':>5s}  verdict"
    ]
    for r in rows:
        e = r["err"].dropna()
        med = float(np.median(np.abs(e))) if len(e) else math.nan
        cov = float(r["inside"][e.index].mean()) if r["inside"] is not None and len(e) else math.nan
        goal = GOAL_MEDIAN if r["target"] != "throughput_tok_s" else None
        ok_med, ok_cov = goal is None or med <= goal, cov == cov and cov >= GOAL_COVERAGE
        verdict = (
            "n/a"
            if med != med
            else "meets both"
            if ok_med and ok_cov and goal
            else "meets coverage (no median goal)"
            if ok_cov
            else "misses both"
            if not ok_med
            else "misses coverage"
            if ok_med
            else "misses the median"
        )
        if goal is not None and ok_cov and not ok_med:
            verdict = "misses the median"
        out.append(
            f"  {r['scenario']:34s} {r['target']:16s} {len(e):3d} {med:12.1%} "
            f"{(f'{goal:.0%}' if goal else '-'):>5s} {r['bar']:>8s} {cov:8.0%} {GOAL_COVERAGE:5.0%}  {verdict}"
        )
    return out


def pooled_lines(rows: list[dict]) -> list[str]:
    """Per scenario, the bar's goal over the three latency figures pooled (TTFT p50, TPOT p50, TPOT
    p99): the median |error| of all of them and the share inside the bar they carried."""
    out = ["pooled over TTFT p50, TPOT p50 and TPOT p99 (the bar: median |error| <= 10 %, coverage >= 90 %)"]
    for sc in dict.fromkeys(r["scenario"] for r in rows):
        rs = [r for r in rows if r["scenario"] == sc and r["target"] != "throughput_tok_s"]
        err = pd.concat([r["err"].dropna().reset_index(drop=True) for r in rs])
        inside = pd.concat(
            [r["inside"][r["err"].dropna().index].reset_index(drop=True) for r in rs if r["inside"] is not None]
        )
        med, cov = float(np.median(np.abs(err))), float(inside.mean()) if len(inside) else math.nan
        ok = med <= GOAL_MEDIAN and cov >= GOAL_COVERAGE
        out.append(
            f"  {sc:34s} n {len(err):3d}  median |err| {med:6.1%}  coverage {cov:5.0%}  "
            f"{'meets both' if ok else 'misses'}"
        )
    return out


def signed(err: pd.DataFrame) -> str:
    return ", ".join(f"{t.replace('_ms', '').replace('_tok_s', '')} {np.nanmedian(err[t]):+.0%}" for t in SCORED)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", type=Path, default=Path("atlas-out/sizes-cpu/store.duckdb"))
    ap.add_argument("--measure", action="store_true", help="measure the missing anchors first (held-out ones too)")
    ap.add_argument(
        "--study",
        choices=("sizes", "default"),
        help="whose calibration is scored: the sizes study's (held out in turn) or the default's (the 1.5B and "
        "F16 at a new shape held out, benchmarks/transfer_study.toml); default: the default's where the store "
        "holds its calibration, else sizes",
    )
    args = ap.parse_args()
    from transfer_default import run, wants_default  # benchmarks/, beside this script

    if args.study == "default" or (args.study is None and wants_default(args.store)):
        return run(args.store, "default", args.measure)
    study = load_study("sizes")
    args.store.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with Store(args.store) as store:
        if args.measure:
            from pareto_atlas.measure.campaign import run_campaign

            s = run_campaign(study, store)
            print(f"measured {s.measured}, kept {s.skipped}, failed {s.failed}, re-measured (contended) {s.remeasured}")
        hw = this_machine(study, store)
        anchors, cards = load_anchors(store, study)
    names = pd.Series([c.name for c in cards], index=anchors.index)
    busy = contention_flags(anchors)
    print(
        f"bench_transfer: {len(anchors)} anchors of {names.nunique()} models from {args.store} "
        f"({hw.name}: {hw.mem_bw_gbs:.1f} GB/s probed)"
    )
    print("contention (measure.contention: other work on the machine during each anchor, in cores):")
    for m in dict.fromkeys(names):
        mine = anchors[names == m]
        c = mine.other_cpu_cores
        print(
            f"  {m:14s} {len(mine):2d} anchors, {int(busy[names == m].sum()):2d} contended (> 0.25 cores); "
            f"other work median {np.nanmedian(c):.2f}, max {np.nanmax(c):.2f} cores; arms: {', '.join(mine.arm)}"
        )
    missing = sorted({a.name for a in study.arms} - set(anchors.arm))
    if missing:
        print(f"  not measured yet: {', '.join(missing)} (--measure measures them)")

    rows: list[dict] = []
    # 1. the default calibration's situation: one size (the 0.5B), carried to the 1.5B
    small, large = anchors[names == SMALL], anchors[names == LARGE]
    if len(small) >= 2 and len(large):
        cal = fit(small, [cards[i] for i in small.index], hw, engine="llamacpp", loo=len(small) >= 3, lomo=False)
        err = errors(large, [cards[i] for i in large.index], hw, cal.params)
        print(
            f"\n0.5B alone -> 1.5B: fit on {len(cal.residuals)} anchors; signed median error on the 1.5B: "
            f"{signed(err)} "
            f"(today: {TODAY}); bar carried: the within-model ±{cal.params.lat_rel_err:.0%} latency, "
            f"±{cal.params.thr_rel_err:.0%} throughput"
        )
        rows += [row("0.5B alone -> 1.5B", t, err[t], bar(cal.params, t, False)) for t in SCORED]
    # 2. each size from a fit on the others, its bar measured without it
    pooled: dict[str, list[dict]] = {t: [] for t in SCORED}
    for m in dict.fromkeys(names):
        rest = anchors[names != m]
        if len(rest) < 2:
            continue
        cal = fit(rest, [cards[i] for i in rest.index], hw, engine="llamacpp", loo=False, lomo=True)
        held = anchors[names == m]
        err = errors(held, [cards[i] for i in held.index], hw, cal.params)
        xfer = cal.params.xfer_lat_rel_err
        carried = xfer == xfer
        print(
            f"held out {m}: fit on {', '.join(sorted(set(names[names != m])))} ({len(cal.residuals)} anchors, "
            f"overhead {cal.params.overhead_step_s * 1e3:.1f} ms/step, eff_bw {cal.params.eff_bw:.2f}); "
            f"signed median error: {signed(err)}; its bar, from leave-one-model-out among the others: "
            + (
                f"±{xfer:.0%} latency, ±{cal.params.xfer_thr_rel_err:.0%} throughput"
                if carried
                else "not measured (one model left): the within-model bar stands in"
            )
        )
        for t in SCORED:
            r = row(f"LOMO: {m} held out", t, err[t], bar(cal.params, t, carried))
            rows.append(r)
            pooled[t].append(r)
    if any(pooled.values()):
        for t in SCORED:
            rs = pooled[t]
            inside = pd.concat([r["inside"] if r["inside"] is not None else r["err"] * np.nan for r in rs])
            rows.append(
                {
                    "scenario": "LOMO: every size held out",
                    "target": t,
                    "bar": "per fold",
                    "err": pd.concat([r["err"] for r in rs]).reset_index(drop=True),
                    "inside": inside.reset_index(drop=True).astype(float) > 0.5,
                }
            )
    print("\nheld-out error of a model the fit did not see (relative: predicted / measured - 1)")
    print("\n".join(table(rows)))
    print("\n".join(pooled_lines(rows)))
    # 3. what the atlas carries: the fit on every size, its leave-one-model-out bar
    if names.nunique() >= 2:
        cal = fit(anchors, cards, hw, engine="llamacpp", loo=False, lomo=True)
        print(
            f"\nfit on every size ({', '.join(sorted(set(names)))}): overhead {cal.params.overhead_step_s * 1e3:.1f} "
            f"ms/step, eff_bw {cal.params.eff_bw:.2f}; error bar carried to a model it did not see: latency "
            f"±{cal.params.xfer_lat_rel_err:.0%}, throughput ±{cal.params.xfer_thr_rel_err:.0%} "
            f"(CalibParams.xfer_*; within-model ±{cal.params.lat_rel_err:.0%} / ±{cal.params.thr_rel_err:.0%})"
        )
    print(f"\n{time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()
