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

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, fields

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


def _folds(labels: np.ndarray, train_labels: np.ndarray):
    """(test, train) masks per label, in order of appearance: that label's rows, and the training pool's
    rows of every other label; a label whose pool holds no other is skipped (nothing to fit on)."""
    for lab in dict.fromkeys(labels):
        test, train = labels == lab, train_labels != lab
        if train.any():
            yield test, train


def _held_out(
    frame: pd.DataFrame,
    models: list[ModelCard],
    hw: HardwareCard,
    labels: np.ndarray,
    train_frame: pd.DataFrame | None = None,
    train_models: list[ModelCard] | None = None,
    train_labels: np.ndarray | None = None,
    fit: Callable[[pd.DataFrame, list[ModelCard], np.ndarray], CalibParams] | None = None,
    train_ids: np.ndarray | None = None,
) -> np.ndarray:
    """Relative error of each anchor predicted by a fit on the anchors of other labels (the training
    pool is `train_*` where given: another engine's rows). NaN where no other label exists.
    fit(frame, models, ids): the fit of those training rows (ids: theirs in `train_ids`, default
    their positions), so a caller can make each distinct training set's fit once (_Fits)."""
    tf, tm, tl = (frame, models, labels) if train_frame is None else (train_frame, train_models, train_labels)
    ids = np.arange(len(tf)) if train_ids is None else train_ids
    meas = frame[list(TARGETS)].to_numpy(float)
    err = np.full_like(meas, np.nan)
    for test, train in _folds(labels, tl):
        tms = [m for m, t in zip(tm, train) if t]
        p = fit(tf[train], tms, ids[train]) if fit is not None else fit_card(tf[train], tms, hw)[0]
        err[test] = _rel(predict(_anchors(frame[test]), [m for m, t in zip(models, test) if t], hw, p), meas[test])
    return err


class _Fits:
    """One card's fits (calibrate.published.fit_card) keyed by the training rows, in their order: a
    training set that two folds share (a card's other engine, which is both its own full fit and the
    set another engine's leave-one-engine-out fold trains on; a document that is also the only one of
    its model) is fitted once. The same rows in the same order are the same fit: fit_card is
    deterministic (least squares from a fixed start, the simulation seeded per row)."""

    def __init__(self, hw: HardwareCard) -> None:
        self.hw, self.done = hw, {}

    def __call__(self, frame: pd.DataFrame, models: list[ModelCard], ids: np.ndarray) -> CalibParams:
        key = tuple(ids.tolist())
        if key not in self.done:
            self.done[key] = fit_card(frame, models, self.hw)[0]
        return self.done[key]


def _fit_job(job: tuple[pd.DataFrame, list[ModelCard], HardwareCard]) -> CalibParams:
    frame, models, hw = job
    return fit_card(frame, models, hw)[0]


def fit_workers() -> int:
    """Processes the multi-GPU fits run in: $PARETO_ATLAS_FIT_WORKERS, else the cores this process may
    use (1: in this process, one fit after another)."""
    env = os.environ.get("PARETO_ATLAS_FIT_WORKERS", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise ValueError(f"PARETO_ATLAS_FIT_WORKERS: {env!r} is not a whole number of processes >= 1")
        return int(env)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _fit_all(jobs: dict[tuple, tuple[pd.DataFrame, list[ModelCard], HardwareCard]], workers: int) -> dict:
    """Each job's fit (key -> CalibParams), in `workers` processes where there are several: the fits are
    independent and each is deterministic, so where they run changes no figure. The biggest start first."""
    if workers <= 1 or len(jobs) <= 1:
        return {k: _fit_job(j) for k, j in jobs.items()}
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    order = sorted(jobs, key=lambda k: -len(jobs[k][0]))
    # fork where there is one: a spawned worker would import the caller's main module again (a script
    # without a __main__ guard would start over); the fits run no thread of their own
    how = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    with ProcessPoolExecutor(min(workers, len(jobs)), mp_context=multiprocessing.get_context(how)) as pool:
        done = dict(zip(order, pool.map(_fit_job, [jobs[k] for k in order])))
    return {k: done[k] for k in jobs}


def _frames(rows: pd.DataFrame, hw: HardwareCard) -> tuple[pd.DataFrame, list[ModelCard]]:
    """The fit's frame of a card's sampled rows: each row whose source states its run simulated and
    read as it ran (calibrate.published_runs, as the one-GPU fit and the link fit run them), the others
    under their engine's default scheduler; every row under the engine defaults where
    calibrate.published.RUN_AS_PUBLISHED is off (read now)."""
    from pareto_atlas.calibrate import published

    return card_frame(rows.reset_index(drop=True), hw, as_run=published.RUN_AS_PUBLISHED)


def _pools(sampled: dict, built: dict, ids: dict, engine: str) -> dict[str, tuple]:
    """Per scheme, (labels of the engine's rows, training frame, its models, its labels, its row ids)."""
    s, (frame, models) = sampled[engine], built[engine]
    out = {
        "LOSO": (s.source_id.to_numpy(), frame, models, s.source_id.to_numpy(), ids[engine]),
        "LOMO": (s.model.to_numpy(), frame, models, s.model.to_numpy(), ids[engine]),
    }
    others = [e for e in sampled if e != engine]
    if others:
        out["LOEO"] = (
            s.engine.to_numpy(),
            pd.concat([built[e][0] for e in others], ignore_index=True),
            [m for e in others for m in built[e][1]],
            np.concatenate([sampled[e].engine.to_numpy() for e in others]),
            np.concatenate([ids[e] for e in others]),
        )
    return out


def calibrate_multigpu(
    table: PublishedTable,
    hardware: list[str] | None = None,
    engines: list[str] | None = None,
    k: int = SAMPLE,
    workers: int | None = None,
) -> list[MultiGpuCalibration]:
    """One calibration per (card, engine) of the multi-GPU table (every card, or those named), with
    LOSO, LOMO and LOEO errors per sampled row. Every distinct training set (each engine's rows, each
    fold's) is fitted once, in `workers` processes (default fit_workers())."""
    cards, rows = shipped_hardware(), table.rows
    if hardware:
        rows = rows[rows.gpu.isin(hardware)]
    plan = []
    for gpu, on_card in rows.groupby("gpu", sort=False):
        hw = cards[gpu]
        sampled = {e: sample_rows(g, k) for e, g in on_card.groupby("engine", sort=False)}
        built = {e: _frames(s, hw) for e, s in sampled.items()}
        # every sampled row of the card one id ("engine:position"), so a training set is known by its rows
        ids = {e: np.array([f"{e}:{i}" for i in range(len(s))], dtype=object) for e, s in sampled.items()}
        plan.append((gpu, hw, sampled, built, ids, [e for e in sampled if not engines or e in engines]))
    # the fits first, all of them at once (each fold's training rows as _held_out takes them)
    jobs: dict[tuple, tuple] = {}
    for gpu, hw, sampled, built, ids, todo in plan:
        for engine in todo:
            frame, models = built[engine]
            jobs.setdefault((gpu, tuple(ids[engine].tolist())), (frame, models, hw))
            for labels, tf, tm, tl, ti in _pools(sampled, built, ids, engine).values():
                for _, train in _folds(labels, tl):
                    key = (gpu, tuple(ti[train].tolist()))
                    jobs.setdefault(key, (tf[train], [m for m, t in zip(tm, train) if t], hw))
    fitted = _fit_all(jobs, fit_workers() if workers is None else workers)
    out = []
    for gpu, hw, sampled, built, ids, todo in plan:
        fits = _Fits(hw)
        fits.done.update({key: p for (g, key), p in fitted.items() if g == gpu})
        for engine in todo:
            s = sampled[engine]
            frame, models = built[engine]
            params = fits(frame, models, ids[engine])
            pools = _pools(sampled, built, ids, engine)
            held = {sc: np.full((len(s), len(TARGETS)), np.nan) for sc in SCHEMES}  # LOEO: one engine
            for sc, (labels, tf, tm, tl, ti) in pools.items():
                held[sc] = _held_out(frame, models, hw, labels, tf, tm, tl, fit=fits, train_ids=ti)
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


def multigpu_calibrations(
    table: PublishedTable | None = None,
    hardware: list[str] | None = None,
    engines: list[str] | None = None,
    k: int = SAMPLE,
) -> list[MultiGpuCalibration]:
    """calibrate_multigpu of the shipped multi-GPU table (or `table`), from the fit cache when the
    table, the code that fits and predicts (calibrate.published_cache.code_hash), the fit's version
    and the cards, engines and sample asked for are unchanged; else fitted now (minutes) and kept."""
    from pareto_atlas import __version__
    from pareto_atlas.calibrate import published_cache
    from pareto_atlas.calibrate.published_table import load_multigpu

    table = table or load_multigpu()
    key = (
        "multigpu-"
        + hashlib.sha256(
            f"{table.sha256}|{published_cache.code_hash()}|{published_cache.FIT_VERSION}|{__version__}|"
            f"{sorted(hardware or [])}|{sorted(engines or [])}|{k}|{_run_mode()}".encode()
        ).hexdigest()[:20]
    )
    path = published_cache.cache_dir() / f"{key}.json"
    try:
        raw = json.loads(path.read_text())
        if raw.get("key") == key:
            return [_decode(d) for d in raw["fits"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass  # absent or unreadable: refitted, never trusted
    cals = calibrate_multigpu(table, hardware, engines, k)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"key": key, "fits": [_encode(c) for c in cals]}, default=_native))
        os.replace(tmp, path)
    except OSError:
        pass
    return cals


def _run_mode() -> str:
    """How the fit runs the rows (a cache key part): as their sources ran them, or engine defaults."""
    from pareto_atlas.calibrate import published

    mode = "as-run" if published.RUN_AS_PUBLISHED else "engine-defaults"
    return mode + ("" if published.HOST_OVERLAP_BY_RELEASE else "|host-serial")


def _native(v):
    if isinstance(v, np.generic):
        return v.item()
    raise TypeError(f"not JSON: {type(v).__name__}")


def _encode(c: MultiGpuCalibration) -> dict:
    d = {f.name: getattr(c, f.name) for f in fields(c)}
    d["params"] = c.params.to_dict()
    d["anchors"] = c.anchors.to_dict(orient="split")
    return d


def _decode(d: dict) -> MultiGpuCalibration:
    a = d["anchors"]
    return MultiGpuCalibration(
        **{
            **d,
            "params": CalibParams.from_dict(d["params"]),
            "anchors": pd.DataFrame(a["data"], columns=a["columns"], index=a["index"]),
            "bar_check": tuple(d["bar_check"]),
            "bar_level": tuple(d["bar_level"]),
        }
    )


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
