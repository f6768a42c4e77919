"""The quality of a configuration of a model the study did not measure: the evidence ladder.

Rungs, strongest first, each with an interval (docs/evidence.md's quality ladder):
  (a) measured on that model: the measured target's own quality (store.quality.quality_for);
  (b) published for that model and knobs (quality.published: a source's score beside its own
      baseline, the interval from its item count or printed stderr);
  (c) carried from a model of the same family measured here, same token-changing knobs, relative
      to the same reference precision: the measured relative effect, its interval widened
      (CARRY_WIDENING) because damage measured on one size is not the next size's, and more where
      the knob's damage was measured to grow with size (quality.damage_scaling);
  (d) a prior (a cited effect or a re-encoding argument): projected, never a winner.
The target's own reference configuration (its unmodified weights and KV cache) is exactly 1
relative to itself: evidence `reference`, with the published absolute score where there is one.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from pareto_atlas.simulate.targets import Target
from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.spec.study import Study
from pareto_atlas.store.db import Store
from pareto_atlas.store.quality import (
    KLD_COLUMNS,
    TOKEN_KNOBS,
    NO_KLD,
    QUALITY_COLUMNS,
    WEIGHT_PRIORS,
    Quality,
    _from_prior,
    _with_effects,
    quality_row,
    quality_table,
)

NAN = float("nan")
# A carried relative effect keeps its measured centre; its interval's half-widths are multiplied by
# this: one model size's damage is evidence for the next, not a measurement of it. Stated, printed
# with every carried point, and checked against the sizes both measured (benchmarks/bench_transfer).
CARRY_WIDENING = 2.0
# The precision a model is published and served at on GPUs: its reference there.
GPU_REFERENCE = Knobs(weights="BF16")
GPU_NATIVE = ("F16", "BF16")


def reference_knobs(study: Study, target: Target, kind: str) -> Knobs:
    """The configuration every other is relative to, for a target on a card of this kind: on a CPU
    the study's baseline arm's tokens (the same engine and source format), on a GPU the model's own
    16-bit weights and KV cache."""
    return study.baseline.knobs() if kind == "cpu" else GPU_REFERENCE


def _is_reference(knobs: Knobs, ref: Knobs) -> bool:
    if ref.weights in GPU_NATIVE and knobs.weights in GPU_NATIVE:  # F16 and BF16 hold the same weights
        knobs = replace(knobs, weights=ref.weights)
    return knobs.quality_key() == ref.quality_key()


def published_quality(
    target: Target, knobs: Knobs, task: str, table: pd.DataFrame | None = None, engine: str = "vllm"
) -> Quality | None:
    """Rung (b): the published score the guard uses for this model and knobs, if any (`table`: the
    published table, read once by the caller; None reads it). Where several documents score the
    method, the interval is their envelope (quality.published_pool). A quantized KV cache's row
    counts only for the method `engine` runs for that `kv` (quality.kv_method): scales calibrated,
    dynamic or default; where the table does not state the engine's method, the dtype's name alone."""
    from pareto_atlas.quality.kv_method import kv_method
    from pareto_atlas.quality.published import published_for
    from pareto_atlas.quality.published_pool import guard_interval

    method = kv_method(engine, knobs.kv)
    hits = published_for(
        target.card.name,
        knobs.weights,
        knobs.kv,
        knobs.eviction,
        knobs.kv_keep,
        table=table,
        kv_scales=method.kv_scales if method is not None else None,
    )
    best = guard_interval(hits, task)
    if best is None or best.informational:
        return None
    prov = best.provenance + (f" [KV method: {best.kv_method}]" if best.kv_method else "")
    return Quality(best.q, best.q_lo, best.q_hi, best.rel, best.rel_lo, best.rel_hi, prov, "published", best.benchmark)


def published_model_names(target: Target) -> list[str]:
    """The names the published table may hold a target's scores under: its card's, and any shipped
    card of the same architecture (an instruct model's table rows are under its card's name)."""
    from pareto_atlas.spec.cards import same_architecture_cards

    return list(dict.fromkeys([target.card.name, *same_architecture_cards(target.card)]))


def _published(
    target: Target, knobs: Knobs, task: str, table: pd.DataFrame | None = None, engine: str = "vllm"
) -> Quality | None:
    for name in published_model_names(target):
        q = published_quality(replace(target, card=replace(target.card, name=name)), knobs, task, table, engine)
        if q is not None and name != target.card.name:
            # another model of the same architecture (Llama-3.1-70B's cards for Llama-3.3-70B): its relative
            # effect stands for this one, and the point says it is carried, not published for it
            how = f"carried from {name} (same architecture as {target.card.name}): "
            return replace(q, provenance=how + q.provenance, evidence="carried")
        if q is not None:
            return q
    return None


def carried(q: Quality, source_model: str, arm: str, scaling=None, n_from: float = 0.0, n_to: float = 0.0) -> Quality:
    """Rung (c): a measured relative effect carried to another size of the family. `scaling` (a
    quality.damage_scaling.DamageScaling of the same knob, or None) and the two parameter counts
    widen it where the knob's damage grows towards the target's size (see that module)."""
    w = CARRY_WIDENING
    lo, hi = q.rel - w * (q.rel - q.rel_lo), q.rel + w * (q.rel_hi - q.rel)
    centre = q.rel
    how = f"interval x{w:g} across model sizes"
    if scaling is None:
        how += "; growth of its damage with size not measured"
    else:
        f_centre, f_up = scaling.factors(n_from, n_to)
        if f_up <= 1.0:
            how += f"; its damage does not grow towards this size ({scaling.describe()})"
        else:
            # the damage the measurement cannot exclude, at least the interval's width
            d_hi = max(1.0 - q.rel_lo, q.rel_hi - q.rel_lo, 0.0)
            if f_centre > 1.0 and q.rel < 1.0:
                centre = 1.0 - (1.0 - q.rel) * f_centre
            lo = min(lo, centre, 1.0 - d_hi * f_up)
            hi = max(hi, centre)
            how += (
                f"; its damage grows with size ({scaling.describe()}): centre x{f_centre:.2g}, "
                f"the damage it cannot exclude x{f_up:.2g} at this size"
            )
    return Quality(
        NAN,
        NAN,
        NAN,
        max(centre, 0.0),
        max(lo, 0.0),
        hi,
        f"carried:{source_model} {arm} (its measured effect, {how})",
        "carried",
    )


def _scaling(knobs: Knobs, ref: Knobs, family: str):
    from pareto_atlas.quality.damage_scaling import scaling_for

    return scaling_for(family, (ref.weights, ref.kv), (knobs.weights, knobs.kv))


def target_quality(
    knobs: Knobs,
    target: Target,
    kind: str,
    study: Study,
    qt: dict[str, dict],
    task: str,
    table: pd.DataFrame | None = None,
    measured_family: str | None = None,
) -> Quality:
    """The quality of `knobs` on `target` served on a card of `kind` (see the module doc). `table`
    and `measured_family` (the published table, the measured model's family) are read once by a
    caller that asks for many configurations; None reads them."""
    if table is None:
        from pareto_atlas.quality.published import load_published_quality

        table = load_published_quality()
    if measured_family is None:
        measured_family = _measured_family(study)
    ref = reference_knobs(study, target, kind)
    engine = study.engine.name if kind == "cpu" else "vllm"  # GPU cards are simulated as vLLM
    core_knobs = replace(knobs, eviction="none", kv_keep=1.0, sparse_budget=1.0)
    if core_knobs != knobs:
        # an eviction policy's own published score; the table has no sparse-attention rows, and a
        # lookup without the sparse budget would return the dense model's score
        pub = _published(target, knobs, task, table, engine) if knobs.sparse_budget == 1.0 else None
        if pub is not None:
            return pub
        core = target_quality(core_knobs, target, kind, study, qt, task, table, measured_family)
        if core.evidence == "unmeasured":
            return core
        return _with_effects(knobs, core, {})  # measured effects belong to the measured model
    pub = _published(target, knobs, task, table, engine)
    base = _published(target, ref, task, table, engine) if ref.weights in GPU_NATIVE else None
    if _is_reference(knobs, ref):
        if base is not None:
            return replace(
                base,
                rel=1.0,
                rel_lo=1.0,
                rel_hi=1.0,
                evidence="reference",
                provenance=f"reference ({target.name} at its own precision); score {base.provenance}",
            )
        return Quality(NAN, NAN, NAN, 1.0, 1.0, 1.0, f"reference ({target.name} at its own precision)", "reference")
    if pub is not None:
        return pub
    measured_ref = study.baseline.knobs()
    hit = qt.get(knobs.quality_key())
    if (
        hit is not None
        and ref.quality_key() == measured_ref.quality_key()
        and target.family
        and target.family == measured_family
        and hit.get("rel") == hit.get("rel")
    ):
        q = Quality(hit["p"], hit["lo"], hit["hi"], hit["rel"], hit["rel_lo"], hit["rel_hi"], "", "measured")
        return carried(
            q,
            study.model.name,
            hit["arm"],
            _scaling(knobs, measured_ref, measured_family),
            _measured_params(study),
            target.card.n_params,
        )
    # the reference's published absolute score, where there is one, is what a prior's ratio scales
    base = (
        Quality(base.q, base.lo, base.hi, 1.0, 1.0, 1.0, "", "prior", base.benchmark)
        if base is not None
        else Quality(NAN, NAN, NAN, 1.0, 1.0, 1.0, "", "prior")
    )
    if replace(knobs, weights=ref.weights).quality_key() != ref.quality_key():
        return Quality.unmeasured()
    if knobs.weights in WEIGHT_PRIORS:
        q, source = _from_prior(base, WEIGHT_PRIORS[knobs.weights])
        return replace(q, provenance=f"prior:{source} ({knobs.weights} weights of {target.name})")
    return Quality.unmeasured()


def _measured_card(study: Study):
    """The measured model's card, or None for a study whose model file is not here yet."""
    from pareto_atlas.measure.model_card import model_card

    try:
        return model_card(study)
    except Exception:  # a study whose model file is not here yet has no card to read
        return None


def _measured_params(study: Study) -> float:
    card = _measured_card(study)
    return float(card.n_params) if card is not None else 0.0


def _measured_family(study: Study) -> str:
    card = _measured_card(study)
    return card.family if card is not None else ""


def attach_target_quality(points: pd.DataFrame, target: Target, study: Study, store: Store) -> pd.DataFrame:
    """The quality columns of a target's simulated points from the ladder; KL columns stay empty
    (a KL divergence measured on another model is that model's, shown as `proxy_kld`)."""
    from pareto_atlas.store.compare import quality_study
    from pareto_atlas.store.quality import kld_row, kld_table

    qs = quality_study(study, store)
    default = study.quality.task
    tasks = {w: target.task_of(w, default) for w in pd.unique(points["workload"].astype(str))} if len(points) else {}
    qts = {t: quality_table(qs, store, t) for t in set(tasks.values())}
    kt = kld_table(qs, store)
    from pareto_atlas.quality.published import load_published_quality

    table, family = load_published_quality(), _measured_family(qs)
    kinds = {h.name: h.kind for h in target.hardware}
    # quality depends on the token-changing knobs only: one ladder walk per (quality key, card kind)

    token_cols = list(TOKEN_KNOBS)
    cache: dict[tuple, tuple] = {}
    vals, proxy, bench = [], [], []
    for row in points[token_cols + ["hardware", "workload"]].itertuples(index=False):
        kind = kinds.get(row.hardware, "gpu")
        task = tasks[str(row.workload)]
        key = (*(getattr(row, c) for c in token_cols), kind, task)
        if key not in cache:
            k = Knobs(
                weights=row.weights,
                kv=row.kv,
                eviction=row.eviction,
                kv_keep=float(row.kv_keep),
                sparse_budget=float(row.sparse_budget),
            )
            q = target_quality(k, target, kind, qs, qts[task], task, table, family)
            cache[key] = (quality_row(q) + NO_KLD, kld_row(k, kt)[0] if kind == "cpu" else NAN, q.benchmark or task)
        vals.append(cache[key][0])
        proxy.append(cache[key][1])
        bench.append(cache[key][2])
    out = points.copy()
    q = pd.DataFrame(vals, columns=list(QUALITY_COLUMNS + KLD_COLUMNS), index=points.index)
    for c in q.columns:
        out[c] = q[c]
    out["proxy_kld"] = proxy
    out["quality_task"] = [tasks[w] for w in points["workload"].astype(str)] if len(points) else []
    out["quality_benchmark"] = bench  # what the score rests on: the guarding task's, or a published fallback's
    return out
