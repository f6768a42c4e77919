"""The measured side of the points table (contract 1 in docs/structures.md), read from the store:
one row per finished anchor, its quality joined by quality key and labelled by where it came from.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import replace

import pandas as pd

from pareto_atlas.measure.weights import source_type
from pareto_atlas.spec.knobs import BITS_PER_WEIGHT, Knobs
from pareto_atlas.spec.study import Study
from pareto_atlas.store.db import Store

NAN = float("nan")


def point_id(knobs: Knobs, hardware: str, workload: str, concurrency: int, rate: float | None) -> str:
    ident = json.dumps([knobs.to_dict(), hardware, workload, concurrency, rate], sort_keys=True)
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


def cost_per_mtok(price_per_hour: float, throughput_tok_s: float) -> float:
    """$ per million output tokens (DESIGN.md): $/hour / (tokens/s x 3600) x 1e6."""
    if not throughput_tok_s or throughput_tok_s <= 0 or math.isnan(throughput_tok_s):
        return NAN
    return price_per_hour / (throughput_tok_s * 3600.0) * 1e6


def quality_table(study: Study, store: Store) -> dict[str, dict]:
    """quality_key -> {arm, p, lo, hi, n, metric} from the study's finished quality runs."""
    runs = store.quality_runs(study.name)
    out: dict[str, dict] = {}
    for _, r in runs.iterrows():
        s = json.loads(r.summary_json or "{}")
        strict = s.get("strict") or {}
        if not strict:
            continue
        out[r.quality_key] = {"arm": r.arm, "p": strict["p"], "lo": strict["lo"], "hi": strict["hi"],
                              "n": strict["n"], "flex": (s.get("flexible") or {}).get("p", NAN),
                              "metric": f"{r.task} {r.mode} strict"}
    return out


# Quality priors for knobs this machine cannot run: the cited effect on quality of each family.
QUALITY_PRIORS = {"kv-evict": "pyramidkv_quality", "sparse-attn": "sparq_quality"}
# The measured policy that stands for `Knobs.sparse_budget`: exact top-k attention, an upper bound
# on the quality of the approximate methods (SparQ, Quest) the simulator's sparse budget models.
SPARSE_POLICY = "topk"


def eviction_effects(study: Study, store: Store) -> dict[str, list[dict]]:
    """policy -> the measured relative effects of KV eviction (or, under `topk`, of top-k sparse
    attention) on the study's model (`pareto-atlas evict`), one per keep ratio (topk: attended
    fraction): accuracy under the policy / full-cache accuracy on the same items, with a paired
    interval (quality.guards.guard_paired). Where several item sets measured one (policy, keep),
    the study's own quality task wins, then the most items, then the latest."""
    from pareto_atlas.quality.guards import guard_paired
    from pareto_atlas.quality.records import QualityRecord

    pts = store.eviction_points(study.name)
    pts = pts[pts.model == study.model.name] if len(pts) else pts
    if pts.empty:
        return {}
    by_id = {r.evict_id: r for r in pts.itertuples()}

    def records(eid: str) -> list[QualityRecord]:
        return [QualityRecord.from_dict(d) for d in store.eviction_items(eid)]

    chosen: dict[tuple[str, float], tuple] = {}
    for r in pts[pts.policy != "none"].itertuples():
        ref = by_id.get(r.ref_id)
        if ref is None or not r.n_items:
            continue
        rank = (r.task == study.quality.task, r.n_items, r.created_at)
        if (r.policy, r.keep) not in chosen or rank > chosen[(r.policy, r.keep)][0]:
            chosen[(r.policy, r.keep)] = (rank, r, ref)
    out: dict[str, list[dict]] = {}
    for (policy, keep), (_, r, ref) in sorted(chosen.items()):
        g = guard_paired(records(r.evict_id), records(ref.evict_id), floor=study.quality.floor)
        out.setdefault(policy, []).append({
            "keep": float(keep), "kv_keep": float(r.kv_keep), "rel": g.rel, "rel_lo": g.rel_lo, "rel_hi": g.rel_hi,
            "method": g.method, "k": int(r.correct), "k_full": int(ref.correct), "n": int(r.n_items),
            "task": r.task, "model": r.model, "engine": "transformers", "evict_id": r.evict_id})
    return out


def _measured_effect(measured: list[dict], level: float, what: str) -> tuple[dict | None, str]:
    """The measured effect at `level` (a keep ratio, or the sparse budget), or at the nearest measured
    level below it (less kept or read: a conservative stand-in; a larger one would flatter), and how
    it was matched (`what` names the level)."""
    below = [e for e in measured if e["keep"] <= level + 1e-9]
    if not below:
        return None, ""
    e = max(below, key=lambda e: e["keep"])
    how = "" if abs(e["keep"] - level) < 1e-9 else f" for {what} {level:g}, the nearest measured below"
    return e, how


def quality_for(knobs: Knobs, arm: str, study: Study, qt: dict[str, dict],
                effects: dict[str, list[dict]] | None = None) -> tuple[float, float, float, str]:
    """(quality, lo, hi, provenance) for a configuration, in order of trust:

    1. measured on this arm, or inherited from an arm with the same token-changing knobs;
    2. a re-encoding at or above the source precision: the source's score (a prior: the weights
       are reproduced, not re-measured);
    3. eviction or sparse attention on top of (1)/(2): that score scaled by the relative effect
       measured on this model (`effects`, from `eviction_effects`): the eviction policy's at its
       keep, and oracle top-k attention's at the sparse budget; both multiply when both are on, and
       so do their intervals with the score's (wider, never narrower). A family with no measured
       effect is moved by its cited quality effect instead (a prior from seed 000's evidence table);
    otherwise unmeasured (NaN): such a point can sit on the raw frontier but wins no regime.
    """
    hit = qt.get(knobs.quality_key())
    if hit is not None:
        prov = "measured" if hit["arm"] == arm else f"inherited:{hit['arm']}"
        return hit["p"], hit["lo"], hit["hi"], prov
    src = source_type(study.model.name)
    base = study.baseline.knobs()
    core = replace(knobs, eviction="none", kv_keep=1.0, sparse_budget=1.0)
    if core != knobs:
        q, lo, hi, prov = quality_for(core, "", study, qt)
        if q != q:
            return NAN, NAN, NAN, "unmeasured"
        from pareto_atlas.spec.priors import get_prior

        effects = effects or {}
        # family -> (the measured policy standing for it, the knob's level, what the level is, a note)
        on: dict[str, tuple[str, float, str, str]] = {}
        if core.kv_keep != knobs.kv_keep or core.eviction != knobs.eviction:
            on["kv-evict"] = (knobs.eviction, knobs.kv_keep, "keep", "")
        if core.sparse_budget != knobs.sparse_budget:
            on["sparse-attn"] = (SPARSE_POLICY, knobs.sparse_budget, "budget", "; oracle top-k")
        rel = rel_lo = rel_hi = 1.0
        provs, priors, undefined = [], [], ""
        for family, (policy, level, what, note) in on.items():
            effect, how = _measured_effect(effects.get(policy, []), level, what)
            if effect is not None and effect["rel"] != effect["rel"]:
                # the full cache answered nothing right: no ratio to carry over, so the prior stands
                undefined += (f" (measured {policy}@{effect['keep']:g} has no relative effect: "
                              f"full cache {effect['k_full']}/{effect['n']})")
                effect = None
            if effect is None:
                priors.append(get_prior(QUALITY_PRIORS[family]))
                continue
            rel, rel_lo, rel_hi = rel * effect["rel"], rel_lo * effect["rel_lo"], rel_hi * effect["rel_hi"]
            provs.append(f"measured-effect:{policy}@{effect['keep']:g}{how} ({effect['engine']}, "
                         f"{effect['model']}, {effect['task']} n={effect['n']}{note})")
        if provs:
            q, lo, hi = min(1.0, q * rel), lo * rel_lo, min(1.0, hi * rel_hi)
        delta = sum(p.central for p in priors)
        if priors:
            provs.append("prior:" + "+".join(p.source for p in priors))
        return q + delta, lo + delta, hi + delta, "+".join(provs) + undefined
    same_rest = replace(knobs, weights=base.weights).quality_key() == base.quality_key()
    if (knobs.weights != "RANDOM" and src in BITS_PER_WEIGHT and same_rest
            and BITS_PER_WEIGHT[knobs.weights] >= BITS_PER_WEIGHT[src]):
        b = qt.get(base.quality_key())
        if b is not None:
            return b["p"], b["lo"], b["hi"], f"prior:lossless re-encoding of the {src} source"
    return NAN, NAN, NAN, "unmeasured"


def attach_quality(points: pd.DataFrame, study: Study, store: Store) -> pd.DataFrame:
    """Fill the quality columns of simulated points from the store's quality runs, its measured
    eviction effects, and priors."""
    qt = quality_table(study, store)
    effects = eviction_effects(study, store)
    base_q = qt.get(study.baseline.knobs().quality_key(), {}).get("p", NAN)
    cache: dict[Knobs, tuple] = {}
    vals = []
    for _, r in points.iterrows():
        k = Knobs.from_row(r)
        if k not in cache:
            cache[k] = quality_for(k, "", study, qt, effects)
        vals.append(cache[k])
    out = points.copy()
    q = pd.DataFrame(vals, columns=["quality", "quality_lo", "quality_hi", "quality_provenance"], index=points.index)
    for c in q.columns:
        out[c] = q[c]
    out["quality_rel"] = out["quality"] / base_q if base_q and base_q == base_q and base_q > 0 else NAN
    return out


def spec_measured(store: Store, anchor_id: str) -> tuple[float, float]:
    """(drafted tokens per generated token, acceptance per drafted token) from the server timings of
    the measured requests. llama.cpp reports draft_n / draft_n_accepted only when it drafted, so a
    missing key is 0 drafts; acceptance is NaN when nothing was drafted."""
    drafted = accepted = generated = 0
    for r in store.requests(anchor_id):
        if r.get("warmup") or not r.get("ok"):
            continue
        t = r.get("server_timings") or {}
        drafted += int(t.get("draft_n") or 0)
        accepted += int(t.get("draft_n_accepted") or 0)
        generated += int(r.get("completion_tokens") or 0)
    if generated == 0:
        return NAN, NAN
    return drafted / generated, (accepted / drafted if drafted else NAN)


def measured_points(study: Study, store: Store) -> pd.DataFrame:
    anchors = store.anchors(study.name)
    qt = quality_table(study, store)
    base_q = qt.get(study.baseline.knobs().quality_key(), {}).get("p", NAN)
    rows = []
    for _, a in anchors.iterrows():
        knobs = Knobs.from_dict(json.loads(a.knobs_json))
        m = json.loads(a.metrics_json)
        load = json.loads(a.load_json)
        wl = json.loads(a.workload_json)
        q, lo, hi, qprov = quality_for(knobs, a.arm, study, qt)
        price = study.cpu_price_per_hour
        thr = m.get("throughput_tok_s", NAN)
        drafted, accept = spec_measured(store, a.anchor_id) if knobs.spec != "none" else (0.0, NAN)
        rows.append({
            # repeats of one configuration are separate measurements, each its own point
            "point_id": point_id(knobs, a.hardware, wl["name"], load["concurrency"], load.get("rate_rps"))
                        + (f"-r{a['repeat']}" if a["repeat"] else ""),
            "arm": a.arm, "anchor_id": a.anchor_id, "repeat": a["repeat"], "campaign_id": a.campaign_id,
            "label": knobs.label(), "hardware": a.hardware, "workload": wl["name"],
            "prompt_tokens": wl["prompt_tokens"], "output_tokens": wl["output_tokens"],
            "concurrency": load["concurrency"], "rate_rps": load.get("rate_rps") or NAN, "n_requests": load["requests"],
            **knobs.to_dict(),
            "spec_drafted_per_token": drafted, "spec_accept_measured": accept,
            "optimizations": "+".join(knobs.optimizations()), "n_opts": len(knobs.optimizations()),
            "provenance": "measured",
            "ttft_p50_ms": m["ttft"]["p50"], "ttft_p99_ms": m["ttft"]["p99"],
            "tpot_p50_ms": m["tpot"]["p50"], "tpot_p99_ms": m["tpot"]["p99"],
            "e2e_p50_ms": m["e2e"]["p50"], "e2e_p99_ms": m["e2e"]["p99"],
            "throughput_tok_s": thr, "goodput_rps": m.get("goodput_rps") or NAN,
            "mem_gb": (m.get("peak_rss_mb") or NAN) / 1024,
            "lat_rel_err": 0.0, "thr_rel_err": 0.0,
            "price_per_hour": price, "price_date": f"{study.price_date} (assumed CPU rental price)",
            "cost_per_mtok": cost_per_mtok(price, thr),
            "quality": q, "quality_lo": lo, "quality_hi": hi,
            "quality_rel": q / base_q if base_q and base_q == base_q and base_q > 0 else NAN,
            "quality_provenance": qprov,
            "engine_version": a.engine_version, "feasible": True, "infeasible_reason": "",
            "weights_bpw": json.loads(a.provenance_json or "{}").get("weights_bpw", NAN),
        })
    return pd.DataFrame(rows)


def all_points(study: Study, store: Store) -> pd.DataFrame:
    """Measured anchors and the latest simulated run of the study, one points table."""
    measured = measured_points(study, store)
    simulated = store.sim_points(study=study.name)
    if len(simulated):
        simulated = simulated.drop(columns=["sim_id"], errors="ignore")
    frames = [f for f in (measured, simulated) if len(f)]
    if not frames:
        return pd.DataFrame()
    return pd.concat(frames, ignore_index=True, sort=False)
