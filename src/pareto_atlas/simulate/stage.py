"""The `simulate` stage: sweep the study's configuration space across its hardware with the
latest calibration, attach quality (measured, inherited or prior), and store the points."""

from __future__ import annotations

from dataclasses import replace
import hashlib
import json
import time

import numpy as np
import pandas as pd
from rich.console import Console

from pareto_atlas.measure.hwprobe import THIS, this_machine
from pareto_atlas.measure.model_card import model_card
from pareto_atlas.scale.local import Executor
from pareto_atlas.simulate.params import CalibParams, default_params
from pareto_atlas.simulate.resume import resumable_sweep
from pareto_atlas.simulate.shards import sweep_on
from pareto_atlas.simulate.space import (
    GPU_WEIGHTS,
    Load,
    Space,
    Workload,
    compatible,
    default_knobs,
    load_label,
    check_expert_grid,
    parallel_variants,
    prefix_variants,
    unfit_layouts,
)
from pareto_atlas.simulate.targets import Target, carried_params, study_targets
from pareto_atlas.spec.cards import HardwareCard, shipped_hardware
from pareto_atlas.spec.knobs import PARALLEL_FIELDS, Knobs
from pareto_atlas.spec.study import Study, study_ref
from pareto_atlas.store import Store
from pareto_atlas.store.compare import quality_study
from pareto_atlas.store.db import dumps
from pareto_atlas.store.points import attach_quality


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
    if len(cal):  # a study that compares engines calibrates both; it simulates its own
        cal = cal[cal.engine.fillna(study.engine.name) == study.engine.name]
    out, calib_id = {}, None
    for _, c in cal.iterrows():  # oldest first: the latest per hardware wins
        out[c.hardware] = CalibParams.from_dict(json.loads(c.params_json))
        calib_id = c.calib_id
    return out, calib_id


def study_loads(study: Study) -> list[Load]:
    """The loads every configuration is simulated under: the study's closed loops and utilizations,
    or its trace (a trace is the load: its points replay it, as its anchors did)."""
    if study.workload.trace:
        return [Load(trace=True)]
    return [Load(concurrency=c, think=study.load.think) for c in study.simulate.concurrency] + [
        Load(utilization=u) for u in study.simulate.utilization
    ]


def measured_workloads(study: Study) -> list[Workload]:
    """The study's workload and every other shape its arms measured (each simulated across the hardware)."""
    wl = study.workload
    rows = tuple((r.arrival_s, r.prompt_tokens, r.output_tokens) for r in wl.trace_rows())
    blocks = tuple(r.hash_ids for r in wl.trace_rows()) if wl.shares() else ()
    workloads = [Workload(wl.name, wl.prompt_tokens, wl.output_tokens, rows, wl.sharing(), blocks)]
    if not wl.trace:
        for a in study.arms:
            aw = a.workload(wl)
            if not aw.trace and aw.name not in {w.name for w in workloads}:
                workloads.append(Workload(aw.name, aw.prompt_tokens, aw.output_tokens, (), aw.sharing()))
    return workloads


def study_evictions(study: Study) -> tuple[tuple[str, float], ...]:
    """The (policy, keep) pairs a study's own [eviction] sweep measures (none unless the study has
    the table): simulated beside the grid's, so that its measured effects reach configurations."""
    if "eviction" not in study.model_fields_set:
        return ()
    return tuple((p, float(k)) for p in study.eviction.policies if p != "topk" for k in study.eviction.keeps)


def study_space(
    study: Study,
    hardware: list[HardwareCard],
    model,
    workloads: list[Workload] | None = None,
    budget: int | None = None,
    evidenced: set[str] | None = None,
) -> Space:
    """The default knob grid per hardware kind plus the study's own arms, thinned to `budget`
    configurations (default: max_configs) by what can win: the arms, then every knob whose tokens
    have quality evidence (`evidenced` quality keys; default: the arms'), then the rest at random."""
    kinds = sorted({h.kind for h in hardware})
    arms = [a.knobs() for a in study.arms]
    swept = study_evictions(study)
    opt_in = tuple(study.simulate.grid.weights or ())  # opt-in formats (space.FP4_OPT_IN) the grid lists
    grid = [k for kind in kinds for k in default_knobs(kind, study.engine.name, swept, weights_extra=opt_in)]
    shares = any(w.shares for w in (workloads or measured_workloads(study)))
    grid = [k for k in grid if study.simulate.grid.keeps(k)]
    # Parallel layouts where the study's grid names any (tp = [1, 2, 4, 8], ...): a study that does not
    # keeps its one-GPU space, thinning and winners exactly as before parallelism existed
    layouts = {f: getattr(study.simulate.grid, f, None) for f in PARALLEL_FIELDS}
    if "gpu" in kinds and any(v is not None for v in layouts.values()):
        moe = getattr(model, "is_moe", False)
        grid += parallel_variants([k for k in grid if k.weights in GPU_WEIGHTS], layouts, moe)
    # each arm under each eviction the study sweeps carries a measured effect: always simulated,
    # like the arms themselves (a few dozen knobs; the grid's own variants of them compete as usual)
    kept = arms + [replace(a, eviction=p, kv_keep=k) for a in arms if a.eviction == "none" for p, k in swept]
    loads = study_loads(study)
    workloads = workloads or measured_workloads(study)
    per_pair = len(loads) * len(workloads)
    knobs = list(dict.fromkeys(kept + grid))
    cost = {k: per_pair * sum(1 for h in hardware if not compatible(k, h, study.engine.name, model)) for k in knobs}
    budget = study.simulate.max_configs if budget is None else budget
    pair = 2 if shares else 1
    if pair * sum(cost.values()) > budget:
        evidenced = {a.quality_key() for a in arms} if evidenced is None else evidenced
        knobs = thinned(knobs, kept, cost, budget // pair, evidenced)
    # a workload that shares prefixes: every knob kept with its prefix cache on beside off (what caching
    # is worth, thinned as pairs so the two differ by the cache alone); one that shares nothing keeps its grid
    if shares:
        knobs = list(dict.fromkeys(knobs + [k for k in prefix_variants(knobs) if study.simulate.grid.keeps(k)]))
    return Space(model, tuple(hardware), tuple(knobs), tuple(workloads), tuple(loads), {}, engine=study.engine.name)


def thinned(
    knobs: list[Knobs], arms: list[Knobs], cost: dict[Knobs, int], budget: int, evidenced_keys: set[str] | None = None
) -> list[Knobs]:
    """The knobs to simulate within `budget` configurations (cost: a knob's configurations, one per
    compatible card, load and workload), in their order, stratified by what can win: the study's arms
    always; then every knob whose tokens an arm measured (its quality_key: weights, KV, eviction,
    sparsity), since only those can carry measured or inherited quality into a verdict; then the
    rest, projected at best, at random (seeded) while the budget lasts. A random thinning of the
    whole grid decided which configurations could win (F16 with chunked prefill at 128 slots could
    simply be missing)."""
    rng = np.random.default_rng(0)
    armset = set(arms)
    measured = {a.quality_key() for a in arms} if evidenced_keys is None else evidenced_keys
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
    targets = study_targets(study, model, hardware, measured_workloads(study))
    check_expert_grid(study.simulate.grid, [t.card for t in targets])  # before any fit is read
    calibrated = set(params)  # latest_params keeps this study's engine only
    published = {}
    if gpus := [h.name for h in hardware if h.kind != "cpu" and h.name not in calibrated]:
        from pareto_atlas.calibrate.published_stage import published_params

        # a mixture of experts among the targets: the cards' MoE terms fitted on published MoE rows too
        moe = any(t.card.is_moe for t in targets)
        from pareto_atlas.simulate.schedulers import gpu_engine

        # each GPU point on its own engine's card fit where the card has one (its provenance says which)
        published = published_params(study.name, store, console, gpus, links=True, moe=moe, engine=gpu_engine(engine))
    for h in hardware:
        if h.name in calibrated:
            continue
        if h.kind != "cpu" and h.name in published:
            params[h.name] = published[h.name]  # measured on that GPU, if only by others: beats any default
            continue
        params[h.name] = default_params(h, engine if h.kind == "cpu" else "vllm")
        if h.kind != "cpu" and engine == "vllm" and THIS in calibrated:
            # vLLM measured here: its scheduler/step overheads carry to GPU hosts, its CPU kernels do not
            from pareto_atlas.calibrate.transfer import carry_overheads

            ctx = study.workload.prompt_tokens + study.workload.output_tokens // 2
            params[h.name] = carry_overheads(params[h.name], params[THIS], model, h, ctx)
    spaces = target_spaces(study, targets, anchors, console)
    console.print(
        f"[bold]simulate[/]: {len(targets)} model(s), "
        f"{sum(sp.size() for sp in spaces)} configurations x {study.simulate.n_requests} requests"
    )
    t0 = time.monotonic()
    frames = []
    for t, space in zip(targets, spaces):
        fitted = {h.name: fitted_models(h, study, model, anchors) for h in t.hardware}
        ref = study_ref(study)  # a projected point's command names the study
        tparams = {h.name: carried_params(params[h.name], t, fitted[h.name], h.name, ref) for h in t.hardware}
        shapes = ", ".join(f"{w.prompt_tokens}/{w.output_tokens}" for w in t.workloads)
        console.print(
            f"  {t.name} ({'measured here' if t.measured else t.card.source}; {shapes} tokens): "
            f"{space.size()} configurations on {', '.join(h.name for h in t.hardware)}",
            highlight=False,
        )
        if unfit := unfit_layouts(study.simulate.grid, t.card):  # kept out of its space: say which and why
            console.print(
                "    layouts its card cannot split, left out: " + "; ".join(f"{n} × {r}" for r, n in unfit.items()),
                highlight=False,
            )
        for h in t.hardware:
            p = tparams[h.name]
            console.print(
                f"    {h.name}: {p.provenance}, error bar latency ±{p.lat_rel_err:.0%} throughput ±{p.thr_rel_err:.0%}",
                highlight=False,
            )
        if not space.size():
            continue
        kept: list[int] = []
        # saved shard by shard under this target's key: a stopped sweep resumes where it stopped
        pts = resumable_sweep(
            store,
            f"{study.name}/{t.name}",
            space,
            tparams,
            study.simulate.n_requests,
            run=lambda sp, seed, tp=tparams: sweep_on(executor, sp, tp, study.simulate.n_requests, seed),
            on_shard=lambda i, n, was_kept: kept.append(i) if was_kept else None,
        )
        if kept:
            console.print(f"    {len(kept)} shard(s) of the sweep kept from an earlier, interrupted or identical run")
        if t.measured:
            pts = attach_quality(
                pts, quality_study(study, store), store, task_of=lambda w, t=t: t.task_of(w, study.quality.task)
            )
        else:
            from pareto_atlas.store.ladder import attach_target_quality

            pts = attach_target_quality(pts, t, study, store)
            pts["point_id"] = [hashlib.sha256(f"{t.name}|{i}".encode()).hexdigest()[:16] for i in pts.point_id]
        frames.append(pts.assign(model=t.name, model_card=t.card.source if not t.measured else "measured here"))
    pts = label_engine(pd.concat(frames, ignore_index=True, sort=False) if frames else pd.DataFrame(), engine)
    sim_id = hashlib.sha256(dumps([study.name, calib_id, len(pts), time.time()]).encode()).hexdigest()[:16]
    store.put_sim_run(sim_id, study.name, calib_id, pts)
    console.print(
        f"simulate: {len(pts)} points in {time.monotonic() - t0:.1f} s "
        f"({int(pts.feasible.sum()) if len(pts) else 0} feasible), stored as run {sim_id}"
    )
    own = pts[pts.model == study.model.name] if len(pts) else pts
    mine = anchors[anchors["model"] == study.model.name] if "model" in anchors else anchors
    suggest_next_anchor(study, mine, own, params, console)  # this machine's next anchor: the study model's


def target_spaces(study: Study, targets: list[Target], anchors, console: Console) -> list[Space]:
    """Each target's space: its cards, its workloads, the study's loads; the grid thinned to its
    share of max_configs (in proportion to its full grid), keeping first what can win: the arms,
    then the knobs whose tokens have quality evidence for that model."""
    full = [study_space(study, list(t.hardware), t.card, list(t.workloads), budget=10**12) for t in targets]
    sizes = [sp.size() for sp in full]
    total = sum(n for t, n in zip(targets, sizes) if t.max_configs is None) or 1
    out = []
    for t, sp, n in zip(targets, full, sizes):
        budget = t.max_configs or max(1, int(study.simulate.max_configs * n / total))
        ev = None if t.measured else evidenced_keys(study, t)
        space = study_space(study, list(t.hardware), t.card, list(t.workloads), budget=budget, evidenced=ev)
        out.append(with_measured_acceptance(space, anchors, console, t.name))
    return out


def evidenced_keys(study: Study, target: Target) -> set[str]:
    """Quality keys whose tokens have evidence for a target that was not measured: its reference,
    the knobs published for it, and (same family) the measured arms' knobs, which carry."""
    from pareto_atlas.store.ladder import GPU_REFERENCE

    keys = {GPU_REFERENCE.quality_key(), Knobs(weights="F16").quality_key(), study.baseline.knobs().quality_key()}
    from pareto_atlas.quality.published import load_published_quality
    from pareto_atlas.store.ladder import published_model_names

    tab = load_published_quality()
    for name in published_model_names(target):
        for r in tab[tab.model == name].itertuples():
            w = str(r.weights or "") or "BF16"
            keys.add(
                Knobs(
                    weights=w if w in GPU_WEIGHTS else "BF16",
                    kv=str(r.kv or "f16") if str(r.kv or "f16") in ("f16", "fp8") else "f16",
                ).quality_key()
            )
    if target.family:
        keys |= {a.knobs().quality_key() for a in study.arms}
    return keys


def fitted_models(hw: HardwareCard, study: Study, measured_card, anchors=None) -> set[str]:
    """The model cards a card's calibration was fitted on: the published table's models for a GPU
    card; for this machine, the measured model and every model an arm of its own served."""
    if hw.kind == "cpu":
        names = {measured_card.name}
        if anchors is not None and len(anchors) and "model" in anchors:
            from pareto_atlas.measure.model_card import anchor_cards

            mine = anchors[anchors.hardware == hw.name] if "hardware" in anchors else anchors
            names |= {c.name for c in anchor_cards(study, mine)} if len(mine) else set()
        return names
    from pareto_atlas.calibrate.published_table import load_published

    rows = load_published().rows
    return set(rows[rows.gpu == hw.name].model)


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
    knobs = tuple(
        dict.fromkeys(
            replace(k, spec_accept=acc[k.spec]) if k.spec in acc and k.spec_accept == 0 else k for k in space.knobs
        )
    )
    console.print(
        "  speculation acceptance measured by the anchors, used for every unresolved point: "
        + ", ".join(f"{m} {a:.2f}" for m, a in acc.items()),
        highlight=False,
    )
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

    if pts.empty:  # nothing simulated (a grid that keeps no configuration on the study's cards)
        return
    runnable = (
        pts.eviction.eq("none")
        & pts.sparse_budget.eq(1.0)
        & pts.batching.eq("continuous")
        & pts.spec.isin(["none", "ngram"])
        & pts.kv.isin(["f16", "q8_0", "q4_0"])
        & pts.weights.isin(sorted(makeable_here()) + [source_type(study.model.name)])
    )
    cand = pts[(pts.hardware == THIS) & runnable & pts.quality.notna()] if "quality" in pts else pts.iloc[0:0]
    if THIS not in params or anchors.empty or cand.empty:
        return
    try:
        best = propose_next_anchor(cand, anchors, params[THIS].lat_rel_err)
    except ValueError:
        return
    console.print(
        f"next anchor to measure on {THIS}: {best['label']} at {load_label(best)} ({best['reason']})",
        highlight=False,
        soft_wrap=True,
    )
