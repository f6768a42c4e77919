"""The `simulate` stage: sweep the study's configuration space across its hardware with the
latest calibration, attach quality (measured, inherited or prior), and store the points."""

from __future__ import annotations

import hashlib
import json
import time
from typing import TYPE_CHECKING

import numpy as np
from rich.console import Console

from pareto_atlas.calibrate.stage import THIS, model_card, this_machine
from pareto_atlas.simulate.params import CalibParams, default_params
from pareto_atlas.simulate.space import Load, Space, Workload, compatible, default_knobs, load_label
from pareto_atlas.simulate.sweep import sweep
from pareto_atlas.spec.cards import HardwareCard, shipped_hardware
from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.spec.study import Study
from pareto_atlas.store import Store
from pareto_atlas.store.db import dumps
from pareto_atlas.store.compare import quality_study
from pareto_atlas.store.points import attach_quality

if TYPE_CHECKING:
    from pareto_atlas.scale.local import Executor


def study_hardware(study: Study, store: Store) -> list[HardwareCard]:
    cards = shipped_hardware()
    out = []
    for name in study.simulate.hardware:
        if name == THIS:
            out.append(this_machine(study, store))
        elif name in cards:
            card = cards[name]
            if name in study.prices:
                card = card.with_price(study.prices[name], study.price_date, "study [prices]")
            out.append(card)
        else:
            raise ValueError(f"simulate.hardware: {name!r} is unknown; known: {THIS}, {', '.join(cards)}")
    return out


def latest_params(study: Study, store: Store) -> tuple[dict[str, CalibParams], str | None]:
    cal = store.calibrations(study.name)
    if len(cal):     # a study that compares engines calibrates both; it simulates its own
        cal = cal[cal.engine.fillna(study.engine.name) == study.engine.name]
    out, calib_id = {}, None
    for _, c in cal.iterrows():          # oldest first: the latest per hardware wins
        out[c.hardware] = CalibParams.from_dict(json.loads(c.params_json))
        calib_id = c.calib_id
    return out, calib_id


def study_space(study: Study, hardware: list[HardwareCard], model) -> Space:
    """The default knob grid per hardware kind plus the study's own arms, thinned to max_configs."""
    kinds = sorted({h.kind for h in hardware})
    arms = [a.knobs() for a in study.arms]
    grid = [k for kind in kinds for k in default_knobs(kind, study.engine.name)]
    wl = study.workload
    # a trace is the load: its points replay it, as its anchors did, instead of the closed loops
    loads = ([Load(trace=True)] if wl.trace else
             [Load(concurrency=c, think=study.load.think) for c in study.simulate.concurrency]
             + [Load(utilization=u) for u in study.simulate.utilization])
    rows = tuple((r.arrival_s, r.prompt_tokens, r.output_tokens) for r in wl.trace_rows())
    workloads = [Workload(wl.name, wl.prompt_tokens, wl.output_tokens, rows)]
    if not wl.trace:     # every other shape the arms measured is simulated too, across the hardware
        for a in study.arms:
            aw = a.workload(wl)
            if not aw.trace and aw.name not in {w.name for w in workloads}:
                workloads.append(Workload(aw.name, aw.prompt_tokens, aw.output_tokens, ()))
    per_pair = len(loads) * len(workloads)
    knobs = list(dict.fromkeys(arms + grid))
    cost = {k: per_pair * sum(1 for h in hardware if not compatible(k, h, study.engine.name)) for k in knobs}
    if sum(cost.values()) > study.simulate.max_configs:
        knobs = thinned(knobs, arms, cost, study.simulate.max_configs)
    return Space(model, tuple(hardware), tuple(knobs), tuple(workloads), tuple(loads), {}, engine=study.engine.name)


def thinned(knobs: list[Knobs], arms: list[Knobs], cost: dict[Knobs, int], budget: int) -> list[Knobs]:
    """The knobs to simulate within `budget` configurations (cost: a knob's configurations, one per
    compatible card, load and workload), in their order, stratified by what can win: the study's arms
    always; then every knob whose tokens an arm measured (its quality_key: weights, KV, eviction,
    sparsity), since only those can carry measured or inherited quality into a verdict; then the
    rest, projected at best, at random (seeded) while the budget lasts. A random thinning of the
    whole grid decided which configurations could win (F16 with chunked prefill at 128 slots could
    simply be missing)."""
    rng = np.random.default_rng(0)
    measured, armset = {a.quality_key() for a in arms}, set(arms)
    evidenced = [k for k in knobs if k not in armset and k.quality_key() in measured]
    rest = [k for k in knobs if k not in armset and k.quality_key() not in measured]
    keep, used = set(armset), sum(cost[k] for k in armset)
    for tier in (evidenced, rest):
        for i in rng.permutation(len(tier)):
            k = tier[i]
            if cost[k] and used + cost[k] <= budget:
                keep.add(k)
                used += cost[k]
    return [k for k in knobs if k in keep]


def simulate_study(study: Study, store: Store, console: Console, executor: Executor | None = None) -> None:
    from pareto_atlas.store.points import measured_points

    anchors = measured_points(study, store)
    model = model_card(study, anchors)
    hardware = study_hardware(study, store)
    params, calib_id = latest_params(study, store)
    engine = study.engine.name
    calibrated = set(params)            # latest_params keeps this study's engine only
    published = {}
    if gpus := [h.name for h in hardware if h.kind != "cpu" and h.name not in calibrated]:
        from pareto_atlas.calibrate.published_stage import published_params

        published = published_params(study.name, store, console, gpus)
    for h in hardware:
        if h.name in calibrated:
            continue
        if h.kind != "cpu" and h.name in published:
            params[h.name] = published[h.name]      # measured on that GPU, if only by others: beats any default
            continue
        params[h.name] = default_params(h, engine if h.kind == "cpu" else "vllm")
        if h.kind != "cpu" and engine == "vllm" and THIS in calibrated:
            # vLLM measured here: its scheduler/step overheads carry to GPU hosts, its CPU kernels do not
            from pareto_atlas.calibrate.transfer import carry_overheads

            ctx = study.workload.prompt_tokens + study.workload.output_tokens // 2
            params[h.name] = carry_overheads(params[h.name], params[THIS], model, h, ctx)
    space = study_space(study, hardware, model)
    space = with_measured_acceptance(space, anchors, console, study.model.name)
    console.print(f"[bold]simulate[/]: {model.name} on {', '.join(h.name for h in hardware)}: "
                  f"{space.size()} configurations x {study.simulate.n_requests} requests")
    for h in hardware:
        p = params[h.name]
        console.print(f"  {h.name}: {p.provenance}, error bar latency ±{p.lat_rel_err:.0%} "
                      f"throughput ±{p.thr_rel_err:.0%}", highlight=False)
    t0 = time.monotonic()
    pts = (executor.sweep(space, params, study.simulate.n_requests) if executor is not None
           else sweep(space, params, n_requests=study.simulate.n_requests))
    pts = label_engine(attach_quality(pts, quality_study(study, store), store), engine)
    sim_id = hashlib.sha256(dumps([study.name, calib_id, len(pts), time.time()]).encode()).hexdigest()[:16]
    store.put_sim_run(sim_id, study.name, calib_id, pts)
    console.print(f"simulate: {len(pts)} points in {time.monotonic() - t0:.1f} s "
                  f"({int(pts.feasible.sum())} feasible), stored as run {sim_id}")
    own = anchors[anchors["model"] == study.model.name] if "model" in anchors else anchors
    suggest_next_anchor(study, own, pts, params, console)     # the points are the study model's


def measured_acceptance(anchors, model: str | None = None) -> dict[str, float]:
    """Per model-drafting method (a draft model, an EAGLE head: they draft every step), the
    acceptance per drafted token the study's anchors measured (the median over anchors that
    drafted): a property of the model and the text, not of the hardware. Not n-gram lookup, which
    drafts only where the text repeats: its points keep the grid's stated low acceptance.
    `model`: the target model the points are for (the anchors' `model` column): its own anchors'
    acceptance where they measured one, else every anchor's (carried from the target measured)."""
    import pandas as pd

    if anchors is None or not len(anchors) or "spec_accept_measured" not in anchors:
        return {}
    a = anchors[anchors.spec.isin(("draft", "eagle")) & anchors.spec_accept_measured.notna()]
    a = a[pd.to_numeric(a.get("spec_drafted_per_token"), errors="coerce").fillna(1.0) > 0]
    if model is not None and "model" in a and (a["model"] == model).any():
        a = a[a["model"] == model]
    return {str(k): float(v) for k, v in a.groupby("spec").spec_accept_measured.median().items() if v > 0}


def with_measured_acceptance(space: Space, anchors, console: Console, model: str | None = None) -> Space:
    """The space with every knob that leaves its acceptance to be resolved (spec_accept 0) taking
    the study's measured one for its method (`model`: the target's own where measured, see
    measured_acceptance); the rest resolve from their cited prior (api)."""
    from dataclasses import replace

    acc = measured_acceptance(anchors, model)
    if not acc:
        return space
    knobs = tuple(dict.fromkeys(replace(k, spec_accept=acc[k.spec]) if k.spec in acc and k.spec_accept == 0 else k
                                for k in space.knobs))
    console.print("  speculation acceptance measured by the anchors, used for every unresolved point: "
                  + ", ".join(f"{m} {a:.2f}" for m, a in acc.items()), highlight=False)
    return replace(space, knobs=knobs)


def label_engine(pts, engine: str):
    """Simulated points say which engine they model (and carry it in their label when not llama.cpp)."""
    from pareto_atlas.store.compare import DEFAULT_ENGINE

    pts = pts.assign(engine=engine)
    if engine != DEFAULT_ENGINE and len(pts):
        pts["label"] = f"{engine}:" + pts["label"].astype(str)
    return pts


def suggest_next_anchor(study: Study, anchors, pts, params: dict[str, CalibParams], console: Console) -> None:
    """Say which configuration to measure next on this machine: the one whose error bar could most
    change the frontier (calibrate.propose), so the next campaign shrinks what matters."""
    from pareto_atlas.calibrate.propose import propose_next_anchor

    # only what this engine can really run as an arm (llama.cpp has no eviction, sparse attention,
    # or alternative batching policies), so the proposal can be measured as it is
    from pareto_atlas.measure.weights import makeable_here, source_type

    runnable = (pts.eviction.eq("none") & pts.sparse_budget.eq(1.0) & pts.batching.eq("continuous")
                & pts.spec.isin(["none", "ngram"]) & pts.kv.isin(["f16", "q8_0", "q4_0"])
                & pts.weights.isin(sorted(makeable_here()) + [source_type(study.model.name)]))
    cand = pts[(pts.hardware == THIS) & runnable & pts.quality.notna()] if "quality" in pts else pts.iloc[0:0]
    if THIS not in params or anchors.empty or cand.empty:
        return
    try:
        best = propose_next_anchor(cand, anchors, params[THIS].lat_rel_err)
    except ValueError:
        return
    console.print(f"next anchor to measure on {THIS}: {best['label']} at {load_label(best)} ({best['reason']})",
                  highlight=False, soft_wrap=True)
