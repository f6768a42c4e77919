"""Each GPU card's mixture-of-experts cost, calibrated on the published MoE rows
(spec/published_moe.csv) and held out, so the atlas's MoE points rest on measurements.

What is fitted is what the MoE cost adds to the dense one (simulate.moe, cost_model._moe_terms):
- the routing skew s, the exponent on the batch in the experts a step touches,
  E (1 - (1 - k/E)^(B^s)), over SKEWS inside its prior interval (moe.ROUTING_SKEW_INTERVAL);
- a step's fixed cost per MoE layer (LAYER_S: router, top-k, permutation, grouped-GEMM launches);
- the expert GEMMs' efficiency against the dense GEMMs' (FLOPS_EFFS).
The three are chosen together on a grid (GRID) over every card's rows: they are the MoE kernels' and
the routers' (a launch and a sync cost the same few us on H100 and B200, and the skew is the
models'), while each card's rows run on that card's dense costs: its engine's one-GPU published fit
(else the atlas's fit for the card, else the uncalibrated default, as calibrate.published_link
chooses) with the card's link fitted on the dense multi-GPU rows (published_link.with_link). Each row
runs under its engine's default scheduler with its own expert layout (tp, attention-DP, EP), as a
simulated point does; so a row's error is the error of what the atlas predicts for that deployment.
Chosen per card or per engine instead, the terms of a card with two models were one model's and
carried worse to the other (docs/results/2026-12-02-published-moe.md: 32 % against 23 % pooled).

Each row is simulated once per grid point; every held-out fold re-chooses the grid point on its
training rows from the same predictions: leave one source out (LOSO), one model out (LOMO: a model
card, so DeepSeek-R1 and -V3, one architecture, leave together; its rows on every card), one engine
out (LOEO). Rows: SAMPLE per (card, engine, model, weights, layout, load) spread over their setups.

An MoE point's bar is a quantile of its card's held-out errors pooled over every scheme that has any
(LOSO, LOMO, LOEO; calibrate.heldout_bar.carried_bar, as the dense multi-GPU bars), latency and
throughput apart: the p90 or a higher level, the one whose bar set without a (source, model) group
covers 95 % of that group's figures, so it covers at least 90 % of those figures by construction; how
it carries is checked on a split: set on half of the groups, its coverage counted on the other half.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd

from pareto_atlas.calibrate.heldout_bar import carried_bar
from pareto_atlas.calibrate.fit import TARGETS
from pareto_atlas.calibrate.published_runs import Run, apply_runs, predict_rows
from pareto_atlas.calibrate.published import SERVED_ENGINE, _policy, _rel, host_overlaps
from pareto_atlas.calibrate.published_link import LABEL, MAX_REQUESTS
from pareto_atlas.calibrate.published_moe_table import MOE_PARALLEL, moe_anchor_row
from pareto_atlas.calibrate.published_multigpu import SCHEMES, _pct, coverage, sample_rows, scheme_errors, split_check
from pareto_atlas.calibrate.published_table import PARALLEL, UNSTATED_KV, PublishedTable, parallel_knobs
from pareto_atlas.simulate.memory import plan_memory
from pareto_atlas.simulate.params import CalibParams, default_params
from pareto_atlas.spec.cards import HardwareCard, ModelCard, shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs

# The skews searched: the prior interval [0.75, 1] (simulate.moe) in steps of 0.05. The MoE layer's
# fixed cost per step: none to 200 us (an MoE layer launches ~5-10 kernels at a few us each, and a
# grouped GEMM over few tokens an expert idles most of its tiles). The expert GEMMs at the dense rate
# or half of it, no lower: TensorRT-LLM's offline Mixtral 8x7B throughput (compute-bound batches of
# hundreds) is met at the dense rate (-3 to -32 %) and held out at 0.15 of it is 43-78 % low, so the
# 0.15 that served TPOT rows alone chose once (docs/results/2026-12-02-published-moe.md) was not the
# expert GEMMs' speed but something else those rows lack (long prompts' prefill between decode
# steps, the memory plan's batch); cut to [0.5, 1], held-out throughput fell from 54 % to 18 % and
# held-out TPOT stayed at 28 % (docs/results/2026-12-02-published-moe.md, its second run).
SKEWS = (0.75, 0.8, 0.85, 0.9, 0.95, 1.0)
LAYER_S = (0.0, 25e-6, 50e-6, 100e-6, 200e-6)
FLOPS_EFFS = (1.0, 0.5)
GRID = tuple((s, l, f) for s in SKEWS for l in LAYER_S for f in FLOPS_EFFS)
# What the grid point is chosen on: the decode step (TPOT) and throughput, not TTFT. A published TTFT
# under a closed loop of tens to hundreds of clients is mostly queueing behind other prompts, set by
# the engine's admission and its KV capacity (the dense fit's scheduler and memory plan: several rows
# here are predicted 3-20x their TTFT where the plan leaves a few GB of KV), which the MoE terms do not
# touch; fitted on it, one such row chose the terms for all. TTFT is still predicted and held out.
FIT_WEIGHTS = {"ttft_p50_ms": 0.0, "ttft_p99_ms": 0.0, "tpot_p50_ms": 1.0, "tpot_p99_ms": 0.4, "throughput_tok_s": 1.0}
SAMPLE = 3
KEEP = [
    "source_id",
    "engine",
    "model",
    "model_published",
    "weights",
    "prompt_tokens",
    "output_tokens",
    "load",
    "load_value",
    "stat",
    *PARALLEL,
    *MOE_PARALLEL,
]


@dataclass(frozen=True)
class MoeCalibration:
    hardware: str
    terms: tuple  # (routing skew, per-MoE-layer step cost s, expert GEMM efficiency), fitted on every card's rows
    anchors: pd.DataFrame  # per row: setup, layout, measured, fitted and held-out errors per scheme
    lat_bar: float  # an MoE point's bar (relative): a quantile (p90 or above) of bar_from's latency errors pooled
    thr_bar: float
    bar_from: str  # the schemes the bar rests on ("LOSO+LOMO+LOEO"), "none" where nothing is held out
    base: str  # which dense fit each engine's rows ran on
    # coverage of the bar set on half of the card's (source, model) groups, on the other half's figures
    split_coverage: tuple = (float("nan"), float("nan"))

    def provenance(self) -> str:
        a = self.anchors
        srcs = ", ".join(f"{s} {n}" for s, n in a.source_id.value_counts(sort=False).items())
        bar = (
            f"a quantile of {self.bar_from} pooled (p90 or above, its level set by leaving one group out)"
            if self.bar_from != "none"
            else "none held out: the default's"
        )
        sk, ls, fe = self.terms
        return (
            f"MoE terms (skew {sk:g}, {1e6 * ls:g} us/MoE layer, expert GEMMs x{fe:g}; fitted on every card's "
            f"rows) held out on {len(a)} published MoE rows of {self.hardware} ({srcs}; "
            f"{', '.join(dict.fromkeys(a.model))}); MoE error bar: {bar} (latency ±{self.lat_bar:.0%}, "
            f"throughput ±{self.thr_bar:.0%}); dense costs: {self.base}"
        )


def moe_rows(table: PublishedTable, card: str, k: int = SAMPLE) -> pd.DataFrame:
    """The card's MoE rows, sampled per engine and expert layout (sample_rows within each)."""
    r = table.rows[table.rows.gpu == card]
    if r.empty:
        return r.reset_index(drop=True)
    parts = [sample_rows(g, k) for _, g in r.groupby(["engine", *MOE_PARALLEL], sort=True)]
    return pd.concat(parts, ignore_index=True)


def moe_frame(rows: pd.DataFrame, hw: HardwareCard) -> tuple[pd.DataFrame, list[ModelCard]]:
    """The fit's anchor rows for the card's MoE rows (their expert layout in the knobs), each with
    its model card; a closed loop simulates at least MAX_REQUESTS requests, or two waves of clients."""
    cards, start = shipped_models(), default_params(hw, SERVED_ENGINE)
    models = [cards[m] for m in rows.model]
    out = []
    for (_, r), m in zip(rows.iterrows(), models):
        knobs = Knobs(
            weights=r["weights"],
            kv="f16" if r["kv"] == UNSTATED_KV else r["kv"],
            **parallel_knobs(r),
            **{f: int(r[f]) for f in MOE_PARALLEL},
        )
        seqs = max(1, plan_memory(m, hw, knobs, int(r["prompt_tokens"]), int(r["output_tokens"]), start).max_seqs)
        out.append(moe_anchor_row(r, seqs, _policy(r, hw)))
    frame = pd.DataFrame(out)
    frame["weights"] = frame["weights"].replace({"F16": "BF16"})
    frame = frame.reindex(columns=list(frame.columns) + [t for t in TARGETS if t not in frame])
    frame["host_overlap"] = host_overlaps(rows)  # the row's engine release (calibrate.published)
    conc = frame["concurrency"].astype(int)
    frame["n_requests"] = np.where(
        conc > 0,
        np.minimum(frame["n_requests"].astype(int), np.maximum(MAX_REQUESTS, 2 * conc)),
        frame["n_requests"].astype(int),
    )
    return frame, models


# aiconfigurator's deployment generator renders a vLLM worker's flags from a versioned template: today
# the closest release at or below the row's (src/aiconfigurator/generator/rendering/engine.py
# _select_versioned_template @095f58a5), until 2026-02-11 the exact release's, else the default
# cli_args.j2 (engine.py @95ddf241a). None a vLLM 0.10 or 0.11 row could have been rendered from passes
# --max-num-batched-tokens: backend_templates/vllm/cli_args.0.10.2.j2 and cli_args.0.11.0.j2 never did
# (95ddf241a, 2025-12-04, to 095f58a5), cli_args.j2 not before 2cecd6596 (2026-01-08); they pass
# --max-num-seqs. So a row served by a vLLM older than VLLM_BUDGET_FLAG (H100-SXM's gpt-oss-120b rows on
# vLLM 0.11.2, measured 2025-12-05/08) ran vLLM's own default token budget a step (simulate.schedulers:
# 8,192 on a card of >= 70 GiB), not the rules' batch + prompt + 1,500; its sequence limit stays the
# rules' (the row's clients, its batch_size too). vLLM 0.12 rows keep the rules' budget: its template
# passes the flag since 2063ee024 (2026-02-11), not at its first commit c46a56b02 (2026-01-23).
VLLM_BUDGET_FLAG = (0, 12)


def vllm_default_budget(
    frame: pd.DataFrame, rows: pd.DataFrame, runs: list[Run | None], hw: HardwareCard
) -> tuple[pd.DataFrame, list[Run | None]]:
    """apply_runs' frame and runs with each run vLLM row of a release before VLLM_BUDGET_FLAG on vLLM's
    default token budget (its deployment template passes none: see VLLM_BUDGET_FLAG)."""
    from pareto_atlas.simulate.schedulers import default_policy, release

    out, runs = frame.copy(), list(runs)
    for i, (run, (_, r)) in enumerate(zip(runs, rows.iterrows())):
        v = release(r["engine_version"])
        if run is None or r["engine"] != "vllm" or v is None or v >= VLLM_BUDGET_FLAG:
            continue
        budget = default_policy("vllm", hw)[1]
        runs[i] = replace(run, chunk_tokens=budget)
        out.loc[i, "chunk_tokens"] = budget
    return out, runs


def predictions(
    frame: pd.DataFrame,
    models: list[ModelCard],
    hw: HardwareCard,
    base: dict[str, CalibParams],
    engines: np.ndarray,
    runs: list[Run | None] | None = None,
) -> np.ndarray:
    """Relative error (predicted / published - 1) per grid point, row and target: (GRID, rows, TARGETS).
    runs: each row's deployment as its source ran it (calibrate.published_runs; None: the engine's
    default scheduler and the median reading, as every row without runs)."""
    runs = [None] * len(frame) if runs is None else runs
    return np.stack([grid_point_errors(g, frame, models, hw, base, engines, runs) for g in range(len(GRID))])


def grid_point_errors(
    g: int,
    frame: pd.DataFrame,
    models: list[ModelCard],
    hw: HardwareCard,
    base: dict[str, CalibParams],
    engines: np.ndarray,
    runs: list[Run | None],
) -> np.ndarray:
    """Relative error per row and target at GRID[g], each engine's rows on its own base fit."""
    s, layer, eff = GRID[g]
    meas = frame[list(TARGETS)].to_numpy(float)
    err = np.full(meas.shape, np.nan)
    for e, p in base.items():
        on = engines == e
        if on.any():
            ps = replace(p, engine=e, routing_skew=s, moe_layer_s=layer, moe_flops_eff=eff)  # e: its rows' engine
            ms = [m for m, t in zip(models, on) if t]
            pred = predict_rows(frame[on].reset_index(drop=True), ms, hw, ps, [r for r, t in zip(runs, on) if t])
            err[on] = _rel(pred, meas[on])
    return err


def _loss(err: np.ndarray) -> np.ndarray:
    """Per grid point, the FIT_WEIGHTS-weighted sum of squared log ratios over rows (NaN skipped):
    err is (grid, rows, targets) of predicted / measured - 1."""
    w = np.array([FIT_WEIGHTS[t] for t in TARGETS])
    lr = np.log1p(np.clip(err, -0.999, None))
    return np.nansum(w * lr**2, axis=(1, 2))


def held_out(err: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Each row's error under the grid point chosen on the rows of other labels (NaN: one label only)."""
    h = np.full(err.shape[1:], np.nan)
    if len(set(labels)) >= 2:
        for lab in dict.fromkeys(labels):
            test = labels == lab
            h[test] = err[int(np.argmin(_loss(err[:, ~test]))), test]
    return h


def calibrate_moe(
    table: PublishedTable, bases: dict[str, dict[str, CalibParams]], said: dict[str, str], k: int = SAMPLE
) -> dict[str, MoeCalibration]:
    """The MoE terms fitted on the MoE rows of every card in `bases` (per card, per engine the dense
    calibration its rows run on), with LOSO/LOMO/LOEO errors per row; per card with rows, its rows,
    errors and bar."""
    parts = []
    for card, base in bases.items():
        rows = moe_rows(table, card, k)
        if rows.empty:
            continue
        missing = sorted(set(rows.engine) - set(base))
        if missing:
            raise ValueError(f"calibrate_moe: no dense calibration for engine {', '.join(missing)} on {card}")
        hw = shipped_hardware()[card]
        frame, models = moe_frame(rows, hw)
        # each closed-loop row under the deployment its benchmark wrote, read as it read it (the link fit's)
        frame, runs = apply_runs(frame, rows.reset_index(drop=True))
        frame, runs = vllm_default_budget(frame, rows.reset_index(drop=True), runs, hw)
        engines = rows.engine.to_numpy()
        parts.append((card, rows, frame[list(TARGETS)], predictions(frame, models, hw, base, engines, runs)))
    if not parts:
        return {}
    rows = pd.concat([r for _, r, _, _ in parts], ignore_index=True)
    meas = pd.concat([m for _, _, m, _ in parts], ignore_index=True)
    err = np.concatenate([e for *_, e in parts], axis=1)
    best = int(np.argmin(_loss(err)))
    held = {sc: held_out(err, rows[LABEL[sc]].to_numpy()) for sc in SCHEMES}
    out = {}
    for card, *_ in parts:
        on = (rows.gpu == card).to_numpy()
        bar_from = "+".join(sc for sc in SCHEMES if np.isfinite(held[sc][on]).any()) or "none"
        bar = carried_bar(
            {sc: h[on] for sc, h in held.items()}, TARGETS, (rows.source_id + " " + rows.model)[on].to_numpy()
        )
        anchors = rows.loc[on, KEEP].reset_index(drop=True)
        for i, t in enumerate(TARGETS):
            anchors[f"{t}_measured"] = meas.loc[on, t].to_numpy(float)
            anchors[f"{t}_fitted"] = err[best, on, i]
            for sc in SCHEMES:
                anchors[f"{t}_{sc}"] = held[sc][on, i]
        out[card] = MoeCalibration(
            card, GRID[best], anchors, bar.lat, bar.thr, bar_from, said[card], bar.split_coverage
        )
    return out


def with_moe(params: CalibParams, cal: MoeCalibration) -> CalibParams:
    """The card's calibration with the fitted MoE terms, and its MoE points' bar and provenance."""
    skew, layer_s, flops_eff = cal.terms
    return replace(
        params,
        routing_skew=skew,
        moe_layer_s=layer_s,
        moe_flops_eff=flops_eff,
        moe_lat_rel_err=max(cal.lat_bar, params.lat_rel_err),
        moe_thr_rel_err=max(cal.thr_bar, params.thr_rel_err),
        moe_provenance=cal.provenance(),
    )


def layout(r: pd.Series) -> str:
    """ "TP8", "TP4 EP4", "ADP8 EP8" (attention-DP groups of TP1), "TP4 EP2"."""
    s = f"TP{r.tp}" if int(r.attn_dp) == 1 else (f"ADP{r.attn_dp}" if int(r.tp) == 1 else f"TP{r.tp} ADP{r.attn_dp}")
    return s + (f" EP{r.ep}" if int(r.ep) > 1 else "")


def report_lines(cals: list[MoeCalibration]) -> list[str]:
    """Per card: the fitted skew, its bar and coverage; per scheme, per model held out and per
    (engine, layout), the median |held-out error| of TTFT / TPOT / throughput."""
    out = [
        "MoE fit per card (routing skew; what `simulate` uses for MoE points), held-out median |error| "
        "TTFT / TPOT / throughput: LOSO leaves a document out, LOMO a model, LOEO an engine"
    ]
    if len(cals) > 1:
        a = pd.concat([c.anchors for c in cals], ignore_index=True)
        held = "  ".join(f"{sc} {scheme_errors(a, sc)}" for sc in SCHEMES)
        inside = [coverage(c, SCHEMES) for c in cals]
        n = sum(k for _, k in inside)
        cov = sum(v * k for v, k in inside if k) / n if n else np.nan
        out.append(
            f"  every card: {len(a)} rows of {a.model.nunique()} models; {held}; inside each card's bar: "
            f"{_pct(cov)} of {n} held-out figures"
        )
    for c in cals:
        a = c.anchors
        cov, n = coverage(c, SCHEMES)
        out.append(
            f"  {c.hardware}: {c.provenance()}; inside the bar: {_pct(cov)} of {n} held-out figures; "
            f"{split_check(c.split_coverage)}"
        )
        for sc in SCHEMES:
            out.append(f"    {sc}: all {len(a)} rows  {scheme_errors(a, sc)}")
        for m, g in a.groupby("model", sort=False):
            out.append(f"    LOMO {m:<16} {len(g):>3} rows  {scheme_errors(g, 'LOMO')}")
        for (e, lay), g in a.groupby([a.engine, a.apply(layout, axis=1)], sort=False):
            cells = "  ".join(f"{sc} {scheme_errors(g, sc)}" for sc in SCHEMES)
            out.append(f"      {e:<7}{lay:<10} {len(g):>3} rows  fitted {scheme_errors(g, 'fitted')}  {cells}")
    return out


def _encode(c: MoeCalibration) -> dict:
    d = asdict(c)
    d["anchors"] = c.anchors.to_dict(orient="split")
    return d


def _decode(d: dict) -> MoeCalibration:
    a = d["anchors"]
    return MoeCalibration(
        **{
            **d,
            "terms": tuple(d["terms"]),
            "split_coverage": tuple(d["split_coverage"]),
            "anchors": pd.DataFrame(a["data"], columns=a["columns"], index=a["index"]),
        }
    )


def _key(table: PublishedTable, dense_key: str) -> str:
    from pareto_atlas.calibrate import published_cache

    what = f"{table.sha256}|{dense_key}|{published_cache.code_hash()}|{GRID}|{SAMPLE}|{FIT_WEIGHTS}"
    return "moe-" + hashlib.sha256(what.encode()).hexdigest()[:20]


def dense_bases(
    table: PublishedTable, cards: list[str], ones: dict[str, list], links: dict, own: dict[str, str] | None = None
) -> tuple[dict[str, dict[str, CalibParams]], dict[str, str]]:
    """Per card, the dense calibration each engine's MoE rows run on (its one-GPU fits `ones`, with the
    card's link fit `links[card]` where there is one) and what it rests on, for calibrate_moe; `own`:
    per card whose one-GPU fits rest on rows outside the one-GPU table, which (dense_fits)."""
    from pareto_atlas.calibrate.published import for_atlas
    from pareto_atlas.calibrate.published_link import _base_params, with_link

    bases, said = {}, {}
    for card in cards:
        one = ones[card]
        engines = list(dict.fromkeys(table.rows[table.rows.gpu == card].engine))
        bases[card], said[card] = _base_params(
            card,
            engines,
            {(c.hardware, c.engine): c.params for c in one},
            {g: c.params for g, c in for_atlas(one).items()},
        )
        if card in (own or {}):
            said[card] += f" (fitted on {own[card]})"
        if card in links:
            # each engine's rows on that engine's all-reduce latency: _base_params names each base's engine
            # (a one-GPU published fit's params name the served engine, vllm, whatever rows fitted it; read
            # so, H200's TensorRT-LLM and SGLang MoE rows ran vLLM's free all-reduce, x0 for their x16:
            # docs/results/2026-12-03-moe-h200.md)
            bases[card] = {e: with_link(p, links[card]) for e, p in bases[card].items()}
            said[card] += f"; link fitted on the dense multi-GPU rows (link_eff {links[card].link_eff:.2f})"
    return bases, said


def own_one_gpu_table(card: str, shipped: PublishedTable, multigpu: PublishedTable) -> PublishedTable | None:
    """The one-GPU rows a card with none in the one-GPU table has in the multi-GPU table (aggregated,
    one GPU: B200's are aiconfigurator's Llama-3.1-70B FP8 rows at TP1, TensorRT-LLM and vLLM), as a
    table of its own: what its one-GPU fit is fitted on, so its MoE rows run on its own dense costs
    rather than the card's uncalibrated defaults. None where the one-GPU table has the card (its fit is
    that table's, as for H100-SXM and H200) or the multi-GPU table has no such row of it."""
    if card in set(shipped.rows.gpu):
        return None
    r = multigpu.rows
    on = (
        (r.gpu == card)
        & (r.n_gpus.astype(str) == "1")
        & (r.prefill_workers.astype(str) == "0")
        & (r.replicas.astype(str) == "1")
    )
    if not on.any():
        return None
    rows = r[on].reset_index(drop=True)
    return PublishedTable(rows, multigpu.paths, hashlib.sha256(rows.to_csv(index=False).encode()).hexdigest())


def own_one_gpu_fits(table: PublishedTable, card: str) -> list:
    """The card's one-GPU fit per engine on its own table (own_one_gpu_table): calibrate.published's
    least squares (fit_card, its quantized formats' costs among what it fits), its rows as anchors. Fitted
    only: what the MoE rows run on is the fit; how it carries is what the MoE fit holds out (its rows'
    LOSO/LOMO/LOEO), and the dense points of the card keep their own stage's calibration."""
    from pareto_atlas.calibrate.published import CardCalibration, card_frame, fit_card

    hw, out = shipped_hardware()[card], []
    for engine, rows in table.rows[table.rows.gpu == card].groupby("engine", sort=False):
        rows = rows.reset_index(drop=True)
        frame, models = card_frame(rows, hw)
        params, _ = fit_card(frame, models, hw)
        srcs = ", ".join(f"{s} {n}" for s, n in rows.source_id.value_counts(sort=False).items())
        how = f"fitted on {len(rows)} one-GPU rows of {table.paths[0]} ({engine}: {srcs}; nothing held out)"
        params = replace(params, provenance=how)
        out.append(CardCalibration(card, str(engine), params, rows, "", {}))
    return out


def dense_fits(cards: list[str], one_gpu: list | None = None, fit=None) -> tuple[dict[str, list], dict, dict[str, str]]:
    """Per card, its one-GPU fits and its link fit, the dense costs its MoE rows run on: `one_gpu`'s
    where given, else the one-GPU table's (`fit`: published_cache.fitted), else, for a card the one-GPU
    table lacks, fitted on its one-GPU rows of the multi-GPU table (own_one_gpu_table) with its link
    fitted over them; and per card so fitted, what they rest on."""
    from pareto_atlas.calibrate import published_cache
    from pareto_atlas.calibrate.published import for_atlas
    from pareto_atlas.calibrate.published_link import calibrate_link, link_calibrations
    from pareto_atlas.calibrate.published_table import load_multigpu, load_published

    fit = fit or published_cache.fitted
    shipped, multigpu = load_published(), load_multigpu()
    ones, own, said = {}, {}, {}
    for card in cards:
        ones[card] = [c for c in one_gpu or [] if c.hardware == card]
        if ones[card]:
            continue
        if card in set(shipped.rows.gpu):
            ones[card] = fit(shipped, [card])
        elif (t := own_one_gpu_table(card, shipped, multigpu)) is not None:
            ones[card] = own[card] = own_one_gpu_fits(t, card)
            said[card] = f"its {len(t.rows)} one-GPU rows of {t.paths[0]}"
    links = link_calibrations([c for c in cards if c not in own], one_gpu=one_gpu)
    for card, one in own.items():
        cal = calibrate_link(
            multigpu,
            card,
            {(c.hardware, c.engine): c.params for c in one},
            {g: c.params for g, c in for_atlas(one).items()},
        )
        if cal is not None:
            links[card] = cal
    return ones, links, said


def moe_calibrations(
    cards: list[str], table: PublishedTable | None = None, one_gpu: list | None = None
) -> dict[str, MoeCalibration]:
    """Per card of `cards` with rows in the shipped MoE table (or `table`), the MoE fit over every
    card's rows (the same terms for all) with that card's held-out errors and bar. Each card's rows run
    on its dense calibration: per engine its one-GPU published fit (`one_gpu`: those already made, else
    cached or fitted), the card's link fit on the dense multi-GPU rows over it. From the fit cache when
    the tables, fits and code are unchanged (minutes otherwise, once)."""
    from pareto_atlas.calibrate import published_cache
    from pareto_atlas.calibrate.published_cache import fit_key
    from pareto_atlas.calibrate.published_moe_table import load_moe
    from pareto_atlas.calibrate.published_table import load_multigpu, load_published

    table = table or load_moe()
    shipped = load_published()
    every = [c for c in dict.fromkeys(table.rows.gpu) if c in shipped_hardware()]
    dense_key = f"{fit_key(shipped)}|{load_multigpu().sha256}|{sorted((c.hardware, c.engine) for c in one_gpu or [])}"
    path = published_cache.cache_dir() / f"{_key(table, dense_key)}.json"
    try:
        fits = {c: _decode(d) for c, d in json.loads(path.read_text()).items()}
        return {c: fits[c] for c in cards if c in fits}
    except (OSError, ValueError, KeyError, TypeError):
        pass
    # the one cache entry the dense and link fits read too: the same fit, formats included, whichever
    # asks first (a fit without formats stored under that key changed theirs)
    ones, links, own = dense_fits(every, one_gpu)
    bases, said = dense_bases(table, every, ones, links, own)
    fits = calibrate_moe(table, bases, said)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({c: _encode(f) for c, f in fits.items()}, default=lambda v: v.item()))
        os.replace(tmp, path)
    except OSError:
        pass
    return {c: fits[c] for c in cards if c in fits}
