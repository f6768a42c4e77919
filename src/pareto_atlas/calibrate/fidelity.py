"""Calibration with its fidelity report: residuals, leave-one-out and held-out error, campaign drift,
engine-version flags, and the error bar every simulated point then carries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from pareto_atlas.calibrate.fit import KNOB_FIELDS, TARGETS, _anchors, fit_params, predict, weight_format
from pareto_atlas.calibrate.sizes import (
    CARD,
    HELD,
    cards_of,
    cpu_fit_fn,
    leave_one_model_out,
    model_names,
    report_lines,
    with_cards,
)
from pareto_atlas.simulate.params import CalibParams, with_error_bars
from pareto_atlas.spec.cards import HardwareCard, ModelCard
from pareto_atlas.spec.knobs import Knobs

LATENCY = ("ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms")
# what makes two anchors repeats of one arm (the model too: one study can measure several sizes)
ARM_COLS = KNOB_FIELDS + ("prompt_tokens", "output_tokens", "concurrency", "model")


@dataclass(frozen=True)
class Calibration:
    params: CalibParams  # fitted, carrying lat_rel_err / thr_rel_err
    residuals: pd.DataFrame  # per anchor: measured, predicted, rel_err per target
    loo: pd.DataFrame | None  # per anchor: leave-one-out rel_err per target, plus "extrapolated"
    heldout: pd.DataFrame | None  # held-out anchors: rel_err per target
    drift: pd.DataFrame  # per arm measured in >1 campaign: relative spread per target
    flagged: pd.DataFrame  # anchors from another engine version than the majority (not fitted)
    contended: pd.DataFrame  # anchors that ran beside other work on the machine (not fitted)
    repeat_spread: dict  # median repeat-to-repeat relative spread per target
    summary: dict  # median |rel err| per target: fit / loo / loo_supported / heldout / lomo
    # per anchor: rel_err per target from a fit on the other models' anchors, the model in "held_model"
    # (calibrate.sizes); None when the anchors are of one model
    lomo: pd.DataFrame | None = None

    def report(self) -> str:
        s = self.summary
        n_ext = int(self.loo["extrapolated"].ne("").sum()) if self.loo is not None else 0
        lines = [
            f"calibration {self.params.hardware} / {self.params.engine}: {len(self.residuals)} anchors fitted, "
            f"{len(self.flagged)} flagged (other engine version), {len(self.contended)} left out (contended)",
            "median |relative error|: fit = in sample; LOO = leave-one-out, all anchors; held-out = LOO over "
            f"anchors whose format, KV type, slots and speculation the rest cover ({n_ext} extrapolated left "
            "out); repeat = median repeat-to-repeat spread",
            f"{'target':16s} {'fit':>7s} {'LOO':>7s} {'held-out':>9s} {'repeat':>7s}",
        ]
        held = s["heldout"] or s.get("loo_supported", {})
        for t in TARGETS:
            lines.append(
                f"{t:16s} {_pct(s['fit'].get(t))} {_pct(s['loo'].get(t))} "
                f"{_pct(held.get(t), 9)} {_pct(self.repeat_spread.get(t))}"
            )
        lines += self.parallelism_lines()
        if n_ext:
            ext = self.loo[self.loo["extrapolated"].ne("")]
            for i, r in ext.iterrows():
                errs = " ".join(f"{t.replace('_ms', '')} {r[t]:+.0%}" for t in ("ttft_p50_ms", "tpot_p50_ms"))
                arm = self.residuals["arm"].get(i, i) if "arm" in self.residuals else i
                lines.append(f"  extrapolated: {arm} ({r['extrapolated']} unseen): {errs}")
        for _, r in self.contended.iterrows():
            lines.append(
                f"  left out: {r.get('arm', '?')} ran beside {r['other_cpu_cores']:.2f} cores of other work "
                f"(measure.contention; `pareto-atlas measure` again once the machine is quiet)"
            )
        lines.append(
            f"error bar carried by simulated points: latency ±{self.params.lat_rel_err:.1%}, "
            f"throughput ±{self.params.thr_rel_err:.1%} ({self.params.provenance})"
        )
        lines += report_lines(self.lomo, self.params.xfer_lat_rel_err, self.params.xfer_thr_rel_err)
        return "\n".join(lines)

    def parallelism_lines(self) -> list[str]:
        """Where the anchors hold more than one parallelism: each one's anchors and median |error| (fit, and
        leave-one-out where run), so a layout the others cannot predict shows instead of averaging in."""
        res = self.residuals
        if "parallelism" not in res or res["parallelism"].nunique() < 2:
            return []
        out = ["per parallelism (median |relative error| of TTFT p50 / TPOT p50: fit; LOO):"]
        for layout, g in res.groupby("parallelism", sort=True):
            loo = self.loo.loc[g.index] if self.loo is not None else None
            fit_e, loo_e = _median_abs(g), _median_abs(loo)
            out.append(
                f"  {layout}: {len(g)} anchors, {_pct(fit_e.get('ttft_p50_ms'), 0)} / "
                f"{_pct(fit_e.get('tpot_p50_ms'), 0)}; {_pct(loo_e.get('ttft_p50_ms'), 0)} / "
                f"{_pct(loo_e.get('tpot_p50_ms'), 0)}"
            )
        return out


def _pct(v: float | None, width: int = 7) -> str:
    return f"{v:{width}.1%}" if v is not None and v == v else f"{'n/a':>{width}s}"


def layout_of(row: pd.Series) -> str:
    """An anchor's parallelism in words ("one GPU", "TP4 × 2 replicas"), from its knob columns."""
    return Knobs.from_row(row).layout_words()


def support(train: pd.DataFrame, row: pd.Series) -> str:
    """Why predicting `row` from `train` is an extrapolation ("" when the training set covers it):
    its weight format's kernels, its KV type, its slots or its prompt length (within the trained
    range), or speculation that actually drafted, unseen in training."""
    why = []
    card = lambda r: r[CARD] if CARD in r else None  # noqa: E731  (the kernels a format runs depend on the rows)
    fmt = weight_format(str(row.get("weights", "F16")), card(row))
    seen = (
        {weight_format(str(r.get("weights", "F16")), card(r)) for _, r in train.iterrows()} if len(train) else {"F16"}
    )
    if fmt not in seen:
        why.append(f"format {fmt}")
    if "kv" in row and row["kv"] not in set(train.get("kv", [])):
        why.append(f"kv {row['kv']}")
    slots = train.get("slots", pd.Series([1] * len(train)))
    if not slots.min() <= row.get("slots", 1) <= slots.max():
        why.append(f"slots {row.get('slots', 1)}")
    if "prompt_tokens" in train and "prompt_tokens" in row:
        if not train["prompt_tokens"].min() <= row["prompt_tokens"] <= train["prompt_tokens"].max():
            why.append(f"prompt {int(row['prompt_tokens'])}")
    if CARD in train and CARD in row and row[CARD].name not in {c.name for c in train[CARD]}:
        why.append(f"model {row[CARD].name}")
    if len(train) and layout_of(row) not in {layout_of(r) for _, r in train.iterrows()}:
        why.append(f"parallelism {layout_of(row)}")  # a TP4 anchor is predicted from TP4 ones, or flagged
    drafted = row.get("spec_drafted_per_token", np.nan)
    if row.get("spec", "none") != "none" and not drafted == 0.0:
        tr = train[(train.get("spec", "none") == row["spec"])] if "spec" in train else train.iloc[0:0]
        if not (tr.get("spec_drafted_per_token", pd.Series(np.nan, index=tr.index)).fillna(1.0) > 0).any():
            why.append(f"spec {row['spec']}")
    return ", ".join(why)


def _rel_err(pred: np.ndarray, meas: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(meas > 0, pred / meas - 1.0, np.nan)


def _median_abs(df: pd.DataFrame | None) -> dict:
    if df is None or df.empty:
        return {}
    return {t: float(np.nanmedian(np.abs(df[t]))) if df[t].notna().any() else np.nan for t in TARGETS if t in df}


def _arm_key(df: pd.DataFrame) -> pd.Series:
    cols = [c for c in ARM_COLS if c in df.columns]
    return df[cols].astype(str).agg("|".join, axis=1)


def repeat_spread(anchors: pd.DataFrame) -> dict:
    """Median relative spread (max-min over mean) between repeats of the same arm in one campaign."""
    key = _arm_key(anchors) + "|" + anchors.get("campaign_id", pd.Series("", index=anchors.index)).astype(str)
    out = {}
    for t in TARGETS:
        if t not in anchors:
            continue
        g = anchors.groupby(key)[t]
        spread = (g.max() - g.min()) / g.mean()
        spread = spread[g.count() > 1]
        out[t] = float(spread.median()) if len(spread) else np.nan
    return out


def campaign_drift(anchors: pd.DataFrame) -> pd.DataFrame:
    """Per arm measured in more than one campaign: relative spread of campaign means, per target."""
    if "campaign_id" not in anchors:
        return pd.DataFrame()
    key = _arm_key(anchors)
    rows = []
    for k, g in anchors.groupby(key):
        if g["campaign_id"].nunique() < 2:
            continue
        means = g.groupby("campaign_id")[[t for t in TARGETS if t in g]].mean()
        rows.append({"arm": k, "campaigns": int(len(means)), **((means.max() - means.min()) / means.mean()).to_dict()})
    return pd.DataFrame(rows)


def contention_flags(anchors: pd.DataFrame) -> pd.Series:
    """True for anchors measured beside other work on the machine (measure.contention): their
    figures are the neighbour's as much as the engine's, so the fit leaves them out."""
    if "contended" not in anchors:
        return pd.Series(False, index=anchors.index)
    return anchors["contended"].fillna(False).astype(bool)


def engine_version_flags(anchors: pd.DataFrame) -> pd.Series:
    """True for anchors whose engine_version differs from the majority's."""
    if "engine_version" not in anchors or anchors["engine_version"].isna().all():
        return pd.Series(False, index=anchors.index)
    majority = anchors["engine_version"].mode().iloc[0]
    return anchors["engine_version"] != majority


def fit(
    anchors: pd.DataFrame,
    model: ModelCard | Sequence[ModelCard],
    hw: HardwareCard,
    *,
    heldout: pd.Series | list | None = None,
    k_folds: int = 0,
    loo: bool = True,
    engine: str = "",
    fit_cv: bool = True,
    start: CalibParams | None = None,
    fixed: tuple[str, ...] = (),
    lomo: bool = True,
) -> Calibration:
    """Fit CalibParams for one (hardware, engine) and report how far they can be trusted.
    `model`: one card for every anchor, or each anchor's own (anchors of several sizes in one fit).
    `fixed`: parameters kept at `start` (e.g. eff_bw, a property of the machine another engine measured).
    `lomo`: with anchors of two or more models, score each model from a fit on the others
    (calibrate.sizes) and carry that as the transfer error bar (CalibParams.xfer_*).

    heldout: boolean mask (or row labels) of anchors kept out of the fit and scored after it;
    k_folds > 1 instead scores each fold from a fit on the others. Anchors from another engine
    version than the majority are flagged and left out of the fit.
    """
    anchors = with_cards(anchors.reset_index(drop=True), model)
    # left out of the fit: anchors of another engine version than the majority, and anchors measured
    # beside other work on the machine (measure.contention), unless fewer than 2 would be left
    busy = contention_flags(anchors)
    version = engine_version_flags(anchors)
    if (~version & ~busy).sum() < 2:
        busy = pd.Series(False, index=anchors.index)
    flags, contended = version | busy, anchors[busy & ~version]
    usable = anchors[~flags]
    if heldout is not None:
        mask = pd.Series(heldout, index=anchors.index) if not isinstance(heldout, list) else anchors.index.isin(heldout)
        mask = pd.Series(mask, index=anchors.index).astype(bool)
        train, test = usable[~mask[~flags]], usable[mask[~flags]]
    else:
        train, test = usable, usable.iloc[0:0]
    if len(train) < 2:
        raise ValueError(f"calibrate: {len(train)} usable anchors; need at least 2 (flagged: {int(flags.sum())})")
    if start is None and engine:
        from pareto_atlas.simulate.params import default_params

        start = default_params(hw, engine)
    params, pred = fit_params(train, cards_of(train), hw, start, fit_cv, fixed=fixed)
    resid_arm = train["arm"] if "arm" in train else None
    meas = train.reindex(columns=list(TARGETS)).to_numpy(float)
    resid = train.reindex(columns=[c for c in ("campaign_id", "engine_version") if c in train]).copy()
    rel = _rel_err(pred, meas)
    for i, t in enumerate(TARGETS):
        resid[f"{t}_measured"], resid[f"{t}_predicted"], resid[t] = meas[:, i], pred[:, i], rel[:, i]
    resid["model"] = [c.name for c in train[CARD]]
    resid["parallelism"] = [layout_of(r) for _, r in train.iterrows()]

    loo_df = None
    if resid_arm is not None:
        resid["arm"] = resid_arm.to_numpy()
    if loo and len(train) >= 3:
        rows, why = [], []
        for i in range(len(train)):
            rest = train.drop(train.index[i])
            # From the same start as the full fit, not from its result: nothing of anchor i leaks in.
            p_i, _ = fit_params(rest, cards_of(rest), hw, start, fit_cv, fixed=fixed)
            pr = predict(_anchors(train.iloc[[i]]), cards_of(train.iloc[[i]]), hw, p_i)
            rows.append(_rel_err(pr[0], meas[i]))
            why.append(support(rest, train.iloc[i]))
        loo_df = pd.DataFrame(rows, columns=list(TARGETS), index=train.index)
        loo_df["extrapolated"] = why

    held_df = None
    if len(test):
        pr = predict(_anchors(test), cards_of(test), hw, params)
        held_df = pd.DataFrame(
            _rel_err(pr, test.reindex(columns=list(TARGETS)).to_numpy(float)), columns=list(TARGETS), index=test.index
        )
    elif k_folds > 1 and len(train) >= k_folds:
        folds = np.arange(len(train)) % k_folds
        parts = []
        for f in range(k_folds):
            tr, te = train[folds != f], train[folds == f]
            p_f, _ = fit_params(tr, cards_of(tr), hw, params, fit_cv, fixed=fixed)
            pr = predict(_anchors(te), cards_of(te), hw, p_f)
            parts.append(
                pd.DataFrame(
                    _rel_err(pr, te.reindex(columns=list(TARGETS)).to_numpy(float)),
                    columns=list(TARGETS),
                    index=te.index,
                )
            )
        held_df = pd.concat(parts)

    spread = repeat_spread(usable)
    supported = loo_df[loo_df["extrapolated"].eq("")] if loo_df is not None else None
    n_ext = 0 if loo_df is None else len(loo_df) - len(supported)
    oos = held_df if held_df is not None else (supported if supported is not None and len(supported) else loo_df)
    lat_err, thr_err = _error_bars(oos, resid, spread)
    n = len(train)
    what = (
        "held-out anchors"
        if held_df is not None
        else f"leave-one-out over {len(supported)} supported anchors, {n_ext} extrapolations excluded"
        if n_ext
        else "leave-one-out"
        if loo_df is not None
        else "in-sample residuals"
    )
    models = model_names(train)
    on = f"{n} anchors of {len(models)} models ({', '.join(models)})" if len(models) > 1 else f"{n} anchors"
    params = with_error_bars(
        params, lat_err, thr_err, f"calibrated on {on} ({hw.name}); error bar: p90 of {what}, floored by repeat spread"
    )
    lomo_df = leave_one_model_out(train, hw, cpu_fit_fn(hw, start, fit_cv, fixed)) if lomo else None
    if lomo_df is not None:
        xl, xt = _error_bars(lomo_df, resid, spread)
        params = replace(
            params,
            xfer_lat_rel_err=xl,
            xfer_thr_rel_err=xt,
            provenance=f"{params.provenance}; transfer error bar (a model the fit did not see): p90 of "
            f"each of {lomo_df[HELD].nunique()} models predicted by a fit on the other "
            f"{len(models) - 1} (leave-one-model-out)",
        )
    summary = {
        "fit": _median_abs(resid),
        "loo": _median_abs(loo_df),
        "loo_supported": _median_abs(supported),
        "heldout": _median_abs(held_df),
        "lomo": _median_abs(lomo_df),
    }
    return Calibration(
        params, resid, loo_df, held_df, campaign_drift(usable), anchors[version], contended, spread, summary, lomo_df
    )


def _error_bars(errs: pd.DataFrame | None, resid: pd.DataFrame, spread: dict) -> tuple[float, float]:
    """90th percentile of out-of-sample |rel err| (in-sample if none), never below the repeat spread."""
    src = errs if errs is not None and not errs.empty else resid
    lat = np.abs(src[[t for t in LATENCY if t in src]].to_numpy(float)).ravel()
    thr = np.abs(src["throughput_tok_s"].to_numpy(float)) if "throughput_tok_s" in src else np.array([])
    lat_err = float(np.nanpercentile(lat, 90)) if np.isfinite(lat).any() else 0.25
    thr_err = float(np.nanpercentile(thr, 90)) if np.isfinite(thr).any() else 0.25
    floor_lat = np.nanmax([spread.get(t, np.nan) for t in LATENCY] + [0.0])
    floor_thr = spread.get("throughput_tok_s", 0.0)
    return max(lat_err, floor_lat), max(thr_err, 0.0 if floor_thr != floor_thr else floor_thr)
