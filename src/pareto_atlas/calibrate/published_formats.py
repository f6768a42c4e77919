"""Quantized weight formats' kernel costs per GPU card, fitted on published measurements.

A card's published fit (calibrate.published) moves every parameter on its own anchors, mostly 16-bit.
Here each quantized format's GEMV and GEMM cost per weight is fitted on the one-GPU rows of that format
on the card and engine (the one-GPU table's, and the multi-GPU table's rows on one GPU), every other
parameter held at the card's fit: what the format's kernels cost, on top of what the card's engine and
memory do. Per (card, format) it says how well that predicts rows it never saw (a source held out, or
a model, or an anchor, where the format has one source or model there), and how far the roofline's
derivation (`sim*`: the format's cost from the card's peak, no anchor of it) was from the same rows.

A format no row measured on a card takes the efficiency its kernels reach on the cards of the same
generation (HardwareCard.arch) that have rows of it: the fitted cost as a share of the card's peak
rate for the format, applied to this card's peak. Where two cards of a generation have rows, each is
predicted from the other's carried cost (leave-one-card-out): the error a carried format has.
A format no card of its generation measured stays derived from the roofline (`sim*`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from pareto_atlas.calibrate.fidelity import LATENCY
from pareto_atlas.calibrate.fit import TARGETS, _anchors, _Space, fit_params, predict
from pareto_atlas.calibrate.published import SERVED_ENGINE, calibrate_published, one_gpu_frame
from pareto_atlas.calibrate.published_table import PublishedTable, batch1_speed, load_multigpu
from pareto_atlas.simulate.cost_model import compute_dtype
from pareto_atlas.simulate.params import FAMILY, CalibParams
from pareto_atlas.spec.cards import HardwareCard, ModelCard, shipped_hardware

# The GPU weight formats whose kernels are not the 16-bit GEMMs (simulate.params.FAMILY)
QUANT_FORMATS = ("FP8", "W8A8", "AWQ4", "W4A16")
GROUPS = {
    "TTFT": ("ttft_p50_ms", "ttft_p99_ms"),
    "TPOT": ("tpot_p50_ms", "tpot_p99_ms"),
    "throughput": ("throughput_tok_s",),
}
LOSO, LOMO, LOAO, LOCO = (
    "leave-one-source-out",
    "leave-one-model-out within its only source",
    "leave-one-anchor-out within its only source and model",
    "leave-one-card-out within its generation",
)


@dataclass(frozen=True)
class FormatFit:
    """One quantized format's kernel cost on one card and engine, and how well it predicts held-out rows."""

    hardware: str
    engine: str
    fmt: str
    # "fitted" (rows of it on this card), "generation" (carried from cards of its generation) or "derived"
    # (no card of its generation has rows of it: the roofline's, its bar the roofline's error on other formats)
    basis: str
    rests_on: str  # the sources and row counts, or the cards it was carried from
    gemv: float  # seconds per weight per token
    gemm: float
    n_rows: int = 0
    held_out: str = ""  # the scheme of `errors`; "" where nothing could be held out
    errors: dict = field(default_factory=dict)  # median |held-out relative error| per GROUPS key (NaN: none)
    roofline: dict = field(default_factory=dict)  # the same rows predicted with the format derived (sim*)
    # p90 of |held-out error| over latency (TTFT, TPOT, per output token) and throughput: the bar a point
    # of the format carries at least (CalibParams.format_rel_err); NaN where nothing was held out
    lat_bar: float = float("nan")
    thr_bar: float = float("nan")
    # p90 of the roofline's |error| on the same rows: what a point of a format derived from it (sim*) carries
    roof_lat_bar: float = float("nan")
    roof_thr_bar: float = float("nan")


def format_rows(table: PublishedTable, multigpu: PublishedTable | None, card: str, engine: str) -> pd.DataFrame:
    """The one-GPU rows of quantized formats on (card, engine): the one-GPU table's and the multi-GPU
    table's rows on one GPU (its script leaves out rows the one-GPU table already holds)."""
    parts = [table.rows]
    if multigpu is not None:
        m = multigpu.rows
        parts.append(m[m["n_gpus"].astype(str) == "1"])
    rows = pd.concat(parts, ignore_index=True, sort=False)
    keep = (rows.gpu == card) & (rows.engine == engine) & rows.weights.isin(QUANT_FORMATS)
    return rows[keep].reset_index(drop=True)


def _fixed(frame: pd.DataFrame, models: list[ModelCard], fmt: str) -> tuple[str, ...]:
    # every parameter the card's fit moves except the format's own two costs
    names = _Space.for_anchors(_anchors(frame), False, req_overhead=True, cards=models).names
    return tuple(n for n in names if n not in (f"gemv:{fmt}", f"gemm:{fmt}"))


def _without(p: CalibParams, fmts: set[str]) -> CalibParams:
    return replace(
        p,
        gemv_s_per_weight={k: v for k, v in p.gemv_s_per_weight.items() if k not in fmts},
        gemm_s_per_weight={k: v for k, v in p.gemm_s_per_weight.items() if k not in fmts},
        carried_formats={k: v for k, v in p.carried_formats.items() if k not in fmts},
        format_rel_err={k: v for k, v in p.format_rel_err.items() if k not in fmts},
    )


def _with(
    p: CalibParams, fmt: str, gemv: float, gemm: float, carried: str = "", bars: tuple[float, float] | None = None
) -> CalibParams:
    gv, gm, car, err = (
        dict(p.gemv_s_per_weight),
        dict(p.gemm_s_per_weight),
        dict(p.carried_formats),
        dict(p.format_rel_err),
    )
    gv[fmt], gm[fmt] = gemv, gemm
    car.pop(fmt, None)
    if carried:
        car[fmt] = carried
    if bars is not None and (measured := _bars(bars)):
        err[fmt] = measured
    return replace(p, gemv_s_per_weight=gv, gemm_s_per_weight=gm, carried_formats=car, format_rel_err=err)


def fit_format(
    base: CalibParams, frame: pd.DataFrame, models: list[ModelCard], hw: HardwareCard, fmt: str
) -> tuple[float, float]:
    """(GEMV, GEMM) seconds per weight of `fmt` fitted on these anchors (all of that format), the card's
    other parameters held at `base`; the fit starts from the roofline, never from a cost of the format."""
    start = _without(base, {fmt})
    p, _ = fit_params(
        frame, models, hw, start=start, fit_cv=False, head_ratio_starts=(1.0,), fixed=_fixed(frame, models, fmt)
    )
    return p.gemv_s_per_weight[fmt], p.gemm_s_per_weight[fmt]


def _rel(pred: np.ndarray, meas: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(meas > 0, pred / meas - 1.0, np.nan)


def group_errors(err: np.ndarray, rows: pd.DataFrame) -> dict[str, float]:
    """Median |relative error| per GROUPS key; a batch-1 speed row's per-token error (the inverse of its
    throughput error) counts as TPOT, as in the card's own report."""
    b1 = np.array([batch1_speed(r) for _, r in rows.iterrows()], dtype=bool)
    thr = err[:, TARGETS.index("throughput_tok_s")]
    with np.errstate(divide="ignore", invalid="ignore"):
        per_tok = np.where(b1, 1.0 / (1.0 + thr) - 1.0, np.nan)
    out = {}
    for g, cols in GROUPS.items():
        v = np.abs(err[:, [TARGETS.index(c) for c in cols]]).ravel()
        if g == "TPOT":
            v = np.concatenate([v, np.abs(per_tok)])
        out[g] = float(np.nanmedian(v)) if np.isfinite(v).any() else float("nan")
    return out


def p90_bars(err: np.ndarray, rows: pd.DataFrame) -> tuple[float, float]:
    """(latency, throughput) p90 of |relative error|, a batch-1 row's per-token error counted as latency."""
    b1 = np.array([batch1_speed(r) for _, r in rows.iterrows()], dtype=bool)
    thr = err[:, TARGETS.index("throughput_tok_s")]
    with np.errstate(divide="ignore", invalid="ignore"):
        per_tok = np.where(b1, 1.0 / (1.0 + thr) - 1.0, np.nan)
    lat = np.concatenate([np.abs(err[:, [TARGETS.index(c) for c in LATENCY]]).ravel(), np.abs(per_tok)])
    thr = np.abs(np.where(b1, np.nan, thr))  # a batch-1 row's throughput error is its per-token error
    p90 = [float(np.nanpercentile(v, 90)) if np.isfinite(v).any() else float("nan") for v in (lat, thr)]
    return p90[0], p90[1]


def _folds(rows: pd.DataFrame) -> tuple[list[np.ndarray], str]:
    for col, how in (("source_id", LOSO), ("model", LOMO)):
        vals = rows[col].to_numpy()
        if len(set(vals)) >= 2:
            return [vals == v for v in dict.fromkeys(vals)], how
    if len(rows) >= 2:
        return [np.arange(len(rows)) == i for i in range(len(rows))], LOAO
    return [], ""


def roofline_errors(
    base: CalibParams, frame: pd.DataFrame, models: list[ModelCard], hw: HardwareCard, fmt: str
) -> np.ndarray:
    """Relative error of these anchors predicted with `fmt` derived from the roofline: every format of its
    family dropped from the card's fit (what a `sim*` point of the format rests on)."""
    family = {k for k in FAMILY if FAMILY[k] == FAMILY[fmt]}
    return _rel(predict(_anchors(frame), models, hw, _without(base, family)), frame[list(TARGETS)].to_numpy(float))


def calibrate_format(
    base: CalibParams, rows: pd.DataFrame, frame: pd.DataFrame, models: list[ModelCard], hw: HardwareCard, fmt: str
) -> FormatFit:
    """Fit one format on its rows of one card and score it on held-out rows (see _folds) and against
    the roofline's derivation of it (every format of its family dropped from the card's fit)."""
    gemv, gemm = fit_format(base, frame, models, hw, fmt)
    meas = frame[list(TARGETS)].to_numpy(float)
    folds, how = _folds(rows)
    err = np.full_like(meas, np.nan)
    for test in folds:
        train = ~test
        v, m = fit_format(base, frame[train], [c for c, t in zip(models, train) if t], hw, fmt)
        pred = predict(_anchors(frame[test]), [c for c, t in zip(models, test) if t], hw, _with(base, fmt, v, m))
        err[test] = _rel(pred, meas[test])
    roof = roofline_errors(base, frame, models, hw, fmt)
    srcs = ", ".join(f"{s} {n}" for s, n in rows.source_id.value_counts(sort=False).items())
    return FormatFit(
        hw.name,
        str(rows.engine.iloc[0]),
        fmt,
        "fitted",
        srcs,
        gemv,
        gemm,
        len(rows),
        how,
        group_errors(err, rows) if how else {g: float("nan") for g in GROUPS},
        group_errors(roof, rows),
        *(p90_bars(err, rows) if how else (float("nan"), float("nan"))),
        *p90_bars(roof, rows),
    )


def peak_share(cost: float, hw: HardwareCard, fmt: str) -> float:
    """A per-weight cost as the share of the card's peak rate for the format it reaches (2 FLOPs a weight)."""
    return 2.0 / (hw.peak_flops(compute_dtype(fmt, hw)) * cost)


def carried_cost(donors: list[FormatFit], cards: dict[str, HardwareCard], hw: HardwareCard) -> tuple[float, float]:
    """(GEMV, GEMM) cost of a format on `hw` from its fits on other cards of the generation: the geometric
    mean of the share of peak the donors' kernels reach, at this card's peak for the format."""
    out = []
    for path in ("gemv", "gemm"):
        shares = [peak_share(getattr(d, path), cards[d.hardware], d.fmt) for d in donors]
        share = float(np.exp(np.mean(np.log(shares))))
        out.append(2.0 / (hw.peak_flops(compute_dtype(donors[0].fmt, hw)) * share))
    return out[0], out[1]


def _bars(bars: tuple[float, float]) -> dict[str, float]:
    # the measured ones only: a NaN (nothing held out) neither widens a bar nor survives a JSON round trip equal
    return {k: float(b) for k, b in zip(("lat", "thr"), bars) if b == b}


def _widest(bars) -> float:
    return max((b for b in bars if b == b), default=float("nan"))


def _pooled(errs: list[np.ndarray], rows: list[pd.DataFrame]) -> dict[str, float]:
    return group_errors(np.vstack(errs), pd.concat(rows, ignore_index=True)) if errs else {}


def calibrate_formats(cals: list, table: PublishedTable, multigpu: PublishedTable | None) -> list:
    """The cards' fits (calibrate.published.CardCalibration) on the served engine with their quantized
    formats fitted where the card has rows of them, else carried from cards of the same generation;
    each fit's `formats` says which and how well they predict held-out rows."""
    cards = shipped_hardware()
    served = [c for c in cals if c.engine == SERVED_ENGINE and cards[c.hardware].kind == "gpu"]
    own: dict[tuple[str, str], FormatFit] = {}
    data: dict[tuple[str, str], tuple] = {}  # (card, fmt) -> (base, rows, frame, models): for leave-one-card-out
    for c in served:
        rows = format_rows(table, multigpu, c.hardware, c.engine)
        for fmt, g in rows.groupby("weights", sort=False):
            g = g.reset_index(drop=True)
            frame, models = one_gpu_frame(g, cards[c.hardware])
            own[c.hardware, fmt] = calibrate_format(c.params, g, frame, models, cards[c.hardware], fmt)
            data[c.hardware, fmt] = (c.params, g, frame, models)
    carried: dict[tuple[str, str], FormatFit] = {}
    for c in served:
        hw = cards[c.hardware]
        for fmt in QUANT_FORMATS:
            if (c.hardware, fmt) in own or not hw.arch:
                continue
            donors = [
                f for (card, f2), f in own.items() if f2 == fmt and card != c.hardware and cards[card].arch == hw.arch
            ]
            if not donors:
                continue
            gemv, gemm = carried_cost(donors, cards, hw)
            errs, rows = _leave_one_card_out(fmt, hw.arch, own, data, cards)
            # the bar: the leave-one-card-out error where two cards of the generation have rows, else the
            # widest of the donors' own held-out bars (the carry itself then unmeasured, said so)
            bars = (
                p90_bars(np.vstack(errs), pd.concat(rows, ignore_index=True))
                if errs
                else (_widest(d.lat_bar for d in donors), _widest(d.thr_bar for d in donors))
            )
            carried[c.hardware, fmt] = FormatFit(
                c.hardware,
                c.engine,
                fmt,
                "generation",
                f"{', '.join(d.hardware for d in donors)} ({hw.arch})",
                gemv,
                gemm,
                0,
                LOCO if errs else "",
                _pooled(errs, rows) or {g: float("nan") for g in GROUPS},
                {},
                *bars,
            )
    derived = _derived_bars(served, own, carried, cards, data)
    out = []
    for c in cals:
        mine = any(c is s for s in served)
        fits = tuple(f for (card, _), f in {**own, **carried, **derived}.items() if card == c.hardware and mine)
        p = c.params
        for f in fits:
            if f.basis == "derived":  # no cost of its own: only the measured error of deriving one
                if measured := _bars((f.lat_bar, f.thr_bar)):
                    p = replace(p, format_rel_err={**p.format_rel_err, f.fmt: measured})
                continue
            p = _with(p, f.fmt, f.gemv, f.gemm, f.rests_on if f.basis == "generation" else "", (f.lat_bar, f.thr_bar))
        if fits:
            p = replace(p, provenance=f"{p.provenance}; {provenance(fits)}")
        out.append(replace(c, params=p, formats=fits))
    return out


def _derived_bars(served: list, own: dict, carried: dict, cards: dict, data: dict) -> dict[tuple[str, str], FormatFit]:
    """Per card, each quantized format with no cost fitted or carried (nor one of its family): its bar is
    the p90 error of the roofline over the rows of the formats fitted on cards of the same generation,
    else of every card, pooled (how far deriving a format from the roofline was from rows that measured one)."""
    out = {}
    for c in served:
        hw = cards[c.hardware]
        have = {FAMILY[f] for (card, f) in {**own, **carried} if card == c.hardware}
        same = [k for k in own if cards[k[0]].arch == hw.arch] or list(own)
        if not same:
            continue
        errs = [roofline_errors(data[k][0], data[k][2], data[k][3], cards[k[0]], k[1]) for k in same]
        lat, thr = p90_bars(np.vstack(errs), pd.concat([data[k][1] for k in same], ignore_index=True))
        basis = f"roofline's p90 error on the rows of {', '.join(sorted(f'{f} ({card})' for card, f in same))}"
        for fmt in QUANT_FORMATS:
            if FAMILY[fmt] not in have:
                out[c.hardware, fmt] = FormatFit(
                    c.hardware, c.engine, fmt, "derived", basis, float("nan"), float("nan"), lat_bar=lat, thr_bar=thr
                )
    return out


def _leave_one_card_out(fmt: str, arch: str, own: dict, data: dict, cards: dict) -> tuple[list, list]:
    """Each card of the generation with rows of `fmt` predicted from the format carried from the others."""
    fitted = [card for (card, f) in own if f == fmt and cards[card].arch == arch]
    errs, rows = [], []
    for card in fitted if len(fitted) >= 2 else []:
        donors = [own[d, fmt] for d in fitted if d != card]
        base, g, frame, models = data[card, fmt]
        v, m = carried_cost(donors, cards, cards[card])
        pred = predict(_anchors(frame), models, cards[card], _with(base, fmt, v, m))
        errs.append(_rel(pred, frame[list(TARGETS)].to_numpy(float)))
        rows.append(g)
    return errs, rows


def provenance(fits: tuple[FormatFit, ...]) -> str:
    how = {
        "fitted": lambda f: f"fitted on {f.n_rows} published rows",
        "generation": lambda f: f"carried from {f.rests_on}",
        "derived": lambda f: f"derived from the roofline (sim*; its bar the {f.rests_on})",
    }
    return "quantized formats: " + ", ".join(f"{f.fmt} kernels {how[f.basis](f)}" for f in fits)


def _pct(v: float) -> str:
    return f"{v:5.1%}" if v == v else "  n/a"


def report_lines(cals: list) -> list[str]:
    """Per card and quantized format: where its kernel cost comes from, its held-out error (how, on what),
    and the roofline's error on the same rows; then the formats still derived from the roofline."""
    cards = shipped_hardware()
    out = [
        "Quantized formats per card (served engine): kernel cost fitted on the card's published rows of the format, "
        "or carried from cards of its generation; held-out median |error| (TTFT / TPOT / throughput), and the "
        "roofline's (sim*: the format derived, no row of it) on the same rows",
        f"{'card':15s} {'format':6s} {'basis':10s} {'rows':>4s} {'TTFT':>6s} {'TPOT':>6s} {'thr.':>6s} "
        f"{'sim* TPOT':>9s} {'GEMM peak':>9s} {'bar lat':>7s} {'bar thr':>7s}  held out by; rests on",
    ]
    for c in cals:
        for f in getattr(c, "formats", ()):
            e, r = f.errors, f.roofline
            out.append(
                f"{f.hardware:15s} {f.fmt:6s} {f.basis:10s} {f.n_rows:4d} {_pct(e.get('TTFT', np.nan)):>6s} "
                f"{_pct(e.get('TPOT', np.nan)):>6s} {_pct(e.get('throughput', np.nan)):>6s} "
                f"{_pct(r.get('TPOT', np.nan)):>9s} {_pct(peak_share(f.gemm, cards[f.hardware], f.fmt)):>9s} "
                f"{_pct(f.lat_bar):>7s} {_pct(f.thr_bar):>7s}  "
                f"{f.held_out or ('-' if f.basis == 'derived' else 'none held out')}; {f.rests_on}"
            )
    gpus = {c.hardware for c in cals if c.engine == SERVED_ENGINE and cards[c.hardware].kind == "gpu"}
    for card in sorted(gpus):
        have = {
            FAMILY[f.fmt] for c in cals if c.hardware == card for f in getattr(c, "formats", ()) if f.basis != "derived"
        }
        left = [f for f in QUANT_FORMATS if FAMILY[f] not in have]  # a family member borrows the fitted one's
        if left:
            out.append(
                f"{card}: {', '.join(left)} derived from the roofline (sim*): no published measurement of "
                f"{'it' if len(left) == 1 else 'them'} on any {cards[card].arch or 'same-generation'} card"
            )
    return out


def calibrate_published_formats(table: PublishedTable, hardware: list[str] | None = None) -> list:
    """calibrate_published, then each card's quantized formats fitted on its rows, or carried (calibrate_formats)."""
    return calibrate_formats(calibrate_published(table, hardware), table, load_multigpu())
