"""GPU cards calibrated on published measurements: one fit per (card, engine) over its published
anchors (calibrate.fit's least squares), its error bar from predicting each source held out, and
per card the fit the atlas uses: its own engine's where there is one."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from pareto_atlas.calibrate.fidelity import LATENCY, _error_bars
from pareto_atlas.calibrate.fit import TARGETS, _anchors, fit_params, predict
from pareto_atlas.calibrate.published_runs import read_as_run
from pareto_atlas.calibrate.published_table import (
    UNSTATED_KV,
    PublishedTable,
    anchor_row,
    batch1_speed,
    parallel_knobs,
    published_metrics,
)
from pareto_atlas.simulate.memory import plan_memory
from pareto_atlas.simulate.params import CalibParams, default_params, with_error_bars
from pareto_atlas.simulate.schedulers import SCHEDULERS, default_policy
from pareto_atlas.spec.cards import HardwareCard, ModelCard, shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs

SERVED_ENGINE = "vllm"  # the engine the atlas simulates on GPU cards
# The targets grouped as the report states them (TTFT and TPOT: median and tail together).
GROUPS = {
    "TTFT": ("ttft_p50_ms", "ttft_p99_ms"),
    "TPOT": ("tpot_p50_ms", "tpot_p99_ms"),
    "throughput": ("throughput_tok_s",),
}
B1 = "batch-1 decode speed"  # e2e / output tokens of one request where no TPOT or ITL is published
LOSO = "leave-one-source-out"
LOAO = "leave-one-anchor-out within its only source"


@dataclass(frozen=True)
class CardCalibration:
    hardware: str
    engine: str  # one fit per engine: scheduling overheads and kernels are the engine's
    params: CalibParams  # fitted, carrying the held-out error bar and its provenance
    anchors: pd.DataFrame  # per anchor: source, setup, measured / fitted / held-out per target
    held_out: str  # LOSO, LOAO, or "" (a single anchor: nothing to hold out)
    errors: dict[str, float]  # median |held-out relative error| per GROUPS key (NaN: none)
    tpot_basis: tuple[str, ...] = ()  # what the TPOT error is over: "TPOT/ITL" published, B1, or both
    # per model among the card's anchors: median |relative error| per GROUPS key of its anchors
    # predicted by a fit on the card's other models (leave-one-model-out); empty with one model
    lomo_errors: dict[str, dict[str, float]] = field(default_factory=dict)
    # the quantized formats' kernel costs and their held-out errors (calibrate.published_formats.FormatFit)
    formats: tuple = ()

    @property
    def n_sources(self) -> int:
        return int(self.anchors.source_id.nunique())


def _max_seqs(r: pd.Series, model: ModelCard, hw: HardwareCard, start: CalibParams) -> int:
    # fixed by memory alone (mem_util is not fitted), so the same for every step of the fit
    knobs = Knobs(weights=r["weights"], kv="f16" if r["kv"] == UNSTATED_KV else r["kv"], **parallel_knobs(r))
    return max(1, plan_memory(model, hw, knobs, int(r["prompt_tokens"]), int(r["output_tokens"]), start).max_seqs)


def _policy(r: pd.Series, hw: HardwareCard) -> tuple[str, int, int] | None:
    # the row's engine's default scheduler (the one the atlas's GPU points run); None: not modelled
    engine = str(r.get("engine", ""))
    return default_policy(engine, hw) if engine in SCHEDULERS and hw.kind != "cpu" else None


# The one-GPU published fit runs a closed-loop row whose source states how it ran it (aiconfigurator's
# benchmark: calibrate.published_runs) as it ran it, and reads it as its source read it; every other
# row under its engine's default scheduler, read as medians. False: every row so (before 2026-12-02's
# one-GPU as-run change); the fit cache's key follows it (calibrate.published_cache.fit_key).
RUN_AS_PUBLISHED = True
# Each row's engine release decides whether its steps overlap the host's work with the device's
# (vLLM's async scheduling, on by default from simulate.schedulers.VLLM_ASYNC_FROM): such a row is
# simulated so (cost_model.coeffs host_overlap, the `+overlap` admission), in every published fit and
# held-out prediction (the frame's host_overlap column, host_overlaps). False: every row's host work
# serial (before 2026-12-02's async-scheduling change); the fit caches' keys follow it.
HOST_OVERLAP_BY_RELEASE = True


def host_overlaps(rows: pd.DataFrame) -> list[bool]:
    """Per published row, whether its engine release overlapped a step's host work with the device's
    (simulate.schedulers.host_overlap; all False where HOST_OVERLAP_BY_RELEASE is off, read now)."""
    from pareto_atlas.simulate.schedulers import host_overlap

    if not HOST_OVERLAP_BY_RELEASE:
        return [False] * len(rows)
    return [
        host_overlap(str(r.get("engine", "")), str(r.get("engine_version", "")), _pp(r)) for _, r in rows.iterrows()
    ]


def _pp(r: pd.Series) -> int:
    v = r.get("pp", 1)
    return int(float(v)) if v is not None and v == v and str(v).strip() else 1


def card_frame(rows: pd.DataFrame, hw: HardwareCard, as_run: bool = False) -> tuple[pd.DataFrame, list[ModelCard]]:
    """The fit's anchor rows for one card's published rows, and each row's model card. as_run: each
    row whose source states its run simulated and read as it ran (calibrate.published_runs.read_as_run);
    else every row under its engine's default scheduler, read as medians."""
    cards, start = shipped_models(), default_params(hw, SERVED_ENGINE)
    models = [cards[m] for m in rows.model]
    frame = pd.DataFrame(
        [anchor_row(r, _max_seqs(r, m, hw, start), _policy(r, hw)) for (_, r), m in zip(rows.iterrows(), models)]
    )
    # On a GPU, F16 and BF16 weights run the same tensor-core GEMMs at the same rate: one 16-bit
    # float cost, fitted on both (apart, a card's F16 batches fitted their GEMM at a quarter of its
    # BF16 one, and the atlas's F16 points inherited it). A format without a cost of its own borrows
    # its family's, so F16 points use this one.
    frame["weights"] = frame["weights"].replace({"F16": "BF16"})
    frame = frame.reindex(columns=list(frame.columns) + [t for t in TARGETS if t not in frame])
    frame["host_overlap"] = host_overlaps(rows)
    # the row's engine: what its fit's parameters name (CalibParams.engine), which the cost model's
    # per-engine operator laws follow (simulate.gemm_floor)
    frame["engine"] = rows["engine"].astype(str).to_numpy() if "engine" in rows else SERVED_ENGINE
    if as_run:
        frame = read_as_run(frame, rows.reset_index(drop=True))
    return frame, models


def one_gpu_frame(rows: pd.DataFrame, hw: HardwareCard) -> tuple[pd.DataFrame, list[ModelCard]]:
    """card_frame as the one-GPU published fit (calibrate_card, and the quantized formats' fit on it)
    builds it: as run where RUN_AS_PUBLISHED."""
    return card_frame(rows, hw, as_run=RUN_AS_PUBLISHED)


def attn_flops_share(frame: pd.DataFrame, models: list[ModelCard]) -> dict[str, float]:
    """Per KV dtype, the largest share of a prompt's FLOPs its attention matmuls (QK^T, PV: 4 FLOPs per
    head dimension per (query, key) pair, P^2 / 2 pairs causal) take among the anchors, against the
    linear layers' 2 FLOPs per weight per token: how much the anchors can see of attention's speed."""
    out: dict[str, float] = {}
    for (_, r), m in zip(frame.iterrows(), models):
        p = float(r["prompt_tokens"])
        attn = 4.0 * m.n_layers * m.n_heads * m.head_dim * p * p / 2.0
        out[r["kv"]] = max(out.get(r["kv"], 0.0), attn / (attn + 2.0 * m.matmul_params * p))
    return out


# A prompt's attention must take at least this share of some anchor's prefill FLOPs for the anchors
# to fit its efficiency: below it, even halving the efficiency moves no prediction by more than the
# spread of an anchor's repeats (~5 %), and a free fit of it drifted where it pleased (H200's vLLM fit,
# on 32- and 512-token prompts where attention is ~1 % of the FLOPs, put it at 16 % of peak: an
# 8,000-token prompt then spent 105 ms on attention alone).
ATTN_IDENTIFIED = 0.05

# A decode's KV reads must take at least this share of some anchor's decode-step bytes (weights + the
# batch's KV) for that anchor to show their speed, and anchors that show it must differ in context per
# sequence: at one context, KV bytes grow with the batch exactly as the per-sequence overhead does, and
# the fit splits the two where it pleases (H200's vLLM fit, on 512-token prompts alone, read the KV at
# 45 % of the card's bandwidth, and a 4,000-token decode batch took twice its measured TPOT).
KV_IDENTIFIED = 0.1


def kv_read_contexts(frame: pd.DataFrame, models: list[ModelCard]) -> dict[str, set[int]]:
    """Per KV dtype, the decode contexts per sequence (prompt + half the output) of the anchors whose
    KV reads take at least KV_IDENTIFIED of a decode step's bytes (an open-rate anchor, whose batch
    is not known, shows none)."""
    from pareto_atlas.simulate.cost_model import weight_bytes
    from pareto_atlas.spec.knobs import BITS_PER_KV

    out: dict[str, set[int]] = {}
    for (_, r), m in zip(frame.iterrows(), models):
        batch = int(r["concurrency"]) or (int(r["slots"]) if r["rate_rps"] != r["rate_rps"] else 0)
        ctx = int(r["prompt_tokens"]) + int(r["output_tokens"]) // 2
        kv = batch * ctx * m.kv_bytes_per_token(BITS_PER_KV[r["kv"]])
        seen = out.setdefault(r["kv"], set())
        if kv >= KV_IDENTIFIED * (kv + weight_bytes(m, r["weights"])):
            seen.add(ctx)
    return out


def fit_card(frame: pd.DataFrame, models: list[ModelCard], hw: HardwareCard) -> tuple[CalibParams, np.ndarray]:
    """Least-squares CalibParams for one card from the serving engine's GPU defaults. One head-ratio
    start: on a GPU every batch runs as GEMM, so the lm_head only scales with the shared GEMV term.

    A prompt's attention efficiency is fitted only where an anchor's prompt is long enough to show it
    (ATTN_IDENTIFIED); elsewhere it is left out of the fit and follows the fitted decode attention's
    efficiency (CalibParams.attn_flops_eff: a KV dtype without its own figure uses its eff_attn). A
    decode's KV read efficiency likewise, where anchors at two contexts show it (KV_IDENTIFIED); else
    it stays the uncalibrated default's eff_attn."""
    unseen = (
        tuple(f"attn_flops:{kv}" for kv, share in attn_flops_share(frame, models).items() if share < ATTN_IDENTIFIED)
        + tuple(f"eff_attn:{kv}" for kv, ctx in kv_read_contexts(frame, models).items() if len(ctx) < 2)
        if hw.kind == "gpu"
        else ()
    )
    start = default_params(hw, SERVED_ENGINE)
    engines = set(frame["engine"]) if "engine" in frame else set()
    if len(engines) == 1:
        # the fit's parameters name its rows' engine (they start from the served engine's defaults)
        start = replace(start, engine=str(engines.pop()))
    overlapped = frame["host_overlap"].to_numpy(bool) if "host_overlap" in frame else np.zeros(len(frame), bool)
    if overlapped.any() and not overlapped.all():
        # A step's host cost hides under the device's time on rows whose engine overlaps the two
        # (host_overlaps): those rows cannot show it. Where the card has rows that ran serially too,
        # the host cost is fitted on them alone and kept while every row fits the rest.
        serial = ~overlapped
        host, _ = fit_card(frame[serial], [m for m, s in zip(models, serial) if s], hw)
        start = replace(start, overhead_step_s=host.overhead_step_s, overhead_seq_s=host.overhead_seq_s)
        unseen += ("overhead_step_s", "overhead_seq_s")
    return fit_params(frame, models, hw, start=start, fit_cv=False, head_ratio_starts=(1.0,), fixed=unseen)


def _rel(pred: np.ndarray, meas: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(meas > 0, pred / meas - 1.0, np.nan)


def held_out_errors(
    rows: pd.DataFrame, frame: pd.DataFrame, models: list[ModelCard], hw: HardwareCard
) -> tuple[np.ndarray, str]:
    """Relative error of each anchor predicted by a fit that never saw its source (or, on a card
    with one source, never saw the anchor), shape (n, len(TARGETS)); and which scheme that was."""
    src = rows.source_id.to_numpy()
    if len(set(src)) >= 2:
        folds, how = [src == s for s in dict.fromkeys(src)], LOSO
    elif len(rows) >= 2:
        folds, how = [np.arange(len(rows)) == i for i in range(len(rows))], LOAO
    else:
        return np.full((len(rows), len(TARGETS)), np.nan), ""
    meas = frame[list(TARGETS)].to_numpy(float)
    err = np.full_like(meas, np.nan)
    for test in folds:
        train = ~test
        p, _ = fit_card(frame[train], [m for m, t in zip(models, train) if t], hw)
        pred = predict(_anchors(frame[test]), [m for m, t in zip(models, test) if t], hw, p)
        err[test] = _rel(pred, meas[test])
    return err, how


def held_out_by_model(
    rows: pd.DataFrame, frame: pd.DataFrame, models: list[ModelCard], hw: HardwareCard
) -> np.ndarray | None:
    """Relative error of each anchor predicted by a fit on the card's anchors of other models, shape
    (n, len(TARGETS)): how far the card's calibration carries to a model it never saw. None where the
    card's anchors are of one model."""
    names = rows.model.to_numpy()
    if len(set(names)) < 2:
        return None
    meas = frame[list(TARGETS)].to_numpy(float)
    err = np.full_like(meas, np.nan)
    for m in dict.fromkeys(names):
        test = names == m
        train = ~test
        p, _ = fit_card(frame[train], [c for c, t in zip(models, train) if t], hw)
        pred = predict(_anchors(frame[test]), [c for c, t in zip(models, test) if t], hw, p)
        err[test] = _rel(pred, meas[test])
    return err


def per_token_errors(err: np.ndarray, b1: np.ndarray) -> np.ndarray:
    """Relative error of the latency per output token (e2e / output) of the batch-1 speed rows (b1),
    NaN elsewhere: predicted / published - 1, the inverse of their throughput error (same tokens)."""
    thr = err[:, TARGETS.index("throughput_tok_s")]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b1, 1.0 / (1.0 + thr) - 1.0, np.nan)


def _median_abs(err: np.ndarray, cols: tuple[str, ...], extra: np.ndarray | None = None) -> float:
    v = np.abs(err[:, [TARGETS.index(c) for c in cols]]).ravel()
    if extra is not None:
        v = np.concatenate([v, np.abs(extra)])
    return float(np.nanmedian(v)) if np.isfinite(v).any() else np.nan


def _with_per_token(err: np.ndarray, per_tok: np.ndarray) -> pd.DataFrame:
    """The errors as the error bar reads them: a batch-1 speed row's per-token error is a latency
    error, entered where its TPOT would be (it has none)."""
    df = pd.DataFrame(err, columns=list(TARGETS))
    df["tpot_p50_ms"] = np.where(np.isfinite(per_tok), per_tok, df["tpot_p50_ms"])
    return df


def _provenance(rows: pd.DataFrame, engine: str, how: str, err: np.ndarray, per_tok: np.ndarray) -> str:
    srcs = ", ".join(f"{s} {n}" for s, n in rows.source_id.value_counts(sort=False).items())
    lat = np.isfinite(err[:, [TARGETS.index(c) for c in LATENCY]]).any()
    held = (["latency" if lat else f"latency from {B1}"] if lat or np.isfinite(per_tok).any() else []) + (
        ["throughput"] if np.isfinite(err[:, TARGETS.index("throughput_tok_s")]).any() else []
    )
    bar = (
        f"error bar: p90 of {how} ({' and '.join(held)}; the default's where none is held out)"
        if held
        else "error bar: none held out, kept at the uncalibrated default's"
    )
    n = f"{len(rows)} published anchor{'s' if len(rows) > 1 else ''}"
    return f"calibrated on {n} ({engine}: {srcs}); {bar}"


def calibrate_card(rows: pd.DataFrame, hw: HardwareCard) -> CardCalibration:
    """Fit one card on one engine's published rows and score it on held-out sources."""
    rows = rows.reset_index(drop=True)
    engine = str(rows.engine.iloc[0])
    if rows.engine.nunique() > 1:
        raise ValueError(f"calibrate_card: one engine per fit; got {', '.join(sorted(set(rows.engine)))}")
    frame, models = one_gpu_frame(rows, hw)
    params, fitted = fit_card(frame, models, hw)
    meas = frame[list(TARGETS)].to_numpy(float)
    err, how = held_out_errors(rows, frame, models, hw)
    b1 = np.array([batch1_speed(r) for _, r in rows.iterrows()], dtype=bool)
    per_tok, fit_rel = per_token_errors(err, b1), _rel(fitted, meas)
    resid = _with_per_token(fit_rel, per_token_errors(fit_rel, b1))
    lat_err, thr_err = _error_bars(_with_per_token(err, per_tok), resid, {})
    if not how:  # one anchor fits itself: it says nothing of the error elsewhere
        default = default_params(hw, engine)
        lat_err, thr_err = max(lat_err, default.lat_rel_err), max(thr_err, default.thr_rel_err)
    params = with_error_bars(params, lat_err, thr_err, _provenance(rows, engine, how, err, per_tok))
    lomo, lomo_errors = held_out_by_model(rows, frame, models, hw), {}
    if lomo is not None:
        lomo_tok = per_token_errors(lomo, b1)
        xl, xt = _error_bars(_with_per_token(lomo, lomo_tok), resid, {})
        names = rows.model.to_numpy()
        lomo_errors = {
            m: {
                g: _median_abs(lomo[names == m], cols, lomo_tok[names == m] if g == "TPOT" else None)
                for g, cols in GROUPS.items()
            }
            for m in dict.fromkeys(names)
        }
        params = replace(
            params,
            xfer_lat_rel_err=xl,
            xfer_thr_rel_err=xt,
            provenance=f"{params.provenance}; transfer error bar (a model the fit did not see): p90 of "
            f"leave-one-model-out over {len(lomo_errors)} models",
        )
    table = rows[
        [
            "source_id",
            "source",
            "gpu_published",
            "model",
            "weights",
            "kv",
            "prompt_tokens",
            "output_tokens",
            "load",
            "load_value",
            "stat",
            "origin",
        ]
    ].copy()
    table["provenance"] = "published:" + rows.source
    table["published"] = [published_metrics(r) for _, r in rows.iterrows()]
    for i, t in enumerate(TARGETS):
        table[f"{t}_measured"], table[f"{t}_fitted"], table[f"{t}_held_out"] = meas[:, i], fitted[:, i], err[:, i]
    table["per_token_held_out"] = per_tok
    for i, t in enumerate(TARGETS):
        table[f"{t}_lomo"] = lomo[:, i] if lomo is not None else np.nan
    table["per_token_lomo"] = per_token_errors(lomo, b1) if lomo is not None else np.nan
    errors = {g: _median_abs(err, cols, per_tok if g == "TPOT" else None) for g, cols in GROUPS.items()}
    tpot = np.isfinite(err[:, [TARGETS.index(c) for c in GROUPS["TPOT"]]]).any()
    basis = tuple(k for k, has in (("TPOT/ITL", tpot), (B1, np.isfinite(per_tok).any())) if has)
    return CardCalibration(hw.name, engine, params, table, how, errors, basis, lomo_errors)


def calibrate_published(table: PublishedTable, hardware: list[str] | None = None) -> list[CardCalibration]:
    """One calibration per (GPU card, engine) with published anchors (every card, or those named)."""
    cards, have = shipped_hardware(), list(dict.fromkeys(table.rows.gpu))
    unknown = sorted(set(hardware or []) - set(have))
    if unknown:
        raise ValueError(
            f"published: no published anchor on {', '.join(unknown)}; cards with anchors: {', '.join(have)}"
        )
    rows = table.rows[table.rows.gpu.isin(hardware or have)]
    # (the quantized formats' kernel costs are fitted on top of these by
    # calibrate.published_formats.calibrate_published_formats, which the stage calls)
    return [calibrate_card(g, cards[gpu]) for (gpu, _), g in rows.groupby(["gpu", "engine"], sort=False)]


def tpot_held_out_by_source(cals: list[CardCalibration], engine: str = SERVED_ENGINE) -> list[str]:
    """The cards whose TPOT on `engine` is predicted by fits that never saw its source: what
    `published` counts against its bar (a card with one source is held out by anchor, not counted).
    A card's TPOT error may be over batch-1 decode speed (its tpot_basis says so, and the report too)."""
    return [c.hardware for c in cals if c.engine == engine and c.held_out == LOSO and np.isfinite(c.errors["TPOT"])]


def for_atlas(cals: list[CardCalibration]) -> dict[str, CardCalibration]:
    """Per card, the fit the atlas falls back on where a point's engine has no fit of its own on the
    card (for_engine): the served engine's, else the engine with the most anchors."""
    out: dict[str, CardCalibration] = {}
    for c in sorted(cals, key=lambda c: (c.engine == SERVED_ENGINE, len(c.anchors))):
        out[c.hardware] = c
    return out


def rests_on(params: CalibParams, fit_engine: str, engine: str) -> CalibParams:
    """A fit's parameters as a point served by `engine` takes them: their `engine` the point's (what
    the link's per-engine latency factor follows: published_link.with_link), and the provenance saying
    the fit's engine differs from the point's where it does (the card has no fit of the point's engine)."""
    if fit_engine == engine:
        return replace(params, engine=engine)
    said = f"; engine mismatch: {engine}'s points on the card's {fit_engine} fit (the card has no {engine} fit)"
    return replace(params, engine=engine, provenance=params.provenance + said)


def for_engine(cals: list[CardCalibration], engine: str) -> dict[str, CalibParams]:
    """Per card, the fit a GPU point served by `engine` simulates with: that engine's own fit where
    the card has one (its bar is that fit's), else the card's atlas fit (for_atlas), saying so."""
    out = {g: rests_on(c.params, c.engine, engine) for g, c in for_atlas(cals).items()}
    out.update({c.hardware: rests_on(c.params, c.engine, engine) for c in cals if c.engine == engine})
    return out
