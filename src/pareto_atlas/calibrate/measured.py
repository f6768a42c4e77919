"""Measured anchors per hardware card: which card each fit is for, which anchors a fit may not use
(too many errored requests), and, on a GPU card, the measured fit held against the card's published
one: each predicts the anchors the other was fitted on, so both errors are out of sample.

A card's measured fit is what `simulate` uses for it (calibrate.stage stores it with the card's name,
and simulate.stage takes a study's own calibration before any published one).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd
from rich.console import Console

from pareto_atlas.calibrate.fit import TARGETS, _anchors, predict
from pareto_atlas.spec.cards import HardwareCard, shipped_hardware
from pareto_atlas.spec.study import Study
from pareto_atlas.store import Store

THIS = "this-cpu"
GROUPS = {
    "TTFT": ("ttft_p50_ms", "ttft_p99_ms"),
    "TPOT": ("tpot_p50_ms", "tpot_p99_ms"),
    "throughput": ("throughput_tok_s",),
}


def hardware_card(study: Study, store: Store, name: str) -> HardwareCard:
    """The card a fit is for: this machine as probed, or a shipped card (the study's price if it sets one)."""
    if name == THIS:
        from pareto_atlas.measure.hwprobe import this_machine

        return this_machine(study, store)
    cards = shipped_hardware()
    if name not in cards:
        raise ValueError(
            f"calibrate: anchors on hardware {name!r}, which has no card; known: {THIS}, {', '.join(cards)}"
        )
    card = cards[name]
    return card.with_price(study.prices[name], study.price_date, "study [prices]") if name in study.prices else card


def by_hardware(anchors: pd.DataFrame) -> Iterator[tuple[str, pd.DataFrame]]:
    """(card, its anchors), this machine first: one fit per (hardware, engine) follows."""
    names = sorted(set(anchors.hardware), key=lambda h: (h != THIS, h))
    for name in names:
        yield name, anchors[anchors.hardware == name].reset_index(drop=True)


def without_errored(anchors: pd.DataFrame, console: Console) -> pd.DataFrame:
    """The anchors a fit may use: those whose errored requests stayed within measure.campaign's
    ERROR_SHARE_MAX (the flagged ones' percentiles are the survivors', not the load's); each one left
    out is named."""
    if not len(anchors) or "errored" not in anchors:
        return anchors
    bad = anchors["errored"].fillna(False).astype(bool)
    for _, r in anchors[bad].iterrows():
        console.print(
            f"  left out: {r.arm} on {r.hardware}: {r.get('error_line') or 'errored requests'}",
            highlight=False,
            soft_wrap=True,
        )
    return anchors[~bad].reset_index(drop=True)


def _median_abs(err: np.ndarray) -> dict[str, float]:
    out = {}
    for g, cols in GROUPS.items():
        v = np.abs(err[:, [TARGETS.index(c) for c in cols]]).ravel()
        out[g] = float(np.nanmedian(v)) if np.isfinite(v).any() else float("nan")
    return out


def _rel(pred: np.ndarray, meas: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(meas > 0, pred / meas - 1.0, np.nan)


def fitted_words(cal) -> str:
    """How many of this study's anchors a fit (calibrate.fidelity.Calibration) used, and how many it left
    out and why: the count beside "measured fit" is the fit's, not the card's anchors."""
    left = [
        f"{len(cal.contended)} contended: ran beside other work on the machine" if len(cal.contended) else "",
        f"{len(cal.flagged)} flagged: another engine version than the majority" if len(cal.flagged) else "",
    ]
    left = [w for w in left if w]
    n_left = len(cal.contended) + len(cal.flagged)
    return f"{len(cal.residuals)} anchors of this study" + (f"; {n_left} left out ({'; '.join(left)})" if left else "")


def versus_published(
    study: Study, store: Store, console: Console, hw: HardwareCard, anchors: pd.DataFrame, cal, model
) -> dict | None:
    """On a GPU card: the measured fit and the card's published fit (calibrate.published_stage), each
    predicting the other's anchors; printed and returned ({"published_on_measured", "measured_on_published":
    median |rel err| per group, "n_published"}). None on a CPU or a card with no published anchors."""
    if hw.kind != "gpu":
        return None
    from pareto_atlas.calibrate.published import card_frame
    from pareto_atlas.calibrate.published_stage import published_params
    from pareto_atlas.calibrate.published_table import load_published

    rows = load_published().rows
    rows = rows[rows.gpu == hw.name].reset_index(drop=True)
    pub = published_params(study.name, store, console, [hw.name]).get(hw.name) if len(rows) else None
    if pub is None:
        console.print(f"  {hw.name}: no published fit to compare with; the measured fit stands alone", highlight=False)
        return None
    rows = rows[rows.engine == pub.engine].reset_index(drop=True)  # the anchors that fit was made on
    meas = anchors.reindex(columns=list(TARGETS)).to_numpy(float)
    pub_err = _median_abs(_rel(predict(_anchors(anchors), model, hw, pub), meas))
    frame, models = card_frame(rows, hw)
    mine_err = _median_abs(_rel(predict(_anchors(frame), models, hw, cal.params), frame[list(TARGETS)].to_numpy(float)))

    def line(errs: dict[str, float]) -> str:
        return ", ".join(f"{g} {v:.0%}" if v == v else f"{g} n/a" for g, v in errs.items())

    console.print(
        f"  {hw.name}: measured fit ({fitted_words(cal)}) vs its published fit "
        f"({len(rows)} published anchors; {pub.provenance.split(';')[0]}); median |relative error|, "
        f"each on the anchors the other was fitted on:",
        highlight=False,
        soft_wrap=True,
    )
    console.print(f"    published fit on the measured anchors: {line(pub_err)}", highlight=False)
    console.print(
        f"    measured fit on the published anchors (other models and setups): {line(mine_err)}", highlight=False
    )
    console.print(
        f"    the atlas simulates {hw.name} with the measured fit: measured here beats published elsewhere",
        highlight=False,
    )
    return {"published_on_measured": pub_err, "measured_on_published": mine_err, "n_published": len(rows)}
