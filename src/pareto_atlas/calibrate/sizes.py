"""Calibration across model sizes: anchors that each carry their own model card, and the error of a
fit carried to a model it never saw (leave-one-model-out).

Why: one model size cannot tell a step's fixed cost from its cost per weight. Fitted on the 0.5B
alone, this CPU's llama.cpp fit charged the 0.5B's per-step overhead to bandwidth, and the 1.5B came
out +58 % slow on TPOT. Anchors of two or more sizes in one fit separate the two: the fixed cost is
the same at every size, the streamed cost grows with the weights. How far such a fit carries is
measured, not assumed: each model's anchors predicted by a fit on the others. That error, not the
within-model leave-one-out one, is the error bar a point carried to an unseen model takes
(CalibParams.xfer_lat_rel_err / xfer_thr_rel_err).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from pareto_atlas.calibrate.fit import TARGETS, _anchors, fit_params, predict
from pareto_atlas.measure.random_kquant import NAME as RANDOM_KQUANT
from pareto_atlas.simulate.params import CalibParams
from pareto_atlas.spec.cards import HardwareCard, ModelCard

CARD = "_card"  # the column of an anchors frame holding each anchor's ModelCard
HELD = "held_model"  # the column of a leave-one-model-out frame naming the model held out
MIN_ANCHORS = 2  # a fold needs this many anchors of the other models to fit
# Models that anchor a kernel format, not a size: random weights (measure.random_kquant) whose only
# role is to fit the Q4_K/Q6_K kernels no served size's rows run. They stay in every fold's training
# set, as in the full fit, and are never held out: holding one out would measure a format derived
# from the roofline, which no point of such a fit is (every format of this CPU's grid has an anchor),
# not how the fit carries to a model size.
KERNEL_ANCHORS = frozenset({RANDOM_KQUANT})


def with_cards(anchors: pd.DataFrame, model: ModelCard | Sequence[ModelCard]) -> pd.DataFrame:
    """`anchors` with each row's card in CARD: one card for all, or one per row in order."""
    cards = [model] * len(anchors) if isinstance(model, ModelCard) else list(model)
    if len(cards) != len(anchors):
        raise ValueError(f"calibrate: {len(cards)} model cards for {len(anchors)} anchors; give one, or one per anchor")
    return anchors.assign(**{CARD: cards})


def cards_of(anchors: pd.DataFrame) -> list[ModelCard]:
    return list(anchors[CARD])


def model_names(anchors: pd.DataFrame) -> list[str]:
    """The distinct models among the anchors (their cards' names), in order of appearance."""
    return list(dict.fromkeys(c.name for c in anchors[CARD]))


def _rel(pred: np.ndarray, meas: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(meas > 0, pred / meas - 1.0, np.nan)


FitFn = Callable[[pd.DataFrame, list[ModelCard]], CalibParams]


def leave_one_model_out(
    anchors: pd.DataFrame, hw: HardwareCard, fit_fn: FitFn, models: Sequence[str] | None = None
) -> pd.DataFrame | None:
    """Relative error per anchor and target of a fit (`fit_fn(train, cards)`, the same setup as the
    full fit) on the anchors of every other model, the model held out named in HELD; only the
    models in `models` are held out (default: each), never a kernel anchor (KERNEL_ANCHORS). None
    with fewer than two model sizes."""
    names = [m for m in model_names(anchors) if m not in KERNEL_ANCHORS]
    if len(names) < 2:
        return None
    of = anchors[CARD].map(lambda c: c.name)
    meas = anchors.reindex(columns=list(TARGETS)).to_numpy(float)
    parts = []
    for m in names if models is None else [m for m in names if m in models]:
        test = (of == m).to_numpy()
        train = anchors[~test]
        if len(train) < MIN_ANCHORS:
            continue
        p = fit_fn(train, cards_of(train))
        held = anchors[test]
        pred = predict(_anchors(held), cards_of(held), hw, p)
        df = pd.DataFrame(_rel(pred, meas[test]), columns=list(TARGETS), index=held.index)
        df[HELD] = m
        parts.append(df)
    return pd.concat(parts) if parts else None


def cpu_fit_fn(hw: HardwareCard, start: CalibParams | None, fit_cv: bool, fixed: tuple[str, ...]) -> FitFn:
    """The CPU fit's own setup (calibrate.fidelity.fit) as a fold's fit."""
    return lambda train, cards: fit_params(train, cards, hw, start, fit_cv, fixed=fixed)[0]


def median_abs_by_model(lomo: pd.DataFrame | None, targets: Sequence[str] = TARGETS) -> pd.DataFrame:
    """Median |relative error| per held-out model and target (rows: models, plus n anchors)."""
    if lomo is None or lomo.empty:
        return pd.DataFrame()
    g = lomo.groupby(HELD, sort=False)
    out = g[list(targets)].agg(lambda v: float(np.nanmedian(np.abs(v))) if np.isfinite(v).any() else np.nan)
    out["n"] = g.size()
    return out


def report_lines(lomo: pd.DataFrame | None, lat: float, thr: float) -> list[str]:
    """The leave-one-model-out table as the calibration report prints it."""
    if lomo is None or lomo.empty:
        return []
    cols = ("ttft_p50_ms", "tpot_p50_ms", "tpot_p99_ms", "throughput_tok_s")
    med = median_abs_by_model(lomo, cols)
    lines = [
        "leave-one-model-out (each model's anchors predicted by a fit on the other models' anchors): "
        "median |relative error|",
        f"  {'held out':24s} {'anchors':>7s} "
        + " ".join(f"{c.replace('_ms', '').replace('_tok_s', ''):>10s}" for c in cols),
    ]
    for m, r in med.iterrows():
        lines.append(f"  {m:24s} {int(r['n']):7d} " + " ".join(_pct(r[c], 10) for c in cols))
    lines.append(
        f"error bar carried to a model the fit did not see (p90 of the same): latency ±{lat:.1%}, throughput ±{thr:.1%}"
    )
    return lines


def _pct(v: float, width: int) -> str:
    return f"{v:{width}.1%}" if v == v else f"{'n/a':>{width}s}"
