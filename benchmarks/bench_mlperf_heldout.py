"""MLPerf Inference's rows (spec/published_mlperf.csv, published_readers.mlperf) predicted by the cards'
current published fits, which never saw MLPerf: an independent publisher's held-out error.

Each row is predicted with its card's one-GPU published fit of the row's engine (calibrate.published on
spec/published_anchors.csv, from the fit cache when it holds it), with the card's link fit on the
shipped multi-GPU rows (calibrate.published_link) where a worker spans several GPUs, and for a mixture of
experts (Mixtral 8x7B) with the card's MoE fit on the MoE table (calibrate.published_moe: its terms and
its MoE bar; that table holds no MLPerf row, so these rows are held out by source), under the engine's
default scheduler, as calibrate.published_table.anchor_row builds a published row, with two changes a
benchmark of this size needs, both printed:

- Server (a Poisson rate over R replicas): SERVER_REQUESTS requests a replica instead of the table's
  default 200, so the simulated run leaves its ramp-up (at MLPerf's rates a replica holds hundreds of
  requests at once; 200 never fill it);
- Offline over R > 1 replicas: OFFLINE_WAVES full batches per replica (anchor_row counts them for one).

What the simulator cannot state is said per row, not forced:
- lengths: MLPerf's datasets have variable lengths; a row holds the run's mean output and, where no
  file read states the mean input, the input cap. Each row is predicted at both ends of what the input
  can be, PROMPT_FLOOR and the row's prompt_tokens (the cap), at the run's mean output, fixed lengths
  (a mix of lengths is not simulated). An error of one sign at both ends is the fit's whatever the
  mean input; a sign change means the row cannot tell. The table prints the error at each end.
- runs left out by the reader (no hardware card, e.g. MI300X; setup stated in no file read, e.g. the
  B200 preview) are listed from the script's output, not predicted.

Figures: per row and metric, measured, predicted at each end, relative error (predicted / measured - 1);
per (card, engine, scenario, metric) the median |error| at the cap and at the floor; how many figures fall
inside the carried bar (the card's lat_rel_err / thr_rel_err, par_* on a multi-GPU worker) at the cap,
and how many could for some mean input (the bar meets the interval between the two ends' errors).

    python benchmarks/bench_mlperf_heldout.py [--table CSV] [--card GPU] [--dense DENSE.pkl [--pred-cache DIR]]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from pareto_atlas.calibrate.fit import TARGETS, _anchors, predict
from pareto_atlas.calibrate.published_readers import mlperf
from pareto_atlas.calibrate.published_table import OFFLINE_WAVES, read_table
from pareto_atlas.calibrate.published_moe import with_moe
from pareto_atlas.spec.cards import shipped_hardware, shipped_models

SPEC = Path(__file__).resolve().parents[1] / "src" / "pareto_atlas" / "spec"
PROMPT_FLOOR = 1  # the least input a request has
SERVER_REQUESTS = 3000  # requests a replica simulated at a Server row's rate
OVERLOAD = 0.9  # a Server end completing under this share of the offered tokens/s is overloaded
# (metric label, table column, fit target by the row's statistic, bar kind)
METRICS = (
    ("TTFT", "ttft_ms", {"p50": "ttft_p50_ms", "p99": "ttft_p99_ms"}, "lat"),
    ("TPOT", "tpot_ms", {"p50": "tpot_p50_ms", "p99": "tpot_p99_ms"}, "lat"),
    ("out tok/s", "out_tok_s", None, "thr"),
)


def fits(rows: pd.DataFrame, cards: list[str], dense: Path | None = None, cache: Path | None = None):
    """Per (card, engine, model) the params a row is predicted with, its bars, and what each rests on. The
    one-GPU fits are those of `cards` (every card of the table, so one cache entry serves any --card);
    `dense`: instead, the one-GPU and link fits of scripts/moe_refit.py's DENSE pickle, the MoE fit made on
    them (its grid predictions kept in `cache` as moe_refit keeps them), so both share one set of fits."""
    from pareto_atlas.calibrate import published_cache
    from pareto_atlas.calibrate.published import for_atlas
    from pareto_atlas.calibrate.published_link import link_calibrations, with_link
    from pareto_atlas.calibrate.published_table import load_published

    shipped = load_published()
    cards = sorted(set(cards) & set(shipped.rows.gpu))
    t0 = time.time()
    if dense is None:
        cals = published_cache.fitted(shipped, cards)
        multi = sorted({r.gpu for r in rows.itertuples() if int(r.tp) * int(r.pp) > 1})
        links = link_calibrations(multi, one_gpu=cals) if multi else {}
        moe = moe_fits(rows)
        said = [f"one-GPU fits of {', '.join(cards)} on {shipped.paths[0]} ({time.time() - t0:.0f} s with links)"]
    else:
        cals, links, moe = dense_fits(rows, dense, cache)
        said = [f"one-GPU and link fits from {dense} (scripts/moe_refit.py's), the MoE fit on them"]
    by, atlas = {(c.hardware, c.engine): c for c in cals}, for_atlas(cals)
    params, bars = {}, {}
    for (gpu, engine, model), g in rows.groupby(["gpu", "engine", "model"]):
        cal = by.get((gpu, engine)) or atlas.get(gpu)
        if cal is None:
            continue
        p = cal.params
        how = f"{gpu} {engine} {model}: {cal.engine}'s one-GPU published fit ({len(cal.anchors)} anchors)"
        if shipped_models()[model].is_moe:
            if gpu not in moe:
                continue
            p = with_moe(p, moe[gpu])
            how += f"; {moe[gpu].provenance()}"
        if (g.tp.astype(int) * g.pp.astype(int) > 1).any():
            if gpu in links:
                p = with_link(p, links[gpu])
                how += f"; link: {links[gpu].provenance()}"
            else:
                how += "; link: uncalibrated default (no multi-GPU fit)"
        params[(gpu, engine, model)] = p
        bars[(gpu, engine, model)] = p
        said.append(how)
    return params, bars, said


def dense_fits(rows: pd.DataFrame, dense: Path, cache: Path | None) -> tuple[list, dict, dict]:
    """The one-GPU fits, link fits and MoE fits (per card) of scripts/moe_refit.py's DENSE pickle."""
    import importlib.util
    import pickle

    from pareto_atlas.calibrate import published_moe
    from pareto_atlas.calibrate.published_moe_table import load_moe

    ones, links, own = pickle.loads(dense.read_bytes())
    if cache is not None:
        spec = importlib.util.spec_from_file_location(
            "moe_refit", Path(__file__).parents[1] / "scripts" / "moe_refit.py"
        )
        refit = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(refit)
        published_moe.predictions = refit._cached(published_moe.predictions, cache)
    table = load_moe()
    every = [c for c in dict.fromkeys(table.rows.gpu) if c in shipped_hardware()]
    bases, said = published_moe.dense_bases(table, every, ones, links, own)
    moe = published_moe.calibrate_moe(table, bases, said)
    need = {r.gpu for r in rows.itertuples() if shipped_models()[r.model].is_moe}
    return [c for card in ones for c in ones[card]], links, {c: f for c, f in moe.items() if c in need}


def moe_fits(rows: pd.DataFrame) -> dict:
    """Per card with a mixture-of-experts row, the MoE fit (calibrate.published_moe on the MoE table,
    which holds no MLPerf row): its terms and bar are what an MoE point of the card is simulated with."""
    from pareto_atlas.calibrate.published_moe import moe_calibrations

    cards = sorted({r.gpu for r in rows.itertuples() if shipped_models()[r.model].is_moe})
    return moe_calibrations(cards) if cards else {}


def frame_for(rows: pd.DataFrame, hw, prompt: int | None) -> tuple[pd.DataFrame, list]:
    """The anchors of the rows as the fit builds them (calibrate.published.card_frame), at `prompt`
    input tokens when given, with the two changes the module docstring names."""
    from pareto_atlas.calibrate.published import SERVED_ENGINE, _max_seqs, card_frame
    from pareto_atlas.simulate.params import default_params

    rows = rows.copy()
    if prompt is not None:
        rows["prompt_tokens"] = str(prompt)
    frame, models = card_frame(rows.reset_index(drop=True), hw)
    start = default_params(hw, SERVED_ENGINE)
    for i, (_, r) in enumerate(rows.reset_index(drop=True).iterrows()):
        reps = int(r.replicas)
        if r.load == "rate":  # calibrate.anchors.predict runs one replica: n requests at rate / replicas
            frame.at[i, "n_requests"] = SERVER_REQUESTS
        elif r.load == "offline" and reps > 1:
            k = min(int(r.load_value), OFFLINE_WAVES * _max_seqs(r, models[i], hw, start) * reps)
            frame.at[i, "n_requests"] = k
            frame.at[i, "send_offsets"] = [0.0] * k
    return frame, models


def predictions(rows: pd.DataFrame, params: dict) -> dict[int, np.ndarray]:
    """Per row, TARGETS predicted at the cap (the row's prompt_tokens) and at PROMPT_FLOOR: (2, len(TARGETS))."""
    hws, out = shipped_hardware(), {}
    for key, g in rows.groupby(["gpu", "engine", "model"]):
        if key not in params:
            continue
        ends = []
        for prompt in (None, PROMPT_FLOOR):
            frame, models = frame_for(g, hws[key[0]], prompt)
            ends.append(predict(_anchors(frame), models, hws[key[0]], params[key]))
        for j, idx in enumerate(g.index):
            out[idx] = np.vstack([ends[0][j], ends[1][j]])
    return out


def _at(g: pd.DataFrame, params: dict, prompt: int) -> np.ndarray:
    r = g.iloc[0]
    hw = shipped_hardware()[r.gpu]
    frame, models = frame_for(g, hw, prompt)
    return predict(_anchors(frame), models, hw, params[(r.gpu, r.engine, r.model)])


def implied_inputs(rows: pd.DataFrame, params: dict, steps: int = 8) -> dict[int, int]:
    """Per Offline row, the input length at which its card's fit predicts the measured throughput (a
    bisection in log length between PROMPT_FLOOR and the cap; the fit's throughput falls as the input
    grows). Every row of one benchmark ran one dataset: rows implying different inputs disagree with
    the fits, whatever the dataset's true mean."""
    out, col = {}, TARGETS.index("throughput_tok_s")
    for idx, r in rows[rows.load == "offline"].iterrows():
        if (r.gpu, r.engine, r.model) not in params:
            continue
        g, meas = rows.loc[[idx]], float(r.out_tok_s)
        lo, hi = np.log(PROMPT_FLOOR), np.log(int(r.prompt_tokens))
        if _at(g, params, PROMPT_FLOOR)[0, col] < meas or _at(g, params, int(r.prompt_tokens))[0, col] > meas:
            continue  # outside the bracket: no length between the ends fits
        for _ in range(steps):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if _at(g, params, round(np.exp(mid)))[0, col] > meas else (lo, mid)
        out[idx] = round(np.exp((lo + hi) / 2))
    return out


def figures(rows: pd.DataFrame, pred: dict, bars: dict) -> pd.DataFrame:
    """One line per (row, metric) the row publishes: measured, predicted at cap and floor, errors, bar."""
    out = []
    for idx, r in rows.iterrows():
        scen = "Offline" if r.load == "offline" else "Server"
        for label, col, targets, kind in METRICS:
            if not r[col]:
                continue
            target = "throughput_tok_s" if targets is None else targets.get(r.stat)
            base = dict(row=idx, gpu=r.gpu, engine=r.engine, scenario=scen, metric=label, stat=r.stat)
            if idx not in pred or target is None:
                out.append(base | dict(measured=float(r[col]), why="no fit for the card and engine"))
                continue
            p = pred[idx][:, TARGETS.index(target)]
            meas = float(r[col])
            # a Server end whose simulated engine cannot carry the offered load: its queue grows with the
            # run's length, so its latencies are a transient of SERVER_REQUESTS, not a figure
            offered = float(r.load_value) * int(r.output_tokens) if r.load == "rate" else np.nan
            thr = pred[idx][:, TARGETS.index("throughput_tok_s")]
            over = [bool(t < OVERLOAD * offered) for t in thr]
            p_ = bars[(r.gpu, r.engine, r.model)]
            par = int(r.tp) * int(r.pp) > 1
            # an MoE row carries its card's MoE bar (what simulate states for an MoE point)
            moe = shipped_models()[r.model].is_moe
            bar = getattr(p_, f"moe_{kind}_rel_err" if moe else f"par_{kind}_rel_err" if par else f"{kind}_rel_err")
            bar = bar if bar == bar else getattr(p_, f"{kind}_rel_err")
            out.append(
                base
                | dict(
                    measured=meas,
                    pred_cap=p[0],
                    pred_floor=p[1],
                    err_cap=p[0] / meas - 1,
                    err_floor=p[1] / meas - 1,
                    bar=bar,
                    over_cap=over[0],
                    over_floor=over[1],
                    why="",
                )
            )
    return pd.DataFrame(out)


def _pct(v: float) -> str:
    return "-" if v != v else f"{100 * v:+.0f} %"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--table", type=Path, default=SPEC / mlperf.SHIPPED)
    ap.add_argument("--card", action="append", help="only the rows on these cards (default: all)")
    ap.add_argument("--dense", type=Path, help="scripts/moe_refit.py's DENSE pickle: its fits instead of the cache's")
    ap.add_argument("--pred-cache", type=Path, help="with --dense: the MoE fit's grid predictions, as moe_refit's")
    a = ap.parse_args(argv)
    every = pd.DataFrame(read_table(a.table))
    rows = every[every.gpu.isin(a.card)] if a.card else every
    print(f"{a.table}: {len(rows)} of {len(every)} rows (held out: no fit reads this table)")
    t0 = time.time()
    params, bars, said = fits(rows, sorted(set(every.gpu)), a.dense, a.pred_cache)
    for s in said:
        print(f"  {s}")
    pred = predictions(rows, params)
    f = figures(rows, pred, bars)
    print(
        f"\npredicted in {time.time() - t0:.0f} s; lengths: output the run's mean, input at the cap "
        f"(prompt_tokens) and at {PROMPT_FLOOR} token; Server: {SERVER_REQUESTS} requests a replica, Poisson"
    )
    print("\nper row (measured; predicted at cap / floor; error at cap / floor; bar):")
    for _, x in f.iterrows():
        r = rows.loc[x.row]
        head = (
            f"  {r.gpu:<8} {r.engine:<6} {r.model:<12} TP{r.tp}x{r.replicas} {x.scenario:<7} {x.metric:<9} {x.stat:<3} "
            f"{r.prompt_tokens}/{r.output_tokens} {r.load} {r.load_value}:"
        )
        if x.why:
            print(f"{head} measured {x.measured:g}; not stated: {x.why}")
            continue
        sign = "one sign" if np.sign(x.err_cap) == np.sign(x.err_floor) else "sign changes"
        over = [e for e, o in (("cap", x.over_cap), ("floor", x.over_floor)) if o]
        print(
            f"{head} {x.measured:.4g}; {x.pred_cap:.4g} / {x.pred_floor:.4g}; "
            f"{_pct(x.err_cap)} / {_pct(x.err_floor)} ({sign}); bar ±{100 * x.bar:.0f} %"
            + (f"; overloaded in simulation at the {' and '.join(over)} (latency there not stated)" if over else "")
        )
    ok = f[f.why == ""].copy()
    if ok.empty:
        print("\nno row could be predicted")
        return 0
    ok["in_cap"] = ok.err_cap.abs() <= ok.bar
    lo, hi = np.minimum(ok.err_cap, ok.err_floor), np.maximum(ok.err_cap, ok.err_floor)
    ok["in_some"] = (lo <= ok.bar) & (hi >= -ok.bar)
    print(
        "\nmedian |error| per (card, engine, scenario, metric) at the cap / at the floor; inside the bar at the "
        "cap, and for some mean input:"
    )
    ok["model"] = [rows.loc[i].model for i in ok.row]
    for key, g in ok.groupby(["gpu", "engine", "model", "scenario", "metric"], sort=True):
        print(
            f"  {' '.join(key):<34} n={len(g)}  {100 * g.err_cap.abs().median():.0f} % / "
            f"{100 * g.err_floor.abs().median():.0f} %  inside {int(g.in_cap.sum())}/{len(g)} at cap, "
            f"{int(g.in_some.sum())}/{len(g)} for some input  (bar ±{100 * g.bar.iloc[0]:.0f} %)"
        )
    implied = implied_inputs(rows, params)
    print("\ninput length at which each card's fit meets its Offline throughput (one dataset: these should agree):")
    for idx, p_in in implied.items():
        r = rows.loc[idx]
        print(f"  {r.gpu:<8} {r.engine:<6} TP{r.tp}x{r.replicas} {r.model_published}: {p_in} tokens")
    if implied:
        print("Server rows at the input their own system's Offline row implies (the same dataset):")
        for (gpu, engine, model), g in rows[rows.load == "rate"].groupby(["gpu", "engine", "model"]):
            p_in = next((v for i, v in implied.items() if (rows.loc[i].gpu, rows.loc[i].model) == (gpu, model)), None)
            if p_in is None or (gpu, engine, model) not in params:
                continue
            pr = _at(g, params, p_in)
            for j, (_, r) in enumerate(g.iterrows()):
                offered = float(r.load_value) * int(r.output_tokens)
                thr = pr[j, TARGETS.index("throughput_tok_s")]
                cells = []
                for label, col, targets, _kind in METRICS[:2]:
                    t = targets[r.stat]
                    cells.append(
                        f"{label} {pr[j, TARGETS.index(t)]:.4g} vs {float(r[col]):.4g} ms "
                        f"({_pct(pr[j, TARGETS.index(t)] / float(r[col]) - 1)})"
                    )
                flag = " (overloaded in simulation)" if thr < OVERLOAD * offered else ""
                print(f"  {gpu:<8} {engine:<6} {model} {r.stat} at {p_in} tokens: {'; '.join(cells)}{flag}")
    one = (np.sign(ok.err_cap) == np.sign(ok.err_floor)).sum()
    print(
        f"\nall {len(ok)} figures: inside the bar at the cap {int(ok.in_cap.sum())}, for some mean input "
        f"{int(ok.in_some.sum())}; error of one sign at both ends {int(one)}; Server figures overloaded in "
        f"simulation at the cap {int(ok.over_cap.sum())}, at the floor {int(ok.over_floor.sum())}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
