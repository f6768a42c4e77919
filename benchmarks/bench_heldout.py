"""Held-out error of the calibrated simulator on configurations it never saw, measured now, with
this machine's drift measured beside them and cancelled.

Takes the store of a built study (`make atlas` leaves atlas-out/default-cpu/store.duckdb), measures
the configurations of benchmarks/heldout_study.toml on the real engine (other slot counts, formats
at untrained concurrency, lengths the study never saw, a Poisson open loop, a trace) *interleaved*
with the calibration's reference configuration (ref, A, ref, B, ..., ref), and predicts each from
the study's latest calibration. A shared VM drifts by several percent within minutes, which is the
size of the errors being measured; so the reference's ratio to the calibration's own anchors of
the same configuration (measured now / measured then), per target, is
tracked over time and interpolated at each held-out anchor (time: the middle of its run), and every
held-out error is shown raw and drift-corrected (the measured figure divided by that ratio).

Per target it prints the median and P90 of |error| and the coverage (share of held-out figures
inside the error bar the atlas carries for simulated points), raw and corrected, beside the goals
(median <= 5 % for TTFT/TPOT P50, <= 10 % for P99, coverage >= 90 %). Reference numbers are printed, never used.
Resumable: anchors are kept in the same store under their own study. About 8 minutes on a quiet
2-core machine; on a busy one the drift correction is what keeps the figures readable.

    python benchmarks/bench_heldout.py --store atlas-out/default-cpu/store.duckdb
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from pareto_atlas.calibrate.fidelity import contention_flags
from pareto_atlas.calibrate.fit import TARGETS, _anchors, predict
from pareto_atlas.calibrate.stage import THIS, attach_load, model_card, this_machine
from pareto_atlas.measure.campaign import AnchorPlan, anchor_id, plan, run_campaign
from pareto_atlas.simulate.params import CalibParams
from pareto_atlas.simulate.stage import latest_params
from pareto_atlas.spec.study import Study, load_study
from pareto_atlas.store import Store
from pareto_atlas.store.points import measured_points

GOALS = {"ttft_p50_ms": 0.05, "tpot_p50_ms": 0.05, "ttft_p99_ms": 0.10, "tpot_p99_ms": 0.10, "throughput_tok_s": None}
COVERAGE_GOAL = 0.90  # share of held-out figures inside the error bar the atlas carries
REFERENCES = "Vidur < 9 %, LLMServingSim ~3 % on means"
HELDOUT = Path(__file__).with_name("heldout_study.toml")
KEY = ("label", "concurrency", "prompt_tokens", "output_tokens")  # one configuration under one load


def interleaved(held: Study, ref: str) -> list[AnchorPlan]:
    """Every held-out anchor with the reference measured before, between and after them."""
    others = [p for p in plan(held) if p.arm.name != ref]
    arm = held.arm(ref)
    refs = [AnchorPlan(anchor_id(held, arm, r), arm, r) for r in range(len(others) + 1)]
    return [p for pair in zip(refs, others + [None]) for p in pair if p is not None]


def config_key(df: pd.DataFrame) -> pd.Series:
    return df[list(KEY)].astype(str).agg("@".join, axis=1) + "@" + df["rate_rps"].fillna(0).astype(str)


def anchor_times(store: Store, study: str) -> pd.Series:
    """Each anchor's time (s since the epoch): the middle of its run."""
    a = store.anchors(study)
    start, end = (pd.to_datetime(a[c]).map(pd.Timestamp.timestamp).to_numpy() for c in ("started_at", "finished_at"))
    return pd.Series((start + end) / 2, index=a.anchor_id)


def drift_at(t: np.ndarray, t_ref: np.ndarray, ratio_ref: np.ndarray) -> np.ndarray:
    """The reference's drift ratio (measured now / in the calibration) interpolated at times t (held flat beyond its ends);
    1 where the reference was not measured."""
    ok = np.isfinite(ratio_ref)
    if not ok.any():
        return np.ones(len(t))
    order = np.argsort(t_ref[ok])
    return np.interp(t, t_ref[ok][order], ratio_ref[ok][order])


def error_bar(params: CalibParams, target: str) -> float:
    return params.thr_rel_err if target == "throughput_tok_s" else params.lat_rel_err


def summary_rows(raw: pd.DataFrame, corr: pd.DataFrame, params: CalibParams) -> list[str]:
    lines = [
        f"  {'target':16s} {'median |err|':>19s} {'P90 |err|':>19s} {'coverage':>17s}  {'goal':>5s}  verdict "
        f"(corrected)",
        f"  {'':16s} {'raw':>9s} {'corr.':>9s} {'raw':>9s} {'corr.':>9s} {'raw':>8s} {'corr.':>8s}",
    ]
    for t, goal in GOALS.items():
        bar = error_bar(params, t)
        r, c = raw[t].abs().dropna(), corr[t].abs().dropna()
        med_c = float(np.median(c)) if len(c) else np.nan
        cov_c = float(np.mean(c <= bar)) if len(c) else np.nan
        verdict = (
            "(no goal)"
            if goal is None
            else "meets the goal"
            if med_c <= goal and cov_c >= COVERAGE_GOAL
            else "misses the median"
            if med_c > goal
            else f"misses coverage ({COVERAGE_GOAL:.0%})"
        )
        g = f"{goal:5.0%}" if goal else f"{'-':>5s}"
        lines.append(
            f"  {t:16s} {np.median(r):9.1%} {med_c:9.1%} {np.percentile(r, 90):9.1%} "
            f"{np.percentile(c, 90):9.1%} {np.mean(r <= bar):8.0%} {np.mean(c <= bar):8.0%}  {g}  {verdict}"
        )
    return lines


def score(df: pd.DataFrame, trained: pd.DataFrame, reference: str):
    """(reference anchors by time, held-out anchors, raw errors, drift-corrected errors, the reference's
    drift ratio per target: measured now / the calibration's anchors of the same configuration) from
    anchors carrying their predictions (`pred`) and times (`t`)."""
    is_ref = df.arm.eq(reference)
    seen = set(config_key(trained))
    if not is_ref.any() or not config_key(df[is_ref]).isin(seen).all():
        raise SystemExit(
            f"--reference {reference}: no anchor of a configuration the calibration measured; it cannot show drift"
        )
    also = ~is_ref & config_key(df).isin(seen)
    if also.any():
        print(f"  not scored (the calibration measured them too): {', '.join(sorted(set(df.arm[also])))}")
    busy = contention_flags(df)
    if busy.any():  # measured beside other work on the machine (measure.contention): not scored
        print(
            "  left out, measured beside other work on the machine: "
            + ", ".join(f"{a} ({c:.2f} cores)" for a, c in zip(df.arm[busy], df.other_cpu_cores[busy]))
        )
    ref, held = df[is_ref & ~busy].sort_values("t"), df[~is_ref & ~also & ~busy].reset_index(drop=True)
    if held.empty:
        raise SystemExit("every held-out configuration is also in the calibration; nothing held out")
    # Drift: how far the reference runs from what the calibration's own anchors of the same
    # configuration measured (their mean), per target, over time. Not measured / predicted: that
    # would also impose the reference's fit residual on every held-out figure.
    same = trained[config_key(trained).isin(set(config_key(ref)))]
    ratio = ref[list(TARGETS)].to_numpy(float) / same[list(TARGETS)].to_numpy(float).mean(axis=0)
    outside = held.arm[(held.t < ref.t.min()) | (held.t > ref.t.max())]
    if len(outside):  # kept from an earlier run: no reference brackets them
        print(
            f"  measured outside the reference's span (an earlier run), corrected by the nearest reference only: "
            f"{', '.join(sorted(set(outside)))}"
        )
    drift = np.column_stack([drift_at(held.t.to_numpy(), ref.t.to_numpy(), ratio[:, j]) for j in range(len(TARGETS))])
    # an open loop's throughput is set by its arrivals, not by how fast the machine runs that day
    drift[held.concurrency.to_numpy() == 0, TARGETS.index("throughput_tok_s")] = 1.0
    pred, meas = np.stack(held.pred), held[list(TARGETS)].to_numpy(float)
    raw = pd.DataFrame(pred / meas - 1.0, columns=list(TARGETS))
    corr = pd.DataFrame(pred * drift / meas - 1.0, columns=list(TARGETS))
    return ref, held, raw, corr, ratio


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", default="atlas-out/default-cpu/store.duckdb")
    ap.add_argument("--study", default="default", help="the calibrated study (built-in name or TOML)")
    ap.add_argument("--heldout", default=str(HELDOUT), help="the study of held-out configurations")
    ap.add_argument(
        "--reference",
        default="drift-ref",
        help="the held-out study's arm that repeats a configuration the calibration measured",
    )
    a = ap.parse_args()
    if not Path(a.store).exists():
        raise SystemExit(f"--store {a.store}: no such store; run `make atlas` first")
    study, held_study = load_study(a.study), load_study(a.heldout)
    held_study.arm(a.reference)  # a StudyError naming the arms if it is not one
    with Store(a.store) as store:
        params = latest_params(study, store)[0].get(THIS)
        if params is None:
            raise SystemExit(
                f"--store {a.store}: no calibration of {study.name!r} on {THIS}; run `pareto-atlas calibrate`"
            )
        trained = measured_points(study, store)
        order = interleaved(held_study, a.reference)
        t0 = time.monotonic()
        s = run_campaign(
            held_study,
            store,
            plans=order,
            bandwidth_gbs=this_machine(held_study, store).mem_bw_gbs,
            on_progress=lambda ev, info: ev == "done" and print(f"  measured {info['arm']}: {info['status']}"),
        )
        print(
            f"measured {s.measured}, kept {s.skipped} from earlier runs, failed {s.failed} ({time.monotonic() - t0:.0f} s)"
        )
        df = measured_points(held_study, store)
        df = df[df.hardware.eq(THIS) & df.anchor_id.isin({p.anchor_id for p in order})].reset_index(drop=True)
        # the clients' recorded pauses and an open loop's sends are the load (like a trace's rows), not its outcome
        df = attach_load(df, store)
        df["t"] = anchor_times(store, held_study.name).reindex(df.anchor_id).to_numpy()
        hw = this_machine(study, store)
        df["pred"] = list(predict(_anchors(df), model_card(study, trained), hw, params))

    ref, held, raw, corr, ratio = score(df, trained, a.reference)
    print(
        f"\n== Held-out: {len(held)} anchors of {held.arm.nunique()} configurations the calibration of "
        f"{study.name!r} ({len(trained)} anchors) never saw, predicted by its fit ({params.provenance})"
    )
    print(f"   references: {REFERENCES}")
    print(
        f"   drift: {a.reference} measured {len(ref)} times around them; its ratio to the calibration's anchors of it over "
        f"{(ref.t.max() - ref.t.min()) / 60:.0f} min:"
    )
    for j, t in enumerate(TARGETS):
        r = ratio[:, j]
        print(f"     {t:16s} first {r[0]:.3f}  last {r[-1]:.3f}  range {np.nanmin(r):.3f}..{np.nanmax(r):.3f}")
    table = pd.concat(
        [held[["arm", "workload", "concurrency"]], raw.add_suffix(" raw"), corr.add_suffix(" corr")], axis=1
    )
    cols = ["arm", "workload", "concurrency"] + [f"{t} {k}" for t in TARGETS for k in ("raw", "corr")]
    with pd.option_context("display.width", 250, "display.max_columns", 20, "display.float_format", "{:+.1%}".format):
        print(
            table[cols]
            .rename(columns=lambda c: c.replace("_ms", "").replace("throughput_tok_s", "thr"))
            .to_string(index=False)
        )
    print(
        f"\n  error = predicted / measured - 1; corrected: measured divided by the reference's interpolated ratio "
        f"(not an open loop's throughput, which its arrivals set); "
        f"coverage: |error| within the bar simulated points carry (latency ±{params.lat_rel_err:.1%}, "
        f"throughput ±{params.thr_rel_err:.1%})"
    )
    print("\n".join(summary_rows(raw, corr, params)))


if __name__ == "__main__":
    main()
