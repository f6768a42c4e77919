"""Held-out error of the calibrated simulator on configurations it never saw, measured now.

Takes the store of a built study (`make atlas` leaves atlas-out/default-cpu/store.duckdb), measures
the configurations of benchmarks/heldout_study.toml on the real engine (twice each; resumable: the
anchors are kept in the same store under their own study), predicts each from the study's latest
calibration, and prints the error beside the targets (median <= 3 % for TTFT/TPOT P50, <= 8 % for
P99) and beside the held-out configurations' own repeat-to-repeat spread, and how far the machine
drifted since the calibration (a calibrated configuration measured again). Reference numbers are
printed, never used. About 5 minutes on 2 cores; run it on a quiet machine.

    python benchmarks/bench_heldout.py --store atlas-out/default-cpu/store.duckdb
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from pareto_atlas.calibrate.fidelity import repeat_spread
from pareto_atlas.calibrate.fit import TARGETS, _anchors, predict
from pareto_atlas.calibrate.stage import THIS, attach_load, model_card, this_machine
from pareto_atlas.measure.campaign import run_campaign
from pareto_atlas.simulate.stage import latest_params
from pareto_atlas.spec.study import load_study
from pareto_atlas.store import Store
from pareto_atlas.store.points import measured_points

GOALS = {"ttft_p50_ms": 0.03, "tpot_p50_ms": 0.03, "ttft_p99_ms": 0.08, "tpot_p99_ms": 0.08, "throughput_tok_s": None}
REFERENCES = "Vidur < 9 %, LLMServingSim ~3 % on means"
HELDOUT = Path(__file__).with_name("heldout_study.toml")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", default="atlas-out/default-cpu/store.duckdb")
    ap.add_argument("--study", default="default", help="the calibrated study (built-in name or TOML)")
    ap.add_argument("--heldout", default=str(HELDOUT), help="the study of held-out configurations")
    a = ap.parse_args()
    if not Path(a.store).exists():
        raise SystemExit(f"--store {a.store}: no such store; run `make atlas` first")
    study, held = load_study(a.study), load_study(a.heldout)
    with Store(a.store) as store:
        params = latest_params(study, store)[0].get(THIS)
        if params is None:
            raise SystemExit(f"--store {a.store}: no calibration of {study.name!r} on {THIS}; run `pareto-atlas calibrate`")
        trained = measured_points(study, store)
        seen = set(trained.label + "@" + trained.concurrency.astype(str))
        t0 = time.monotonic()
        s = run_campaign(held, store, bandwidth_gbs=this_machine(held, store).mem_bw_gbs,
                         on_progress=lambda ev, info: ev == "done" and print(f"  measured {info['arm']}: {info['status']}"))
        print(f"measured {s.measured}, kept {s.skipped} from earlier runs, failed {s.failed} ({time.monotonic() - t0:.0f} s)")
        df = measured_points(held, store)
        df = df[df.hardware == THIS].reset_index(drop=True)
        # the clients' recorded pauses are the load (like a trace's arrival times), not its outcome
        df = attach_load(df, store)
        hw = this_machine(study, store)
        # A configuration the calibration also measured is not scored: measured again now, it says
        # how far this machine has drifted since the calibration's campaign.
        again = (df.label + "@" + df.concurrency.astype(str)).isin(seen)
        ref, df = df[again].reset_index(drop=True), df[~again].reset_index(drop=True)
        if df.empty:
            raise SystemExit(f"--heldout {a.heldout}: every configuration is also in the calibration; nothing held out")
        pred = predict(_anchors(df), model_card(study, trained), hw, params)

    meas = df[list(TARGETS)].to_numpy(float)
    err = pd.DataFrame(pred / meas - 1.0, columns=list(TARGETS))
    err.insert(0, "arm", df.arm)
    spread = repeat_spread(df)
    print(f"\n== Held-out: {len(df)} anchors of {df.arm.nunique()} configurations the calibration of "
          f"{study.name!r} ({len(trained)} anchors) never saw, predicted by its fit ({params.provenance})")
    print(f"   references: {REFERENCES}")
    with pd.option_context("display.width", 200, "display.float_format", "{:+.1%}".format):
        print(err.to_string(index=False))
    print(f"\n  {'target':16s} {'median |err|':>12s} {'goal':>6s} {'repeat spread':>14s}  verdict")
    for t, goal in GOALS.items():
        med, rep = float(np.nanmedian(err[t].abs())), spread.get(t, np.nan)
        if goal is None:
            verdict = "(no goal)"
        else:
            verdict = ("meets the goal" if med <= goal else
                       "within the repeat spread" if rep == rep and med <= rep else "misses")
        g = f"{goal:6.0%}" if goal else f"{'-':>6s}"
        print(f"  {t:16s} {med:12.1%} {g} {rep:14.1%}  {verdict}")
    for label, g in ref.groupby("label"):
        then = trained[(trained.label == label) & trained.concurrency.isin(g.concurrency)]
        drift = " ".join(f"{t.replace('_ms', '')} {g[t].mean() / then[t].mean() - 1:+.1%}" for t in TARGETS)
        print(f"  drift of this machine since the calibration ({label} measured again, {len(g)} vs {len(then)} anchors): {drift}")
    print(f"  error bar the atlas carries for simulated points on {THIS}: latency ±{params.lat_rel_err:.1%}, "
          f"throughput ±{params.thr_rel_err:.1%}; held-out errors inside it: "
          f"{np.mean(err[[t for t in TARGETS if t != 'throughput_tok_s']].abs().to_numpy() <= params.lat_rel_err):.0%}")


if __name__ == "__main__":
    main()
