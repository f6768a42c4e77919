"""GPU cards calibrated on published multi-GPU measurements (spec/published_multigpu.csv): per
(card, engine) one fit of the simulator's efficiencies through its parallel step cost
(simulate/parallel.py: TP splits weights, FLOPs and KV heads and adds two all-reduces a layer over
the link; PP rounds; replicas share the load), and its error on rows the fit never saw, reported per
parallelism:

- leave one source out (LOSO): a fit on the card and engine's other documents;
- leave one model out (LOMO): a fit on the card and engine's other models;
- leave one engine out (LOEO): a fit on the card's rows of the other engines (how far a card's
  calibration carries to an engine it never saw).

The carried bar (calibrate.heldout_bar) is a quantile of every held-out figure of the three schemes
pooled, latency and throughput apart, at the level whose bar, set without one row group (bar_groups:
one engine's sweep of one model in one document), covers that group; whether it carries is checked
on a split (the bar set on half the groups, counted on the other) and per group left out.

Each fit reads a sample of the rows (SAMPLE per source, model, weights, parallelism and load kind,
spread over their setups): a closed loop of 512 clients simulates thousands of requests, and every
held-out fold refits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from pareto_atlas.calibrate.fidelity import LATENCY
from pareto_atlas.calibrate.fit import TARGETS, _anchors, predict
from pareto_atlas.calibrate.heldout_bar import carried_bar
from pareto_atlas.calibrate.published import _rel, card_frame, fit_card
from pareto_atlas.calibrate.published_table import PARALLEL, PublishedTable
from pareto_atlas.simulate.params import CalibParams
from pareto_atlas.spec.cards import HardwareCard, ModelCard, shipped_hardware

SAMPLE = 3
SCHEMES = ("LOSO", "LOMO", "LOEO")
THR = "throughput_tok_s"


@dataclass(frozen=True)
class MultiGpuCalibration:
    hardware: str
    engine: str
    params: CalibParams  # the fit on every sampled row of (card, engine)
    anchors: pd.DataFrame  # per sampled row: setup, parallelism, measured and held-out errors per scheme
    lat_bar: float  # the carried bar (relative): p90 of every scheme's held-out latency errors
    thr_bar: float
    bar_from: str  # the schemes the bar was set on, "LOSO+LOMO+LOEO" ("none": the default's ±25 %)
    bar_check: tuple[float, float] = (float("nan"), float("nan"))  # coverage on a split, each way
    bar_nested: float = float("nan")  # coverage of a bar set without each group, on that group
    bar_level: tuple[float, float] = (0.9, 0.9)  # the quantile levels of the latency and throughput bars


def sample_rows(rows: pd.DataFrame, k: int = SAMPLE) -> pd.DataFrame:
    """Up to k rows per (source, model, weights, parallelism, load kind): the first, the last and evenly
    between of its setups sorted by load and lengths, so each sweep keeps its ends."""
    keys = ["source_id", "model", "weights", *PARALLEL, "load"]
    order = rows.assign(
        _lv=rows.load_value.astype(float), _p=rows.prompt_tokens.astype(int), _o=rows.output_tokens.astype(int)
    ).sort_values(["_lv", "_p", "_o"])
    picks = []
    for _, g in order.groupby(keys, sort=True):
        idx = np.unique(np.linspace(0, len(g) - 1, min(k, len(g))).round().astype(int))
        picks.append(g.iloc[idx])
    return pd.concat(picks).drop(columns=["_lv", "_p", "_o"]).reset_index(drop=True)


def bar_groups(rows: pd.DataFrame) -> np.ndarray:
    """The row groups a carried bar is checked on (calibrate.heldout_bar): one engine's sweep of one model
    and weight format in one document, its parallelisms, lengths and loads together (their errors move
    together: one scheduler, one miss), so a group left out is a deployment family the bar never saw."""
    return (rows.source_id + " " + rows.model + " " + rows.engine + " " + rows.weights).to_numpy()


def _held_out(
    frame: pd.DataFrame,
    models: list[ModelCard],
    hw: HardwareCard,
    labels: np.ndarray,
    train_frame: pd.DataFrame | None = None,
    train_models: list[ModelCard] | None = None,
    train_labels: np.ndarray | None = None,
) -> np.ndarray:
    """Relative error of each anchor predicted by a fit on the anchors of other labels (the training
    pool is `train_*` where given: another engine's rows). NaN where no other label exists."""
    tf, tm, tl = (frame, models, labels) if train_frame is None else (train_frame, train_models, train_labels)
    meas = frame[list(TARGETS)].to_numpy(float)
    err = np.full_like(meas, np.nan)
    for lab in dict.fromkeys(labels):
        test, train = labels == lab, tl != lab
        if not train.any():
            continue
        p, _ = fit_card(tf[train], [m for m, t in zip(tm, train) if t], hw)
        err[test] = _rel(predict(_anchors(frame[test]), [m for m, t in zip(models, test) if t], hw, p), meas[test])
    return err


def _frames(rows: pd.DataFrame, hw: HardwareCard) -> tuple[pd.DataFrame, list[ModelCard]]:
    return card_frame(rows.reset_index(drop=True), hw)


def calibrate_multigpu(
    table: PublishedTable, hardware: list[str] | None = None, engines: list[str] | None = None, k: int = SAMPLE
) -> list[MultiGpuCalibration]:
    """One calibration per (card, engine) of the multi-GPU table (every card, or those named), with
    LOSO, LOMO and LOEO errors per sampled row."""
    cards, rows = shipped_hardware(), table.rows
    if hardware:
        rows = rows[rows.gpu.isin(hardware)]
    out = []
    for gpu, on_card in rows.groupby("gpu", sort=False):
        hw = cards[gpu]
        sampled = {e: sample_rows(g, k) for e, g in on_card.groupby("engine", sort=False)}
        built = {e: _frames(s, hw) for e, s in sampled.items()}
        for engine, s in sampled.items():
            if engines and engine not in engines:
                continue
            frame, models = built[engine]
            params, _ = fit_card(frame, models, hw)
            held = {
                "LOSO": _held_out(frame, models, hw, s.source_id.to_numpy()),
                "LOMO": _held_out(frame, models, hw, s.model.to_numpy()),
            }
            others = [e for e in sampled if e != engine]
            if others:
                tf = pd.concat([built[e][0] for e in others], ignore_index=True)
                tm = [m for e in others for m in built[e][1]]
                tl = np.concatenate([sampled[e].engine.to_numpy() for e in others])
                held["LOEO"] = _held_out(frame, models, hw, s.engine.to_numpy(), tf, tm, tl)
            else:
                held["LOEO"] = np.full((len(s), len(TARGETS)), np.nan)
            bar = carried_bar(held, TARGETS, bar_groups(s))
            seen = [sc for sc in SCHEMES if np.isfinite(held[sc]).any()]
            bar_from = "+".join(seen) or "none"
            anchors = s[
                [
                    "source_id",
                    "model",
                    "weights",
                    "prompt_tokens",
                    "output_tokens",
                    "load",
                    "load_value",
                    "stat",
                    *PARALLEL,
                ]
            ].copy()
            meas = frame[list(TARGETS)].to_numpy(float)
            for i, t in enumerate(TARGETS):
                anchors[f"{t}_measured"] = meas[:, i]
                for sc in SCHEMES:
                    anchors[f"{t}_{sc}"] = held[sc][:, i]
            out.append(
                MultiGpuCalibration(
                    gpu,
                    engine,
                    params,
                    anchors,
                    bar.lat,
                    bar.thr,
                    bar_from,
                    bar.split_coverage,
                    bar.nested_coverage,
                    bar.level,
                )
            )
    return out


def _med(a: pd.DataFrame, cols: list[str]) -> float:
    v = np.abs(a[cols].to_numpy(float)).ravel()
    return float(np.nanmedian(v)) if np.isfinite(v).any() else np.nan


def _pct(v: float) -> str:
    return "n/a" if v != v else f"{100 * v:.0f} %"


def scheme_errors(g: pd.DataFrame, scheme: str) -> str:
    """One scheme's held-out median |error| of a group of rows: "TTFT / TPOT / throughput"."""
    ttft, tpot = [t for t in LATENCY if t.startswith("ttft")], [t for t in LATENCY if t.startswith("tpot")]
    return (
        f"{_pct(_med(g, [f'{t}_{scheme}' for t in ttft]))} / "
        f"{_pct(_med(g, [f'{t}_{scheme}' for t in tpot]))} / {_pct(_med(g, [f'{THR}_{scheme}']))}"
    )


def parallelism(r: pd.Series) -> str:
    """ "TP4", "TP2 PP2", "TP1 x 2 replicas", "1P(TP2)+2D(TP4)"."""
    if int(r.prefill_workers):
        return f"{r.prefill_workers}P(TP{r.prefill_tp})+{r.decode_workers}D(TP{r.tp})"
    s = f"TP{r.tp}" + (f" PP{r.pp}" if int(r.pp) > 1 else "")
    return s + (f" x {r.replicas} replicas" if int(r.replicas) > 1 else "")


def coverage(cal: MultiGpuCalibration, schemes: tuple[str, ...]) -> tuple[float, int]:
    """Share of the held-out figures of `schemes` inside the carried bar (latency within lat_bar,
    throughput within thr_bar), and how many figures that is."""
    a, inside, n = cal.anchors, 0, 0
    for sc in schemes:
        for t in TARGETS:
            v = np.abs(a[f"{t}_{sc}"].to_numpy(float))
            v = v[np.isfinite(v)]
            inside += int((v <= (cal.thr_bar if t == THR else cal.lat_bar)).sum())
            n += len(v)
    return (inside / n if n else np.nan), n


def split_check(cov: tuple[float, float], nested: float = float("nan")) -> str:
    """How the bar carries to rows that did not set it (heldout_bar.carried_bar's split and nested checks)."""
    a, b = cov
    if a != a and b != b:
        return "no split check (one row group)"
    out = f"set on half of the row groups, it covers {_pct(a)} / {_pct(b)} of the other half's figures"
    return out + ("" if nested != nested else f"; set without each group, {_pct(nested)} of that group's")


def report_lines(cals: list[MultiGpuCalibration]) -> list[str]:
    """Per (card, engine, parallelism): sampled rows, and the median |held-out error| of TTFT, TPOT
    (TPOT or ITL) and throughput under each scheme; per (card, engine): the carried bar and its coverage."""
    out = [
        "multi-GPU held-out median |error| (TTFT / TPOT / throughput) per scheme: LOSO leaves a document "
        "out, LOMO a model, LOEO an engine"
    ]
    for c in cals:
        cov, n = coverage(c, SCHEMES)
        out.append(
            f"  {c.hardware} {c.engine}: {len(c.anchors)} rows of {c.anchors.source_id.nunique()} sources, "
            f"{c.anchors.model.nunique()} models; carried bar ±{100 * c.lat_bar:.0f} % latency / "
            f"±{100 * c.thr_bar:.0f} % throughput "
            f"({f'p{100 * c.bar_level[0]:.0f} / p{100 * c.bar_level[1]:.0f} of ' + c.bar_from + ' pooled' if c.bar_from != 'none' else 'none held out: the default'}); "
            f"inside it: {_pct(cov)} of {n} held-out figures; {split_check(c.bar_check, c.bar_nested)}"
        )
        par = c.anchors.apply(parallelism, axis=1)
        for p, g in c.anchors.groupby(par, sort=False):
            cells = "  ".join(f"{sc} {scheme_errors(g, sc)}" for sc in SCHEMES)
            out.append(f"    {p:<8} {len(g):>3} rows  {cells}")
    return out
