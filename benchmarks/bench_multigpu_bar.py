"""The multi-GPU points' carried bar before and after, on the same held-out errors, and where those
errors come from.

Each card's link fit (calibrate.published_link, on spec/published_multigpu.csv's TP2-TP8 rows over the
card's one-GPU published fits) predicts every sampled row three times from fits that never saw it:
leaving its source out (LOSO), its model out (LOMO) and its engine out (LOEO). From those errors:

- before (2026-12-02, first section): the p90 of every scheme's figures pooled (covers 90 % of them by
  construction), its split check on (source, model) groups;
- after (calibrate.heldout_bar): the quantile at the level whose bar, set without one row group
  (published_multigpu.bar_groups: one engine's sweep of one model in one document), covers at least
  95 % of that group's figures pooled over the groups; checked on a split of the groups (set on one
  half, counted on the other, each way) and nested (set without each group, its level chosen among the
  others, counted on the group). Its width is printed beside its coverage.

--before also fits each card's link with every row under its engine's default scheduler and read as
medians (as before calibrate.published_runs), on the same one-GPU fits, and prints both side by side:
the held-out errors before and after the rows run as their source ran them.

--wide-grid also fits each card's link with link_eff searched from 0.25 (WIDE_EFFS, the grid before
2026-12-02's link pass; published_link.LINK_EFFS now starts at 0.55, the slowest all-reduce measured at
a prefill's message size), rows as their source ran them, on the same one-GPU fits, side by side.

--breakdown prints every row's held-out TTFT and TPOT error per scheme with its setup (engine, TP,
lengths, clients, source). --save DIR writes each card's anchors (setup, measured, held-out errors);
--anchors CARD=CSV reads such a file instead of fitting (the bar is a function of the errors alone).

    python benchmarks/bench_multigpu_bar.py [--card H100-SXM --card H200] [--before] [--wide-grid] [--breakdown]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from pareto_atlas.calibrate.fidelity import LATENCY
from pareto_atlas.calibrate.fit import TARGETS
from pareto_atlas.calibrate.heldout_bar import BAR_QUANTILE, LOGO_TARGET, carried_bar, coverage, quantile_bar
from pareto_atlas.calibrate.published_link import LINK_EFFS, SCHEMES, link_calibrations
from pareto_atlas.calibrate.published_multigpu import THR, bar_groups, scheme_errors


WIDE_EFFS = (0.25, 0.4) + LINK_EFFS  # the link_eff grid before 2026-12-02's link pass


def _figs(a: pd.DataFrame, schemes: tuple[str, ...], targets: tuple[str, ...]) -> np.ndarray:
    return np.concatenate([a[f"{t}_{sc}"].to_numpy(float) for sc in schemes for t in targets])


def _before(held: dict[str, np.ndarray], groups: np.ndarray) -> tuple[float, float, float, float]:
    """The first section's rule: the plain p90 of every figure pooled, its split on `groups` (alternating)."""
    lat = [TARGETS.index(t) for t in LATENCY]
    thr = [TARGETS.index(THR)]

    def pick(rows: np.ndarray, cols: list[int]) -> np.ndarray:
        v = np.abs(np.concatenate([h[rows][:, cols].ravel() for h in held.values()]))
        return v[np.isfinite(v)]

    every = np.ones(len(groups), bool)
    bl, bt = quantile_bar(pick(every, lat)), quantile_bar(pick(every, thr))
    order = {g: i for i, g in enumerate(dict.fromkeys(groups))}
    half = np.array([order[g] % 2 == 0 for g in groups])
    ways = []
    for a in (half, ~half):
        la, ta = pick(a, lat), pick(a, thr)
        xl, xt = quantile_bar(la), (quantile_bar(ta) if len(ta) else 0.25)
        ways.append(float(np.concatenate([pick(~a, lat) <= xl, pick(~a, thr) <= xt]).mean()))
    return bl, bt, ways[0], ways[1]


def _breakdown(card: str, an: pd.DataFrame) -> None:
    print(f"\n{card}: held-out error per row (LOSO / LOMO / LOEO), measured TTFT and TPOT")
    for _, r in an.iterrows():
        cells = []
        for t in ("ttft_p50_ms", "tpot_p50_ms", THR):
            e = [r[f"{t}_{sc}"] for sc in SCHEMES]
            if not np.isfinite(e).any():
                continue
            cells.append(f"{t.split('_')[0]} " + "/".join("-" if e_ != e_ else f"{100 * e_:+.0f}" for e_ in e) + " %")
        meas = f"{r['ttft_p50_ms_measured']:.0f} / {r['tpot_p50_ms_measured']:.1f} ms"
        print(
            f"  {r.source_id[:26]:<26} {r.engine:<6} {r.model:<14} {r.weights:<4} TP{r.tp} "
            f"{r.prompt_tokens}/{r.output_tokens} {r.load} {r.load_value}: {meas}; {'; '.join(cells)}"
        )


def _groups(card: str, an: pd.DataFrame) -> None:
    """Per row group (bar_groups), the signed median held-out error of TTFT / TPOT / throughput per scheme."""
    print(f"\n{card}: signed median held-out error per row group, TTFT / TPOT / throughput (LOSO; LOMO; LOEO)")
    g = bar_groups(an)
    for grp in dict.fromkeys(g):
        on = an[g == grp]
        cells = []
        for sc in SCHEMES:
            v = [on[f"{t}_{sc}"].to_numpy(float) for t in ("ttft_p50_ms", "tpot_p50_ms", THR)]
            cells.append("/".join(f"{100 * np.nanmedian(x):+.0f}" if np.isfinite(x).any() else "-" for x in v))
        print(f"  {grp:<62} {len(on):>2} rows: {'; '.join(cells)} %")


def _side_by_side(after: dict, before: dict, what: str = "engine defaults -> each row as its source ran it") -> None:
    """Per card and scheme, the held-out median |error| TTFT / TPOT / throughput of `before` (by default
    every row under its engine's default scheduler) and `after` (each row as its source ran it), one-GPU
    fits alike."""
    print(f"\nheld-out median |error| TTFT / TPOT / throughput: {what}")
    for card, cal in after.items():
        b = before[card]
        print(
            f"  {card}: link_eff {b.link_eff:.2f}, latency x{b.link_latency_scale:g} -> {cal.link_eff:.2f}, "
            f"x{cal.link_latency_scale:g}{''.join(f', {e} x{v:g}' for e, v in cal.latency_by_engine.items())}; bar ±{b.lat_bar:.0%} / ±{b.thr_bar:.0%} -> ±{cal.lat_bar:.0%} / ±{cal.thr_bar:.0%}"
        )
        for sc in SCHEMES:
            print(f"    {sc}: {scheme_errors(b.anchors, sc)} -> {scheme_errors(cal.anchors, sc)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--card", action="append", help="cards (default H100-SXM and H200)")
    ap.add_argument("--anchors", action="append", default=[], help="CARD=CSV: a card's saved anchors, not refitted")
    ap.add_argument("--save", type=Path, help="write each card's anchors to DIR/<card>.csv")
    ap.add_argument("--breakdown", action="store_true", help="print every row's held-out errors with its setup")
    ap.add_argument(
        "--before",
        action="store_true",
        help="also fit with every row under its engine's default scheduler, side by side",
    )
    ap.add_argument(
        "--wide-grid",
        action="store_true",
        help="also fit with link_eff searched from 0.25 (the grid before the link pass), side by side",
    )
    ap.add_argument(
        "--gemm-floor",
        choices=("on", "off"),
        help="a linear call's fixed cost (simulate.gemm_floor.MODE; default: the product's)",
    )
    ap.add_argument(
        "--measured-fallback",
        choices=("on", "off"),
        help="an engine without training rows takes its all-reduce's measured latency "
        "(published_link.MEASURED_FALLBACK; default: the product's)",
    )
    a = ap.parse_args()
    if a.measured_fallback:
        import pareto_atlas.calibrate.published_link as published_link

        published_link.MEASURED_FALLBACK = a.measured_fallback == "on"
    if a.gemm_floor:
        from pareto_atlas.simulate import gemm_floor

        gemm_floor.MODE = a.gemm_floor
    t = time.perf_counter()
    if a.anchors:
        pairs = [s.split("=", 1) for s in a.anchors]
        if any(len(p) != 2 for p in pairs):
            raise SystemExit("--anchors: expected CARD=CSV")
        cards = {c: pd.read_csv(p) for c, p in pairs}
        print(f"anchors read from {', '.join(p for _, p in pairs)} (held-out errors of an earlier link fit)")
    else:
        cals = link_calibrations(a.card or ["H100-SXM", "H200"])
        cards = {c: cal.anchors for c, cal in cals.items()}
        print(f"link fits of {', '.join(cals)} ({time.perf_counter() - t:.0f} s, from the fit cache where unchanged)")
        for c, cal in cals.items():
            print(f"  {c}: {cal.provenance()}")
        if a.before:
            _side_by_side(cals, link_calibrations(list(cals), as_run=False))
        if a.wide_grid:
            wide = link_calibrations(list(cals), effs=WIDE_EFFS)
            _side_by_side(cals, wide, f"link_eff from {WIDE_EFFS[0]:g} -> from {LINK_EFFS[0]:g}")
            if a.save:
                for c, cal in wide.items():
                    a.save.mkdir(parents=True, exist_ok=True)
                    cal.anchors.to_csv(a.save / f"{c}-wide.csv", index=False)
            if a.breakdown:
                for c, cal in wide.items():
                    _groups(f"{c} link_eff from {WIDE_EFFS[0]:g}", cal.anchors)
    for card, an in cards.items():
        if a.save:
            a.save.mkdir(parents=True, exist_ok=True)
            an.to_csv(a.save / f"{card}.csv", index=False)
        groups = bar_groups(an)
        print(
            f"\n{card}: {len(an)} rows, {an.source_id.nunique()} sources, {an.model.nunique()} models, "
            f"{len(set(groups))} row groups (source, model, engine, weights)"
        )
        for sc in SCHEMES:
            print(f"  {sc} median |error| TTFT / TPOT / throughput: {scheme_errors(an, sc)}")
        held = {sc: an[[f"{t}_{sc}" for t in TARGETS]].to_numpy(float) for sc in SCHEMES}
        la, ta = _figs(an, SCHEMES, LATENCY), _figs(an, SCHEMES, (THR,))
        fin = lambda v: v[np.isfinite(v)]
        both = lambda bl, bt: np.concatenate([np.abs(fin(la)) <= bl, np.abs(fin(ta)) <= bt]).mean()
        ol, ot, s1, s2 = _before(held, (an.source_id + " " + an.model).to_numpy())
        print(
            f"  before: p90 of all held-out figures  ±{ol:.0%} latency / ±{ot:.0%} throughput; covers {both(ol, ot):.0%}; "
            f"split on (source, model): {s1:.0%} / {s2:.0%}"
        )
        ol, ot, s1, s2 = _before(held, groups)
        print(f"          the same rule split on the row groups: {s1:.0%} / {s2:.0%}")
        bar = carried_bar(held, TARGETS, groups)
        sa, sb = bar.split_coverage
        print(
            f"  after:  p{100 * bar.level[0]:.0f} / p{100 * bar.level[1]:.0f} (leave-one-group-out target "
            f"{LOGO_TARGET:.0%}) ±{bar.lat:.0%} latency / ±{bar.thr:.0%} throughput; covers {both(bar.lat, bar.thr):.0%} "
            f"of {bar.n_lat + bar.n_thr}; split: {sa:.0%} / {sb:.0%}; set without each group: {bar.nested_coverage:.0%}"
        )
        no_thr = {sc: np.where(np.arange(len(TARGETS)) == TARGETS.index(THR), np.nan, h) for sc, h in held.items()}
        lat_only = carried_bar(no_thr, TARGETS, groups)
        print(
            f"          latency figures alone: split {lat_only.split_coverage[0]:.0%} / {lat_only.split_coverage[1]:.0%}, "
            f"set without each group {lat_only.nested_coverage:.0%} (throughput figures come from "
            f"{len(set(groups[np.isfinite(an[[f'{THR}_{sc}' for sc in SCHEMES]].to_numpy(float)).any(axis=1)]))} groups)"
        )
        per = ", ".join(
            f"{name} p90 ±{quantile_bar(v):.0%} (inside the carried bar: {coverage(v, bar.lat):.0%})"
            for name in ("TTFT", "TPOT")
            for v in [_figs(an, SCHEMES, tuple(t for t in LATENCY if t.startswith(name.lower())))]
        )
        print(f"  per metric (not carried: a point carries one latency bar): {per}")
        if a.breakdown:
            _groups(card, an)
            _breakdown(card, an)
    print(
        f"\nbar (issue 31): the carried bar covers at least {BAR_QUANTILE:.0%} of held-out figures, on groups never seen"
    )


if __name__ == "__main__":
    main()
