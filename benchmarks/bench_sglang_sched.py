"""aiconfigurator's published SGLang rows (spec/published_multigpu.csv, engine sglang: H200 Llama-3.1-8B
FP8, one GPU and TP 2/4/8) predicted with the current H200 one-GPU published fit, nothing fitted here:
each row as aiconfigurator's benchmark ran it (calibrate.published_runs: the measured phase of
ROUNDS x clients requests from an idle engine, read as the mean), once under the policy
published_runs gives SGLang and once under each policy named with --policy (issue 31, SGLang's own
scheduler: simulate.schedulers). TP>1 rows run on the H200 link fit of 2026-12-02-multigpu-link.md
(link_eff 0.55, SGLang's latency x16), given here, not refitted.

    python benchmarks/bench_sglang_sched.py [--policy mixed+overlap ...] [--rows]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np

from pareto_atlas.calibrate.fit import TARGETS
from pareto_atlas.calibrate.published import card_frame, for_atlas
from pareto_atlas.calibrate.published_cache import fitted
from pareto_atlas.calibrate.published_runs import apply_runs, predict_rows
from pareto_atlas.calibrate.published_table import load_multigpu, load_published
from pareto_atlas.spec.cards import shipped_hardware

CARD = "H200"
LINK_EFF, SGLANG_LATENCY = 0.55, 16.0  # H200's link fit, 2026-12-02-multigpu-link.md ("H200 after")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", action="append", default=[], help="another kernel policy for the SGLang rows")
    ap.add_argument("--rows", action="store_true", help="print every row")
    a = ap.parse_args()
    t = time.perf_counter()
    table = load_multigpu().rows
    rows = table[(table.engine == "sglang") & (table.gpu == CARD)].reset_index(drop=True)
    (cal,) = [c for g, c in for_atlas(fitted(load_published(), [CARD])).items() if g == CARD]
    params = replace(cal.params, link_eff=LINK_EFF, link_latency_scale=SGLANG_LATENCY)
    print(f"{len(rows)} SGLang rows on {CARD}; fit ({time.perf_counter() - t:.0f} s): {cal.params.provenance}")
    hw = shipped_hardware()[CARD]
    frame, models = card_frame(rows, hw)
    frame, runs = apply_runs(frame, rows)
    meas = frame[list(TARGETS)].to_numpy(float)
    it, ip = TARGETS.index("ttft_p50_ms"), TARGETS.index("tpot_p50_ms")
    tp = rows.tp.astype(int).to_numpy()
    setups = {f"published_runs ({runs[0].batching})": None} | {p: p for p in a.policy}
    for name, pol in setups.items():
        f = frame.copy()
        rr = runs if pol is None else [replace(r, batching=pol) for r in runs]
        if pol is not None:
            f["batching"] = pol
        t = time.perf_counter()
        pred = predict_rows(f, models, hw, params, rr)
        err = pred / meas - 1.0
        print(f"\n{name} ({time.perf_counter() - t:.0f} s):")
        for label, on in (("one GPU", tp == 1), ("TP>1", tp > 1), ("all", tp > 0)):
            e = err[on]
            print(
                f"  {label:8s} {on.sum():3d} rows  TTFT median |err| {np.median(np.abs(e[:, it])):5.0%} "
                f"(signed {np.median(e[:, it]):+5.0%})  TPOT {np.median(np.abs(e[:, ip])):5.0%} "
                f"(signed {np.median(e[:, ip]):+5.0%})"
            )
        if a.rows:
            for i, r in rows.iterrows():
                print(
                    f"    tp{tp[i]} {int(r.prompt_tokens):5d}/{int(r.output_tokens):<5d} x{int(float(r.load_value)):<4d} "
                    f"TTFT {pred[i, it]:8.1f} vs {meas[i, it]:8.1f} ({err[i, it]:+6.0%})  "
                    f"TPOT {pred[i, ip]:6.2f} vs {meas[i, ip]:6.2f} ({err[i, ip]:+5.0%})"
                )


if __name__ == "__main__":
    main()
