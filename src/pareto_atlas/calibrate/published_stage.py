"""The `published` stage: calibrate the GPU cards on published measurements, say what was used and
how well it predicts sources it never saw, and keep the fit in the store for `simulate`."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
from rich.console import Console

from pareto_atlas.calibrate.fit import TARGETS
from pareto_atlas.calibrate.published import (
    B1,
    GROUPS,
    SERVED_ENGINE,
    CardCalibration,
    for_atlas,
    for_engine,
    rests_on,
    tpot_held_out_by_source,
)
from pareto_atlas.calibrate.published_formats import report_lines as format_lines
from pareto_atlas.calibrate.published_table import PublishedTable, load_published
from pareto_atlas.simulate.api import simulate_point
from pareto_atlas.simulate.cost_model import compute_dtype
from pareto_atlas.simulate.params import CalibParams, default_params
from pareto_atlas.simulate.space import default_knobs
from pareto_atlas.spec.cards import HardwareCard, shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.calibrate.published_cache import FIT_VERSION, fit_key  # noqa: F401 (their home)
from pareto_atlas.store import Store
from pareto_atlas.store.db import dumps

PREFIX = "published-"  # calib_id prefix of published calibrations in the store
GOAL = 0.15  # held-out median |error| a card should reach
BAR_CARDS = 4  # GPU cards that should have a leave-one-source-out TPOT error
# The seed paper's setup (Qwen2.5-7B, 512/128, batch 1), at which the ratios are projected; its
# measured ratios are references in report/paper_claims.toml, printed beside them (report.claims.ratio_lines).
PAPER_MODEL, PAPER_PROMPT, PAPER_OUTPUT = "qwen2.5-7b", 512, 128


def store_published(store: Store, study: str, table: PublishedTable, cals: list[CardCalibration], by: str) -> str:
    """Keep every (card, engine) fit, marking the one the atlas uses per card (by: "command" when a
    user asked for it, "simulate" when fitted automatically)."""
    key, used = fit_key(table), for_atlas(cals)
    for cal in cals:
        meta = {
            "key": key,
            "by": by,
            "used": used[cal.hardware] is cal,
            "table_sha256": table.sha256,
            "tables": list(table.paths),
            "held_out": cal.held_out,
            "errors": cal.errors,
            "tpot_basis": list(cal.tpot_basis),
            "lomo_errors": cal.lomo_errors,
            "anchors": cal.anchors.to_dict(orient="records"),
        }
        store.put_calibration(
            {
                "calib_id": f"{PREFIX}{key}-{cal.hardware}-{cal.engine}",
                "study": study,
                "hardware": cal.hardware,
                "engine": f"published:{cal.engine}",
                "engine_version": None,
                "params_json": dumps(cal.params.to_dict()),
                "fidelity_json": dumps({"published": meta}),
                "n_anchors": len(cal.anchors),
            }
        )
    return key


def stored_published(
    store: Store, study: str, shipped_key: str | None = None, engine: str = SERVED_ENGINE
) -> dict[str, CalibParams]:
    """Per card, the stored published fit `simulate` uses for points served by `engine`: of the
    latest fits a user asked for (`pareto-atlas published`, maybe with their own tables or one
    engine), else of the latest fitted automatically from the shipped table as it is now
    (shipped_key), the engine's own fit where that fitting made one for the card, else the one it
    marked as the atlas's (its provenance then says the engine differs: rests_on)."""
    cal = store.calibrations(study)
    used: dict[str, dict[str, tuple]] = {"command": {}, "simulate": {}}
    own: dict[str, dict[str, tuple]] = {"command": {}, "simulate": {}}
    for r in cal[cal.calib_id.str.startswith(PREFIX)].itertuples():  # oldest first: the latest wins
        meta = json.loads(r.fidelity_json)["published"]
        if meta["by"] != "command" and meta["key"] != shipped_key:
            continue
        by, fit_engine = ("command" if meta["by"] == "command" else "simulate"), str(r.engine).split(":", 1)[-1]
        fit = (meta["key"], meta.get("table_sha256"), fit_engine, CalibParams.from_dict(json.loads(r.params_json)))
        if meta["used"]:
            used[by][r.hardware] = fit
        if fit_engine == engine:
            own[by][r.hardware] = fit
    out: dict[str, CalibParams] = {}
    for by in ("simulate", "command"):  # a fit a user asked for beats an automatic one
        for card, (key, sha, fit_engine, params) in used[by].items():
            mine = own[by].get(card)
            same = mine is not None and mine[:2] == (key, sha)  # the engine's fit of the same fitting
            out[card] = rests_on(mine[3], engine, engine) if same else rests_on(params, fit_engine, engine)
    return out


def published_params(
    study: str,
    store: Store,
    console: Console,
    cards: list[str],
    links: bool = False,
    moe: bool = False,
    engine: str = SERVED_ENGINE,
) -> dict[str, CalibParams]:
    """The published calibrations of these GPU cards for `simulate`'s points served by `engine`
    (each card's fit of that engine where it has one, else its atlas fit: for_engine): stored ones (see
    stored_published); cards that have none but have shipped anchors are fitted now, once, and
    kept in the store under the shipped table's hash (seconds, then free until it changes).
    links: each card's link fitted on the published multi-GPU rows too (with_links), for a space
    with parallel points (minutes once, then from the fit cache); moe: each card's MoE terms fitted
    on the published MoE rows too (with_moe_fits), for a space with a mixture of experts."""
    shipped = load_published()
    have = stored_published(store, study, fit_key(shipped), engine)
    missing = [c for c in cards if c not in have and c in set(shipped.rows.gpu)]
    cals: list[CardCalibration] = []
    if missing:
        from pareto_atlas.calibrate import published_cache

        def tell(cached: bool) -> None:
            console.print(
                f"  published anchors: the fits of {', '.join(missing)} on {shipped.paths[0]} from the cache "
                f"({published_cache.cache_dir()}; same table, fit and code)"
                if cached
                else f"  published anchors: fitting {', '.join(missing)} on {shipped.paths[0]} (once per table "
                "version; `pareto-atlas published` prints the fit)",
                highlight=False,
            )

        cals = published_cache.fitted(shipped, missing, tell)
        store_published(store, study, shipped, cals, by="simulate")
        have.update(for_engine(cals, engine))
    if not links:
        return {c: have[c] for c in cards if c in have}
    out = with_links(have, cards, console, cals)
    if not moe:
        return out
    from pareto_atlas.calibrate.published_moe_stage import with_moe_fits

    return with_moe_fits(out, cards, console, cals)


def with_links(
    have: dict[str, CalibParams], cards: list[str], console: Console, cals: list[CardCalibration] | None = None
) -> dict[str, CalibParams]:
    """The cards' calibrations with each card's link fitted on the published multi-GPU rows
    (calibrate.published_link; a card with such rows but no one-GPU fit gets its default's), so the
    parallel points use it and carry its held-out bar."""
    from pareto_atlas.calibrate.published_link import link_calibrations, with_link

    hw = shipped_hardware()
    links = link_calibrations([c for c in cards if c in hw and hw[c].kind != "cpu"], one_gpu=cals)
    out = {c: have[c] for c in cards if c in have}
    for c, link in links.items():
        out[c] = with_link(out.get(c) or default_params(hw[c], "vllm"), link)
        console.print(f"  {c}: {link.provenance()}", highlight=False, soft_wrap=True)
    return out


def _tpot(hw: HardwareCard, params: CalibParams, knobs: Knobs) -> float:
    m = shipped_models()[PAPER_MODEL]
    return simulate_point(m, hw, knobs, PAPER_PROMPT, PAPER_OUTPUT, concurrency=1, n_requests=20, params=params)[
        "tpot_p50_ms"
    ]


def paper_ratios(params: dict[str, CalibParams]) -> pd.DataFrame:
    """Projected TPOT ratios vs F16 at the seed paper's setup (batch 1) on every GPU card, with the
    card's calibration where it has one (ratio_lines prints the paper's measured ones beside them)."""
    ngram = next(k for k in default_knobs("gpu") if k.spec == "ngram")  # the atlas's own n-gram knob
    rows = []
    for name, hw in shipped_hardware().items():
        if hw.kind != "gpu":
            continue
        p = params.get(name) or default_params(hw, "vllm")
        base = _tpot(hw, p, Knobs())
        spec = Knobs(spec="ngram", spec_k=ngram.spec_k, spec_accept=ngram.spec_accept)
        rows.append(
            {
                "hardware": name,
                "calibration": p.provenance.split(";")[0],
                "f16_tpot_ms": base,
                "awq4": _tpot(hw, p, Knobs(weights="AWQ4")) / base,
                "fp8": _tpot(hw, p, Knobs(weights="FP8")) / base,
                # where each format's kernel cost comes from: fitted on the card's published rows,
                # carried from its generation ("generation"), its family's, or derived (the roofline)
                "awq4_basis": p.weight_cost("AWQ4", "gemv")[1],
                "fp8_basis": p.weight_cost("FP8", "gemv")[1],
                "ngram": _tpot(hw, p, spec) / base,
            }
        )
    return pd.DataFrame(rows)


def _pct(v: float) -> str:
    return f"{v:6.1%}" if v == v else f"{'n/a':>6s}"


def _held(r: pd.Series) -> str:
    errs = [
        f"{t.rsplit('_', 1)[0] if t.endswith('_ms') else 'throughput'} {r[t + '_held_out']:+.0%}"
        for t in TARGETS
        if r[t + "_held_out"] == r[t + "_held_out"]
    ]
    tok = r.get("per_token_held_out", np.nan)
    return ", ".join(errs + ([f"per output token (e2e / output) {tok:+.0%}"] if tok == tok else [])) or "-"


def _b1(c: CardCalibration) -> bool:
    """Whether the card's TPOT error counts batch-1 decode speed (marked * wherever it is printed)."""
    return B1 in c.tpot_basis


B1_NOTE = (
    f"* TPOT incl. {B1}: a single request's e2e latency / output tokens (prefill included), where the "
    "source publishes no TPOT or ITL"
)


def _effs(p: CalibParams, hw: HardwareCard) -> str:
    # the fitted per-weight costs as the fraction of the card's peak they reach (2 FLOPs per weight)
    gemm = ", ".join(
        f"{d} {2.0 / (hw.peak_flops(compute_dtype(d, hw)) * v):.0%}" for d, v in p.gemm_s_per_weight.items()
    )
    attn = ", ".join(f"{k} {v:.0%}" for k, v in p.eff_attn_by_kv.items()) or f"{p.eff_attn:.0%}"
    return (
        f"eff_bw {p.eff_bw:.0%} of {hw.mem_bw_gbs:g} GB/s; GEMM {gemm or 'derived'} of peak FLOP/s; "
        f"attention {attn}; lm_head x{p.head_ratio:.2f}; overhead {p.overhead_step_s * 1e3:.2f} ms/step "
        f"+ {p.overhead_seq_s * 1e6:.1f} us/sequence + {p.overhead_req_s * 1e3:.1f} ms/request (outside the steps)"
    )


def card_lines(cal: CardCalibration, used: bool) -> list[str]:
    hw, p = shipped_hardware()[cal.hardware], cal.params
    out = [
        f"{cal.hardware} / {cal.engine}{' (used by the atlas)' if used else ''}: {p.provenance}",
        f"  fitted: {_effs(p, hw)}",
    ]
    for r in cal.anchors.itertuples():
        s = pd.Series(r._asdict())
        on = f" on {r.gpu_published}" if r.gpu_published and r.gpu_published != cal.hardware else ""
        out.append(
            f"  [{r.source_id}] {r.model} {r.weights}/kv {r.kv} {r.prompt_tokens}/{r.output_tokens} "
            f"{r.load} {r.load_value}{on}: {r.published} | held out: {_held(s)}"
        )
    bar = f"error bar carried: latency ±{p.lat_rel_err:.1%}, throughput ±{p.thr_rel_err:.1%}"
    met = [g for g, v in cal.errors.items() if v == v]
    if not met:
        out.append(f"  one anchor, nothing to hold out: no held-out error; {bar}")
        return out
    verdict = "meets" if all(cal.errors[g] <= GOAL for g in met) else "misses"
    errs = ", ".join(
        f"{g}{f' (incl. {B1})' if g == 'TPOT' and _b1(cal) else ''} {_pct(v).strip()}" for g, v in cal.errors.items()
    )
    out.append(f"  {cal.held_out} median |error|: {errs} -> {verdict} the {GOAL:.0%} goal; {bar}")
    out += lomo_lines(cal)
    return out


def lomo_lines(cal: CardCalibration) -> list[str]:
    """The card's leave-one-model-out errors: each model's anchors predicted by a fit on the others."""
    if not cal.lomo_errors:
        return (
            [
                f"  leave-one-model-out: one model ({cal.anchors.model.iloc[0]}), nothing to carry to; "
                f"transfer error not measured"
            ]
            if len(cal.anchors)
            else []
        )
    p = cal.params
    per = "; ".join(
        f"{m} ({int((cal.anchors.model == m).sum())} anchors): "
        + ", ".join(
            f"{g}{f' (incl. {B1})' if g == 'TPOT' and _b1(cal) else ''} {_pct(v).strip()}" for g, v in e.items()
        )
        for m, e in cal.lomo_errors.items()
    )
    return [
        f"  leave-one-model-out median |error| (a fit on the card's other models): {per}; transfer error bar "
        f"carried to an unseen model: latency ±{p.xfer_lat_rel_err:.1%}, throughput ±{p.xfer_thr_rel_err:.1%}"
    ]


def _lomo_tpot(c: CardCalibration) -> float:
    # median |TPOT error| over the card's held-out models' anchors, batch-1 decode speed included
    # where it stands for TPOT (as in the card's own TPOT column); NaN with one model
    col = [t + "_lomo" for t in GROUPS["TPOT"]] + ["per_token_lomo"]
    v = np.abs(c.anchors[col].to_numpy(float)).ravel() if set(col) <= set(c.anchors) else np.array([])
    return float(np.nanmedian(v)) if np.isfinite(v).any() else np.nan


def summary_lines(cals: list[CardCalibration]) -> list[str]:
    used = for_atlas(cals)
    out = [
        f"Held-out median |relative error| per card and engine (goal <= {GOAL:.0%}); error bar = p90 of the same",
        f"{'card':15s} {'engine':7s} {'atlas':5s} {'anchors':>7s} {'sources':>7s} {'TTFT':>6s} {'TPOT':>6s}  "
        f"{'thr.':>6s} {'bar lat':>7s} {'bar thr':>7s} {'models':>6s} {'LOMO TPOT':>9s} {'xfer lat':>8s} "
        f"{'xfer thr':>8s}  held out by",
    ]
    for c in cals:
        e = c.errors
        out.append(
            f"{c.hardware:15s} {c.engine:7s} {'yes' if used[c.hardware] is c else 'no':5s} {len(c.anchors):7d} "
            f"{c.n_sources:7d} {_pct(e['TTFT'])} {_pct(e['TPOT'])}{'*' if _b1(c) else ' '} "
            f"{_pct(e['throughput'])} {c.params.lat_rel_err:7.1%} {c.params.thr_rel_err:7.1%} "
            f"{c.anchors.model.nunique():6d} {_pct(_lomo_tpot(c)) + ('*' if _b1(c) else ' '):>9s} "
            f"{_pct(c.params.xfer_lat_rel_err):>8s} {_pct(c.params.xfer_thr_rel_err):>8s}  {c.held_out or '-'}"
        )
    out.append(
        "LOMO TPOT: median |TPOT error| of each model's anchors from a fit on the card's other models "
        "(leave-one-model-out; * incl. batch-1 decode speed as in TPOT); xfer: the error bar a point carried "
        "to an unseen model takes (p90 of the same, latency incl. TTFT)"
    )
    if any(_b1(c) for c in cals):
        out.append(B1_NOTE)
    by_card = {c.hardware: c for c in cals if c.engine == SERVED_ENGINE}
    cards = [f"{g}{'*' if _b1(by_card[g]) else ''}" for g in tpot_held_out_by_source(cals)]
    out.append(
        f"{SERVED_ENGINE} TPOT held out by source on {len(cards)} GPU card{'s' if len(cards) != 1 else ''}"
        f"{': ' + ', '.join(cards) if cards else ''} (bar: {BAR_CARDS}"
        f"{', met' if len(cards) >= BAR_CARDS else ', not met: too few cards have two sources'})"
    )
    return out


def published_study(
    study: str,
    store: Store,
    console: Console,
    tables: list[Path] | None = None,
    engines: list[str] | None = None,
    hardware: list[str] | None = None,
    ratio_lines: Callable[[pd.DataFrame], list[str]] | None = None,
) -> list[CardCalibration]:
    """Fit, report and store the published calibration (the shipped table plus `tables`). `ratio_lines`
    prints the projected ratios (paper_ratios) beside the paper's (report.claims.ratio_lines: the report
    alone reads the paper's references); without it they are not printed."""
    table = load_published(tables)
    if engines:
        table = table.only(engines)
    show = console.print
    show(
        f"[bold]published[/]: {len(table.rows)} anchors from {table.rows.source_id.nunique()} sources "
        f"({', '.join(table.paths)}, sha256 {table.sha256[:12]})"
    )
    for sid, g in table.rows.groupby("source_id", sort=False):
        cite = " ".join(f"published:{u}" for u in dict.fromkeys(g.source))
        versions = "; ".join(dict.fromkeys(g.engine + " " + g.engine_version))
        dates = ", ".join(dict.fromkeys(g.date))
        show(
            f"  {sid}: {len(g)} rows on {', '.join(dict.fromkeys(g.gpu))} ({versions}; {dates}) {cite}",
            highlight=False,
            soft_wrap=True,
        )
    from pareto_atlas.calibrate import published_cache

    def tell(cached: bool) -> None:
        if cached:
            show(
                f"  the fits from the cache ({published_cache.cache_dir()}; same tables, fit and code)", highlight=False
            )

    # the same fit as calibrate_published_formats(table, hardware), kept in the fit cache
    t0 = time.monotonic()
    cals = published_cache.fitted(table, hardware or list(dict.fromkeys(table.rows.gpu)), tell)
    used = for_atlas(cals)
    for cal in cals:
        show("\n".join(card_lines(cal, used[cal.hardware] is cal)), markup=False, highlight=False, soft_wrap=True)
    gpus = [n for n, h in shipped_hardware().items() if h.kind == "gpu" and n not in used]
    show(f"no published anchor (uncalibrated default, ±25 %): {', '.join(gpus) or 'none'}", highlight=False)
    show("\n".join(summary_lines(cals)), highlight=False)
    show("\n".join(format_lines(cals)), markup=False, highlight=False, soft_wrap=True)
    show(f"  (one-GPU fits: {time.monotonic() - t0:.0f} s)", highlight=False)
    if ratio_lines is not None:
        show("\n".join(ratio_lines(paper_ratios({g: c.params for g, c in used.items()}))), highlight=False)
    key = store_published(store, study, table, cals, by="command")
    show(
        f"stored as {PREFIX}{key}-<card>-<engine> for study {study!r}; `simulate` runs each GPU point on its "
        "engine's fit above where the card has one, else on the card's atlas fit",
        highlight=False,
    )
    return cals


def multigpu_study(
    console: Console,
    engines: list[str] | None = None,
    hardware: list[str] | None = None,
    one_gpu: list[CardCalibration] | None = None,
) -> list:
    """Fit the shipped multi-GPU table per (card, engine) and print its held-out error per parallelism
    (calibrate.published_multigpu): leave one source, one model, one engine out."""
    from pareto_atlas.calibrate.published_multigpu import multigpu_calibrations, report_lines
    from pareto_atlas.calibrate.published_table import load_multigpu

    table = load_multigpu()
    show = console.print
    show(
        f"[bold]published, several GPUs[/]: {len(table.rows)} rows from {table.rows.source_id.nunique()} sources "
        f"({', '.join(table.paths)}, sha256 {table.sha256[:12]})"
    )
    for sid, g in table.rows.groupby("source_id", sort=False):
        tps = ", ".join(f"TP{t}" for t in sorted(set(g.tp.astype(int))))
        show(
            f"  {sid}: {len(g)} rows on {', '.join(dict.fromkeys(g.gpu))} ({', '.join(dict.fromkeys(g.engine))}; "
            f"{tps}) published:{g.source.iloc[0]}",
            highlight=False,
            soft_wrap=True,
        )
    t0 = time.monotonic()
    cals = multigpu_calibrations(table, hardware, engines)
    show("\n".join(report_lines(cals)), markup=False, highlight=False, soft_wrap=True)
    show(f"  (per-engine fits: {time.monotonic() - t0:.0f} s)", highlight=False)
    from pareto_atlas.calibrate import published_link

    t0 = time.monotonic()
    cards = [g for g in dict.fromkeys(table.rows.gpu) if not hardware or g in hardware]
    links = published_link.link_calibrations(cards, table, one_gpu)
    show("\n".join(published_link.report_lines(list(links.values()))), markup=False, highlight=False, soft_wrap=True)
    show(f"  (link fits: {time.monotonic() - t0:.0f} s)", highlight=False)
    from pareto_atlas.calibrate.published_moe_stage import moe_study

    t0 = time.monotonic()
    moe_study(console, hardware, one_gpu)
    show(f"  (MoE fits: {time.monotonic() - t0:.0f} s)", highlight=False)
    return cals
