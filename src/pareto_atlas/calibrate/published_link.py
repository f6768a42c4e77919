"""Each GPU card's link between its GPUs, calibrated on the published multi-GPU rows
(spec/published_multigpu.csv) and held out, so the atlas's parallel points rest on measurements.

What is fitted is the link alone: `CalibParams.link_eff` (the achieved fraction of the card's
link_gbs in an all-reduce) and `link_latency_scale` (a factor on its per-hop latency), the two terms
simulate.parallel adds to a step of a tensor- or pipeline-parallel worker. Everything else stays the
card's one-GPU published fit (calibrate.published: the row's engine's fit where the card has one,
else the fit the atlas uses for the card, else the uncalibrated default), and each row runs as its source ran it where the source says
(calibrate.published_runs: aiconfigurator's benchmark deployment and mean reading), else under its
engine's default scheduler, as a simulated point does. So a row's error is the error of what the
atlas predicts for that deployment, its one-GPU calibration's transfer to the row's model and engine
included.

The fit is a search over a grid of the two terms (LINK_EFFS x LATENCY_SCALES), each row simulated once
per grid point: every held-out fold then re-chooses the grid point on its training rows from the same
predictions, so leaving one source out (LOSO), one model out (LOMO) or one engine out (LOEO) costs
no simulation more. Rows: the card's aggregated rows on more than one GPU per worker (tp x pp > 1),
SAMPLE per (source, engine, model, weights, parallelism) spread over their setups.

The parallel points' bar (calibrate.heldout_bar) is a quantile of every held-out figure of the three
schemes pooled, latency and throughput apart, at the level whose bar, set without one row group
(published_multigpu.bar_groups), covers that group; its split check (the bar set on half the groups,
counted on the other half) and its nested check (set without each group, counted on it) say whether
it carries to rows that did not set it.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache

import numpy as np
import pandas as pd

from pareto_atlas.calibrate.fit import TARGETS, WEIGHTS
from pareto_atlas.calibrate.heldout_bar import carried_bar
from pareto_atlas.calibrate.published import _rel, card_frame
from pareto_atlas.calibrate.published_multigpu import (
    SCHEMES,
    _pct,
    bar_groups,
    coverage,
    parallelism,
    sample_rows,
    scheme_errors,
    split_check,
)
from pareto_atlas.calibrate.published_runs import apply_runs, predict_rows
from pareto_atlas.calibrate.published_table import PublishedTable
from pareto_atlas.simulate.parallel import SWITCH_HOPS, SWITCHED
from pareto_atlas.simulate.params import CalibParams, default_params
from pareto_atlas.spec.cards import HardwareCard, shipped_hardware

# The grid searched. link_eff: the all-reduce's achieved fraction of the ring bound (2 (tp - 1) / tp of
# the bytes through each device's link at link_gbs) on the messages that carry a step's bytes: a prefill
# step's, a prompt of thousands of tokens (aiconfigurator's rules give an aggregated step prompt + 1,500
# tokens, trtllm-bench 8,192) times hidden x 2 bytes, 16 to 130 MB for the 4,096- to 8,192-wide models of
# the rows. At 32-128 MB the all-reduces the engines run reach 0.51 to 1.16 of the ring bound on H100-SXM
# and H200 at TP2-8, as aiconfigurator's collectors measured them (ai-dynamo/aiconfigurator@095f58a5,
# aic-core/src/aiconfigurator_core/systems/data/{h100_sxm,h200_sxm}/comm/: nccl/2.26.2 and 2.27.3
# nccl_perf 0.60-1.16 at 16-128 MB, vllm/0.14.0 custom_allreduce_perf 0.54-0.93 at 32-128 MB (its TP2
# two-shot kernel, which vLLM runs up to 64 MB on SM 9.0: vllm/distributed/device_communicators/
# all_reduce_utils.py CUSTOM_ALL_REDUCE_MAX_SIZES), trtllm/1.2.0rc5 0.51-0.90 at 32-128 MB). So the
# grid starts at 0.55, its lowest point inside that range: 0.4 is below every table there. (Before, from
# 0.25, the fit chose 0.40 on both cards, pulled there by rows whose misses no link explains, SGLang's
# 512-client TTFT -93 % and TensorRT-LLM's served 8B TTFT -30 to -89 %, and every parallel prefill paid a
# link at 0.4, 2 to 2.5 times NCCL's: docs/results/2026-12-02-multigpu-link.md.) Smaller messages (a
# decode step's few tokens) cost what the latency factor says: 3.4-8 us for vLLM's and TensorRT-LLM's
# one-shot kernels, 7-17 us for NCCL's (the same tables), x2 to x8 of the card's 1 us a crossing.
# latency: from free to 16x that per-hop figure (a kernel launch and a barrier a crossing are several us:
# NCCL's own figure is the wire's).
LINK_EFFS = (0.55, 0.7, 0.85, 1.0)
LATENCY_SCALES = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
SAMPLE = 2
# Each engine runs its own all-reduce within a node (vLLM's custom all-reduce, TensorRT-LLM's AllReduce
# plugin, SGLang's own or NCCL's), so a collective's launch and synchronisation, which the latency factor
# carries (a crossing of the wire itself is ~1 us), is the engine's: the link fit gives each engine its own
# factor over one link_eff per card (the wire's bandwidth is the card's).
ENGINE_LATENCY = True
# An engine none of whose rows a fit saw (the engine LOEO leaves out; in LOSO, an engine whose every row is
# the left-out document's) takes its own collective's measured latency where aiconfigurator timed it
# (spec/published_allreduce_ops.csv: the engine's all-reduce kernel at decode-sized messages, as a factor on
# the card's per-crossing latency, the nearest point of LATENCY_SCALES), not the other engines' pooled factor:
# a fitted factor carries its engine's per-layer costs beyond the collective (TensorRT-LLM's x16 on H100-SXM
# is 32 us an all-reduce against its kernel's measured 3-4 us), which another engine does not pay.
# False (the product's): the pooled factor. Off because the measured collective is a lower bound of what
# an engine's factor carries, not the factor: on it moves H100-SXM's LOSO TPOT 16 -> 14 % (vLLM's rows no
# longer take TensorRT-LLM's x16) but H200's LOMO TPOT 12 -> 24 % and LOEO 13 -> 28 % (H200's TensorRT-LLM
# 70B rows, left without a row of their engine, at x2 where their own fit is x16: -32 to -58 %);
# docs/results/2026-12-03-h100-tpot.md.
MEASURED_FALLBACK = False
# A fitted engine's factor carries its collective plus whatever else the engine pays a layer, so the engine's
# all-reduce as aiconfigurator measured it on the card (the same grid point measured_latency_scales gives) is a
# lower bound of the factor, not the factor: MEASURED_FLOOR True keeps each engine's factor, in the fit and in
# every held-out fold (an engine a fold leaves without rows included), at or above that point where the card
# has measured rows of the engine; the factor of an engine without them is chosen as before. On in the
# product (session 17): the dense link fit's held-out figures do not move on any card (H200 vLLM's own factor
# x0 -> x4, which no fold tests: its 3 rows leave together), the MoE fit's H200 TPOT by source / model / engine
# 23 / 15 / 18 -> 21 / 14 / 15 % and H100-SXM's by model 25 -> 24 %; one engine's split worse (H200 SGLang TP4,
# 3 rows, by model 20 -> 23 %); docs/results/2026-12-03-link-floor.md.
MEASURED_FLOOR = True
LABEL = {"LOSO": "source_id", "LOMO": "model", "LOEO": "engine"}
MAX_REQUESTS = 256  # requests a closed-loop row simulates, or two waves of its clients where more


@dataclass(frozen=True)
class LinkCalibration:
    hardware: str
    link_eff: float
    link_latency_scale: float
    anchors: pd.DataFrame  # per row: setup, parallelism, measured, fitted and held-out errors per scheme
    lat_bar: float  # the parallel points' bar (relative), p90 of bar_from's latency errors pooled
    thr_bar: float
    bar_from: str  # the schemes the bar rests on ("LOSO+LOMO+LOEO"), "none" where nothing is held out
    base: str  # which one-GPU fit each engine's rows ran on
    bar_check: tuple[float, float] = (float("nan"), float("nan"))  # its coverage on a split, each way
    bar_nested: float = float("nan")  # coverage of a bar set without each row group, on that group
    bar_level: tuple[float, float] = (0.9, 0.9)  # the quantile levels of the latency and throughput bars
    latency_by_engine: dict = field(default_factory=dict)  # engine -> its latency factor (ENGINE_LATENCY)
    measured_by_engine: dict = field(default_factory=dict)  # engine -> its measured factor (MEASURED_FALLBACK)
    floor_by_engine: dict = field(default_factory=dict)  # engine -> its measured all-reduce (MEASURED_FLOOR)

    def latency_for(self, engine: str) -> float:
        """The latency factor of `engine`'s collectives: its own where fitted, else its all-reduce's measured
        one (measured_latency_scales), else the card's pooled one; never below its floor (measured_floors)."""
        own = self.latency_by_engine.get(engine, self.measured_by_engine.get(engine, self.link_latency_scale))
        return float(max(own, self.floor_by_engine.get(engine, own)))

    def provenance(self) -> str:
        srcs = ", ".join(f"{s} {n}" for s, n in self.anchors.source_id.value_counts(sort=False).items())
        lv = f"p{100 * self.bar_level[0]:.0f} / p{100 * self.bar_level[1]:.0f}"
        bar = f"{lv} of {self.bar_from} pooled" if self.bar_from != "none" else "none held out: the default's"
        per = ", ".join(f"{e} x{v:g}" for e, v in self.latency_by_engine.items())
        mea = ", ".join(f"{e} x{v:g}" for e, v in self.measured_by_engine.items())
        flo = ", ".join(f"{e} x{v:g}" for e, v in self.floor_by_engine.items())
        return (
            f"link fitted on {len(self.anchors)} published multi-GPU rows ({srcs}; "
            f"{self.anchors.model.nunique()} model{'s' if self.anchors.model.nunique() > 1 else ''}): link_eff {self.link_eff:.2f}, latency x{self.link_latency_scale:g}"
            f"{f' (per engine: {per})' if per else ''}"
            f"{f'; an engine without rows: its all-reduce as measured ({mea}: aiconfigurator)' if mea else ''}"
            f"{f'; floored at its all-reduce as measured ({flo}: aiconfigurator)' if flo else ''}; "
            f"parallel error bar: {bar} (latency ±{self.lat_bar:.0%}, throughput ±{self.thr_bar:.0%}); "
            f"per-GPU costs: {self.base}"
        )


def link_rows(table: PublishedTable, card: str, k: int = SAMPLE) -> pd.DataFrame:
    """The card's aggregated rows on several GPUs per worker, sampled (sample_rows)."""
    r = table.rows
    tp, pp = r.tp.astype(int), r.pp.astype(int)
    rows = r[(r.gpu == card) & (r.prefill_workers.astype(int) == 0) & (tp * pp > 1)]
    return sample_rows(rows, k) if len(rows) else rows.reset_index(drop=True)


def _base_params(
    card: str, engines: list[str], one_gpu: dict[tuple[str, str], CalibParams], atlas: dict[str, CalibParams]
) -> tuple[dict[str, CalibParams], str]:
    hw, out, said = shipped_hardware()[card], {}, []
    for e in engines:
        if (card, e) in one_gpu:
            out[e], how = one_gpu[(card, e)], f"{e}'s one-GPU published fit"
        elif card in atlas:
            out[e], how = atlas[card], f"the atlas's one-GPU fit ({atlas[card].engine}) for {e}"
        else:
            out[e], how = default_params(hw, e), f"uncalibrated default for {e}"
        out[e] = replace(out[e], engine=e)  # the rows' engine (its operator laws: simulate.gemm_floor)
        said.append(how)
    return out, "; ".join(said)


def measured_latency_scales(hw: HardwareCard) -> dict[str, int]:
    """Per engine with measured all-reduce rows on the card (spec/published_allreduce_ops.csv), the index in
    LATENCY_SCALES nearest (in ratio) to the median over its rows of the measured latency over the card's
    per-crossing latency times the crossings simulate.parallel.allreduce_s counts; {} where MEASURED_FALLBACK
    is off."""
    return _measured_indices(hw) if MEASURED_FALLBACK else {}


def measured_floors(hw: HardwareCard) -> dict[str, int]:
    """Per engine with measured all-reduce rows on the card, the least index in LATENCY_SCALES its factor may
    take (the same point as measured_latency_scales'); {} where MEASURED_FLOOR is off."""
    return _measured_indices(hw) if MEASURED_FLOOR else {}


def _measured_indices(hw: HardwareCard) -> dict[str, int]:
    if hw.link_latency_us <= 0:
        return {}
    df = allreduce_table()
    df = df[df.gpu == hw.name]
    out = {}
    grid = np.array(LATENCY_SCALES, float)
    for e, g in df.groupby("engine", sort=True):
        tp = g.num_gpus.to_numpy(float)
        hops = np.full_like(tp, SWITCH_HOPS) if hw.link in SWITCHED else 2.0 * (tp - 1.0)
        scale = float(np.median(g.latency.to_numpy(float) * 1e-3 / (hops * hw.link_latency_us * 1e-6)))
        pos = np.flatnonzero(grid > 0)
        out[str(e)] = int(pos[np.argmin(np.abs(np.log(grid[pos] / scale)))])
    return out


@lru_cache(maxsize=1)
def allreduce_table() -> pd.DataFrame:
    """The shipped all-reduce operator rows (spec/published_allreduce_ops.csv)."""
    from importlib import resources

    from pareto_atlas.calibrate.published_readers.aiconfigurator_allreduce_ops import SHIPPED

    with resources.files("pareto_atlas.spec").joinpath(SHIPPED).open() as f:
        df = pd.read_csv(f, dtype={"version": str})
    missing = [c for c in ("gpu", "engine", "num_gpus", "message_size", "latency", "source") if c not in df.columns]
    if missing:
        raise ValueError(f"spec/{SHIPPED}: no column {missing[0]!r}")
    return df


def _choose(
    err: np.ndarray, eng: np.ndarray, train: np.ndarray, per_engine: bool, floor: dict[str, int] | None = None
) -> tuple[int, int, dict[str, int]]:
    """(link_eff index, pooled latency index, per-engine latency indices) of least loss on the `train`
    rows; err is (link_effs x LATENCY_SCALES grid, rows, targets), eff-major. One link_eff for the card;
    per_engine: each engine with training rows its own latency factor (an engine's factor moves only
    its own rows, so it is chosen on them alone, and the link_eff minimises the sum), at or above its
    index in `floor` where it has one (measured_floors); an engine without training rows (the one LOEO
    leaves out) takes the pooled factor, chosen on all training rows."""
    n_s = len(LATENCY_SCALES)
    n_e = err.shape[0] // n_s
    pooled_loss = _loss(err[:, train]).reshape(n_e, n_s)
    if not per_engine:
        g = int(np.argmin(pooled_loss))
        return g // n_s, g % n_s, {}
    total, picks = np.zeros(n_e), {}
    for e in dict.fromkeys(eng[train]):
        per = _loss(err[:, train & (eng == e)]).reshape(n_e, n_s)
        per[:, : (floor or {}).get(e, 0)] = np.inf
        picks[e] = per.argmin(axis=1)
        total += per.min(axis=1)
    i = int(np.argmin(total))
    return i, int(np.argmin(pooled_loss[i])), {e: int(v[i]) for e, v in picks.items()}


def _held_choice(
    err: np.ndarray,
    eng: np.ndarray,
    train: np.ndarray,
    per_engine: bool,
    measured: dict[str, int],
    floor: dict[str, int] | None = None,
) -> tuple[int, int, dict[str, int]]:
    """_choose on the `train` rows, and each engine with no training row taking its measured latency index
    where `measured` has one (measured_latency_scales), else the pooled one; either at or above its index in
    `floor` where it has one (measured_floors)."""
    floor = floor or {}
    i, pooled, picks = _choose(err, eng, train, per_engine, floor)
    unseen = {e: measured.get(e, pooled) for e in set(eng[~train]) - set(eng[train]) if e in measured or e in floor}
    unseen = {e: max(v, floor.get(e, v)) for e, v in unseen.items()}
    return i, pooled, {**picks, **unseen}


def _errors_at(err: np.ndarray, eng: np.ndarray, i: int, pooled: int, scales: dict[str, int]) -> np.ndarray:
    """Each row's errors at link_eff index i and its engine's latency factor (the pooled one where its
    engine has none)."""
    n_s = len(LATENCY_SCALES)
    out = np.empty(err.shape[1:])
    for e in dict.fromkeys(eng):
        on = eng == e
        out[on] = err[i * n_s + scales.get(e, pooled), on]
    return out


def _loss(err: np.ndarray) -> np.ndarray:
    """Per grid point, the weighted sum of squared log ratios over rows (NaN targets skipped): err is
    (grid, rows, targets) of predicted / measured - 1."""
    w = np.array([WEIGHTS[t] for t in TARGETS])
    lr = np.log1p(np.clip(err, -0.999, None))
    return np.nansum(w * lr**2, axis=(1, 2))


def calibrate_link(
    table: PublishedTable,
    card: str,
    one_gpu: dict[tuple[str, str], CalibParams],
    atlas: dict[str, CalibParams],
    k: int = SAMPLE,
    as_run: bool = True,
    per_engine: bool | None = None,
    effs: tuple[float, ...] = LINK_EFFS,
) -> LinkCalibration | None:
    """The card's link fitted on its multi-GPU rows, with LOSO/LOMO/LOEO errors per row; None where
    the card has no such row. as_run: each closed-loop row simulated as its source ran and read it
    (calibrate.published_runs: aiconfigurator's benchmark deployment and its mean over a fresh loop);
    False: every row under its engine's default scheduler, read as medians (before 2026-12-02's third pass).
    per_engine: each engine its own latency factor (default: ENGINE_LATENCY where as_run). effs: the
    link_eff grid (LINK_EFFS; bench_multigpu_bar compares a wider one)."""
    per_engine = (as_run and ENGINE_LATENCY) if per_engine is None else per_engine
    rows = link_rows(table, card, k)
    if rows.empty:
        return None
    hw = shipped_hardware()[card]
    frame, models = card_frame(rows, hw)
    # a closed loop's sample: two waves of its clients, at least MAX_REQUESTS (the grid runs each row 42 times)
    conc = frame["concurrency"].astype(int)
    frame["n_requests"] = np.where(
        conc > 0,
        np.minimum(frame["n_requests"].astype(int), np.maximum(MAX_REQUESTS, 2 * conc)),
        frame["n_requests"].astype(int),
    )
    frame, runs = apply_runs(frame, rows) if as_run else (frame, [None] * len(rows))
    engines = list(dict.fromkeys(rows.engine))
    base, said = _base_params(card, engines, one_gpu, atlas)
    meas = frame[list(TARGETS)].to_numpy(float)
    grid = [(e, s) for e in effs for s in LATENCY_SCALES]
    err = np.full((len(grid), len(rows)) + meas.shape[1:], np.nan)
    eng = rows.engine.to_numpy()
    for g, (eff, scale) in enumerate(grid):
        for e in engines:
            on = eng == e
            p = replace(base[e], link_eff=eff, link_latency_scale=scale)
            pick = np.flatnonzero(on)
            pred = predict_rows(frame.iloc[pick], [models[i] for i in pick], hw, p, [runs[i] for i in pick])
            err[g, on] = _rel(pred, meas[on])
    every = np.ones(len(rows), bool)
    floor = measured_floors(hw) if per_engine else {}
    best, pooled, scales = _choose(err, eng, every, per_engine, floor)
    fitted = _errors_at(err, eng, best, pooled, scales)
    held = {}
    measured = measured_latency_scales(hw) if per_engine else {}
    for sc in SCHEMES:
        labels = rows[LABEL[sc]].to_numpy()
        h = np.full(meas.shape, np.nan)
        if len(set(labels)) >= 2:
            for lab in dict.fromkeys(labels):
                test = labels == lab
                h[test] = _errors_at(err, eng, *_held_choice(err, eng, ~test, per_engine, measured, floor))[test]
        held[sc] = h
    bar = carried_bar(held, TARGETS, bar_groups(rows))
    bar_from = "+".join(sc for sc in SCHEMES if np.isfinite(held[sc]).any()) or "none"
    anchors = rows[
        [
            "source_id",
            "engine",
            "model",
            "weights",
            "prompt_tokens",
            "output_tokens",
            "load",
            "load_value",
            "stat",
            "tp",
            "pp",
            "replicas",
            "prefill_workers",
            "prefill_tp",
            "decode_workers",
            "n_gpus",
        ]
    ].copy()
    for i, t in enumerate(TARGETS):
        anchors[f"{t}_measured"] = meas[:, i]
        anchors[f"{t}_fitted"] = fitted[:, i]
        for sc in SCHEMES:
            anchors[f"{t}_{sc}"] = held[sc][:, i]
    eff = effs[best]
    return LinkCalibration(
        card,
        eff,
        LATENCY_SCALES[pooled],
        anchors,
        bar.lat,
        bar.thr,
        bar_from,
        said,
        bar.split_coverage,
        bar.nested_coverage,
        bar.level,
        {e: LATENCY_SCALES[v] for e, v in scales.items()},
        {e: LATENCY_SCALES[v] for e, v in measured.items()},
        {e: LATENCY_SCALES[v] for e, v in floor.items()},
    )


def with_link(params: CalibParams, cal: LinkCalibration) -> CalibParams:
    """The card's calibration with its fitted link, and the parallel points' bar and provenance."""
    return replace(
        params,
        link_eff=cal.link_eff,
        link_latency_scale=cal.latency_for(params.engine),
        par_lat_rel_err=max(cal.lat_bar, params.lat_rel_err),
        par_thr_rel_err=max(cal.thr_bar, params.thr_rel_err),
        link_provenance=cal.provenance(),
    )


def report_lines(cals: list[LinkCalibration]) -> list[str]:
    """Per card: the fitted link, its bar and coverage; per parallelism, the median |held-out error| of
    TTFT / TPOT / throughput under each scheme."""
    out = [
        "multi-GPU link fit per card (what `simulate` uses for parallel points), held-out median |error| "
        "TTFT / TPOT / throughput: LOSO leaves a document out, LOMO a model, LOEO an engine"
    ]
    for c in cals:
        cov, n = coverage(c, SCHEMES)
        out.append(
            f"  {c.hardware}: {c.provenance()}; inside the bar: {_pct(cov)} of {n} held-out figures; "
            f"{split_check(c.bar_check, c.bar_nested)}"
        )
        for sc in SCHEMES:
            out.append(f"    {sc}: all {len(c.anchors)} rows  {scheme_errors(c.anchors, sc)}")
        par = c.anchors.apply(parallelism, axis=1)
        for p, g in c.anchors.groupby(par, sort=False):
            cells = "  ".join(f"{sc} {scheme_errors(g, sc)}" for sc in SCHEMES)
            out.append(f"      {p:<10} {len(g):>3} rows  {cells}")
    return out


def _encode(c: LinkCalibration) -> dict:
    d = asdict(c)
    d["anchors"] = c.anchors.to_dict(orient="split")
    return d


def _decode(d: dict) -> LinkCalibration:
    a = d["anchors"]
    anchors = pd.DataFrame(a["data"], columns=a["columns"], index=a["index"])
    return LinkCalibration(
        **{
            **d,
            "anchors": anchors,
            "bar_check": tuple(d.get("bar_check", (np.nan, np.nan))),
            "bar_level": tuple(d.get("bar_level", (0.9, 0.9))),
            "measured_by_engine": d.get("measured_by_engine", {}),
            "floor_by_engine": d.get("floor_by_engine", {}),
        }
    )


def _key(
    table: PublishedTable, one_gpu_key: str, card: str, as_run: bool = True, effs: tuple[float, ...] = LINK_EFFS
) -> str:
    from pareto_atlas.calibrate import published_cache

    grid = f"{effs}{LATENCY_SCALES}{SAMPLE}{MAX_REQUESTS}{ENGINE_LATENCY}" + ("" if as_run else "|engine-defaults")
    if MEASURED_FALLBACK:
        grid += "|measured:" + hashlib.sha256(allreduce_table().to_csv(index=False).encode()).hexdigest()[:12]
    if MEASURED_FLOOR:
        grid += "|floor:" + hashlib.sha256(allreduce_table().to_csv(index=False).encode()).hexdigest()[:12]
    return (
        "link-"
        + hashlib.sha256(
            f"{table.sha256}|{one_gpu_key}|{published_cache.code_hash()}|{card}|{grid}".encode()
        ).hexdigest()[:20]
    )


def link_calibrations(
    cards: list[str],
    table: PublishedTable | None = None,
    one_gpu: list | None = None,
    as_run: bool = True,
    effs: tuple[float, ...] = LINK_EFFS,
) -> dict[str, LinkCalibration]:
    """Per card of `cards` with multi-GPU rows in the shipped table (or `table`), its link fit, from
    the fit cache when table, one-GPU fits and code are unchanged (minutes otherwise, once). The
    per-GPU costs are the shipped one-GPU table's fits (`one_gpu`: those already made, else cached or
    fitted here). as_run, effs: calibrate_link's (as_run False: every row under its engine's default
    scheduler; effs: the link_eff grid)."""
    from pareto_atlas.calibrate import published_cache
    from pareto_atlas.calibrate.published import for_atlas
    from pareto_atlas.calibrate.published_cache import fit_key
    from pareto_atlas.calibrate.published_table import load_multigpu, load_published

    table = table or load_multigpu()
    shipped, out = load_published(), {}
    for card in [c for c in cards if c in set(table.rows.gpu)]:
        path = published_cache.cache_dir() / f"{_key(table, fit_key(shipped), card, as_run, effs)}.json"
        try:
            out[card] = _decode(json.loads(path.read_text()))
            continue
        except (OSError, ValueError, KeyError, TypeError):
            pass
        one = [c for c in one_gpu or [] if c.hardware == card]
        if not one and card in set(shipped.rows.gpu):
            one = published_cache.fitted(shipped, [card])
        cal = calibrate_link(
            table,
            card,
            {(c.hardware, c.engine): c.params for c in one},
            {g: c.params for g, c in for_atlas(one).items()},
            as_run=as_run,
            effs=effs,
        )
        if cal is None:
            continue
        out[card] = cal
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(_encode(cal), default=lambda v: v.item()))
            os.replace(tmp, path)
        except OSError:
            pass
    return out
