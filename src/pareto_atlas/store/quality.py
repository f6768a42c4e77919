"""The quality of any configuration, from the evidence in the store, labelled by how strong it is.

Evidence levels, strongest first (docs/evidence.md): measured on this arm; inherited from an arm with the
same token-changing knobs; a measured relative effect (KV eviction, top-k attention) on a measured
core; a prior (a cited effect, or a re-encoding argument) with a wide interval; unmeasured. Every
level carries an interval on the score relative to the baseline arm, paired where both arms
answered the same items. Token-level KL divergence against the baseline (quality.kld) is joined
by the same quality key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Callable

import pandas as pd

from pareto_atlas.measure.weights import source_type
from pareto_atlas.spec.knobs import BITS_PER_WEIGHT, Knobs
from pareto_atlas.spec.study import Study
from pareto_atlas.store.db import Store

NAN = float("nan")

# Quality priors for knobs this machine cannot run: the cited effect on quality of each family.
QUALITY_PRIORS = {"kv-evict": "pyramidkv_quality", "sparse-attn": "sparq_quality"}
# Weight formats served only on GPUs, whose effect on quality is read from a cited prior.
WEIGHT_PRIORS = {"FP8": "fp8_weights_quality", "AWQ4": "int4_weights_quality", "W4A16": "int4_weights_quality"}
# Formats that hold every weight of a lower-precision source up to rounding (8-bit blocks, 16-bit
# floats): a re-encoding reproduces the source, so its score is the source's, as a prior whose
# interval allows the rounding a stated 2 % (KL divergence measures it where it was run).
REENCODINGS = ("F32", "F16", "BF16", "Q8_0")
REENCODING_REL = (0.98, 1.0)
# The measured policy that stands for `Knobs.sparse_budget`: exact top-k attention, an upper bound
# on the quality of the approximate methods (SparQ, Quest) the simulator's sparse budget models.
SPARSE_POLICY = "topk"
# Evidence that lets a configuration win a regime by default (priors need --allow-priors).
WINNING_EVIDENCE = ("measured", "inherited", "measured-effect", "published", "carried", "reference")


@dataclass(frozen=True)
class Quality:
    """A configuration's task score with its 95 % interval, the same relative to the baseline arm,
    where it came from (`provenance`, a label) and how strong that is (`evidence`)."""

    q: float
    lo: float
    hi: float
    rel: float
    rel_lo: float
    rel_hi: float
    provenance: str
    evidence: str  # measured | inherited | measured-effect | prior | unmeasured
    # the benchmark the absolute score `q` rests on where it is not the guarding task's own (a published
    # fallback: gpt-oss-120b's MMLU where no IFEval is published); "" means the guarding task
    benchmark: str = ""

    @classmethod
    def unmeasured(cls, why: str = "unmeasured") -> "Quality":
        return cls(NAN, NAN, NAN, NAN, NAN, NAN, why, "unmeasured")

    def scaled(self, rel: float, rel_lo: float, rel_hi: float) -> "Quality":
        """This quality times a relative effect, the score and its ratio to the baseline alike
        (interval times interval: wider, never narrower)."""
        cap = lambda v: v if v != v else min(1.0, v)  # noqa: E731  (NaN stays NaN: min(1, nan) is 1)
        return replace(
            self,
            q=cap(self.q * rel),
            lo=self.lo * rel_lo,
            hi=cap(self.hi * rel_hi),
            rel=self.rel * rel,
            rel_lo=self.rel_lo * rel_lo,
            rel_hi=self.rel_hi * rel_hi,
        )


def quality_table(study: Study, store: Store, task: str | None = None) -> dict[str, dict]:
    """quality_key -> {arm, p, lo, hi, n, metric, rel, rel_lo, rel_hi, paired} from the study's
    finished quality runs of one task (default: the study's [quality] task); `rel*` compare each arm
    with the baseline arm item by item on that task (Newcombe's paired interval; the baseline against
    itself is exactly 1). A run of another task never stands in: each workload is guarded by its own."""
    from pareto_atlas.quality.records import QualityRecord
    from pareto_atlas.quality.stats import paired_difference

    task = task or study.quality.task
    runs = store.quality_runs(study.name)
    runs = runs[runs.task == task] if not runs.empty else runs
    out: dict[str, dict] = {}
    for _, r in runs.iterrows():
        s = json.loads(r.summary_json or "{}")
        strict = s.get("strict") or {}
        if not strict:
            continue
        out[r.quality_key] = {
            "arm": r.arm,
            "qrun_id": r.qrun_id,
            "p": strict["p"],
            "lo": strict["lo"],
            "hi": strict["hi"],
            "n": strict["n"],
            "k": strict.get("k"),
            "flex": (s.get("flexible") or {}).get("p", NAN),
            "metric": f"{r.task} {r.mode} strict",
        }
    base_key = study.baseline.knobs().quality_key()
    base = out.get(base_key)
    if base is None:
        return out
    base_items = {d["item_id"]: QualityRecord.from_dict(d) for d in store.quality_items(base["qrun_id"])}
    for key, hit in out.items():
        if key == base_key:
            hit.update(rel=1.0, rel_lo=1.0, rel_hi=1.0, paired=None)
            continue
        mine = [QualityRecord.from_dict(d) for d in store.quality_items(hit["qrun_id"])]
        shared = [m for m in mine if m.item_id in base_items]
        if not shared:
            hit.update(rel=NAN, rel_lo=NAN, rel_hi=NAN, paired=None)
            continue
        d = paired_difference(
            [m.correct_strict for m in shared], [base_items[m.item_id].correct_strict for m in shared]
        )
        rel, lo, hi = d.rel_interval()
        hit.update(rel=rel, rel_lo=lo, rel_hi=hi, paired=d.to_dict())
    return out


def eviction_effects(study: Study, store: Store, task: str | None = None) -> dict[str, list[dict]]:
    """policy -> the measured relative effects of KV eviction (or, under `topk`, of top-k sparse
    attention) on the study's model (`pareto-atlas evict`), one per keep ratio (topk: attended
    fraction): accuracy under the policy / full-cache accuracy on the same items, with a paired
    interval (quality.guards.guard_paired). Where several item sets measured one (policy, keep),
    `task` (default: the study's quality task) wins, then the most items, then the latest; an effect
    measured on another task still stands in, named with its task in the provenance."""
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
        rank = (r.task == (task or study.quality.task), r.n_items, r.created_at)
        if (r.policy, r.keep) not in chosen or rank > chosen[(r.policy, r.keep)][0]:
            chosen[(r.policy, r.keep)] = (rank, r, ref)
    out: dict[str, list[dict]] = {}
    for (policy, keep), (_, r, ref) in sorted(chosen.items()):
        g = guard_paired(records(r.evict_id), records(ref.evict_id), floor=study.quality.floor)
        out.setdefault(policy, []).append(
            {
                "keep": float(keep),
                "kv_keep": float(r.kv_keep),
                "rel": g.rel,
                "rel_lo": g.rel_lo,
                "rel_hi": g.rel_hi,
                "method": g.method,
                "k": int(r.correct),
                "k_full": int(ref.correct),
                "n": int(r.n_items),
                "task": r.task,
                "model": r.model,
                "engine": "transformers",
                "evict_id": r.evict_id,
            }
        )
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


def _from_prior(core: Quality, key: str) -> tuple[Quality, str]:
    from pareto_atlas.spec.priors import get_prior

    p = get_prior(key)
    c, lo, hi = p.delta_interval()
    return core.scaled(1.0 + c, 1.0 + lo, 1.0 + hi), p.source


def _with_effects(knobs: Knobs, core: Quality, effects: dict[str, list[dict]]) -> Quality:
    """KV eviction and sparse attention on top of a core quality: the measured relative effect of
    each family (the eviction policy's at its keep, oracle top-k attention's at the sparse budget),
    or its cited prior where none was measured; effects and intervals multiply."""
    on: dict[str, tuple[str, float, str, str]] = {}
    if knobs.eviction != "none" or knobs.kv_keep != 1.0:
        on["kv-evict"] = (knobs.eviction, knobs.kv_keep, "keep", "")
    if knobs.sparse_budget != 1.0:
        on["sparse-attn"] = (SPARSE_POLICY, knobs.sparse_budget, "budget", "; oracle top-k")
    q, provs, priors, undefined = core, [], [], ""
    for family, (policy, level, what, note) in on.items():
        effect, how = _measured_effect(effects.get(policy, []), level, what)
        if effect is not None and effect["rel"] != effect["rel"]:
            # the full cache answered nothing right: no ratio to carry over, so the prior stands
            undefined += (
                f" (measured {policy}@{effect['keep']:g} has no relative effect: "
                f"full cache {effect['k_full']}/{effect['n']})"
            )
            effect = None
        if effect is None:
            q, source = _from_prior(q, QUALITY_PRIORS[family])
            priors.append(source)
            continue
        q = q.scaled(effect["rel"], effect["rel_lo"], effect["rel_hi"])
        provs.append(
            f"measured-effect:{policy}@{effect['keep']:g}{how} ({effect['engine']}, "
            f"{effect['model']}, {effect['task']} n={effect['n']}{note})"
        )
    if priors:
        provs.append("prior:" + "+".join(priors))
    if core.evidence == "prior":  # the core's own prior (weights) stays on record beside the effects
        provs.insert(0, core.provenance)
    evidence = "prior" if priors or core.evidence == "prior" else "measured-effect"
    return replace(q, provenance="+".join(provs) + undefined, evidence=evidence)


def quality_for(
    knobs: Knobs, arm: str, study: Study, qt: dict[str, dict], effects: dict[str, list[dict]] | None = None
) -> Quality:
    """The quality of a configuration, in order of trust:

    1. measured on this arm, or inherited from an arm with the same token-changing knobs, relative
       to the baseline paired item by item;
    2. KV eviction or sparse attention on top of (1)/(3): scaled by the measured relative effect
       or, failing that, the family's cited prior (`_with_effects`);
    3. a re-encoding of the source at or above its precision (REENCODINGS): the source's score, a
       prior with REENCODING_REL; a GPU-only weight format (WEIGHT_PRIORS): the source's score moved
       by the format's cited prior;
    otherwise unmeasured (NaN): such a point can sit on the raw frontier but wins no regime.
    """
    base_hit = qt.get(study.baseline.knobs().quality_key())
    hit = qt.get(knobs.quality_key())
    if hit is not None:
        own = hit["arm"] == arm
        return Quality(
            hit["p"],
            hit["lo"],
            hit["hi"],
            hit.get("rel", NAN),
            hit.get("rel_lo", NAN),
            hit.get("rel_hi", NAN),
            "measured" if own else f"inherited:{hit['arm']}",
            "measured" if own else "inherited",
        )
    core_knobs = replace(knobs, eviction="none", kv_keep=1.0, sparse_budget=1.0)
    if core_knobs != knobs:
        core = quality_for(core_knobs, "", study, qt)
        if core.evidence == "unmeasured":
            return core
        return _with_effects(knobs, core, effects or {})
    if base_hit is None or knobs.weights == "RANDOM":
        return Quality.unmeasured()
    src = source_type(study.model.name)
    base = study.baseline.knobs()
    if replace(knobs, weights=base.weights).quality_key() != base.quality_key():
        return Quality.unmeasured()
    core = Quality(base_hit["p"], base_hit["lo"], base_hit["hi"], 1.0, 1.0, 1.0, "", "prior")
    if (
        knobs.weights in REENCODINGS
        and src in BITS_PER_WEIGHT
        and BITS_PER_WEIGHT[knobs.weights] >= BITS_PER_WEIGHT[src]
    ):
        q = core.scaled(1.0, *REENCODING_REL)
        return replace(q, provenance=f"prior:lossless re-encoding of the {src} source")
    if knobs.weights in WEIGHT_PRIORS:
        q, source = _from_prior(core, WEIGHT_PRIORS[knobs.weights])
        return replace(q, provenance=f"prior:{source} ({knobs.weights} weights of the {src} source)")
    return Quality.unmeasured()


# the knobs that change the tokens a configuration writes (its quality); the rest change only its speed
TOKEN_KNOBS = ("weights", "kv", "eviction", "kv_keep", "sparse_budget")
QUALITY_COLUMNS = (
    "quality",
    "quality_lo",
    "quality_hi",
    "quality_rel",
    "quality_rel_lo",
    "quality_rel_hi",
    "quality_provenance",
    "quality_evidence",
)
KLD_COLUMNS = ("kld", "kld_lo", "kld_hi", "top1", "top1_lo", "top1_hi", "kld_arm")
NO_KLD = (NAN,) * 6 + ("",)


def kld_table(study: Study, store: Store) -> dict[str, tuple]:
    """quality_key -> the latest KL divergence and top-1 agreement against the baseline measured for
    it on the study's model (`pareto-atlas kld`), as KLD_COLUMNS values; the baseline's own is 0."""
    pts = store.kld_points(study.name)
    if pts.empty:
        return {}
    pts = pts[pts.model == study.model.name]
    out: dict[str, tuple] = {}
    for r in pts.itertuples():  # oldest first: the latest per configuration wins
        out[r.quality_key] = (r.kld, r.kld_lo, r.kld_hi, r.top1, r.top1_lo, r.top1_hi, r.arm)
    return out


def kld_row(knobs: Knobs, kt: dict[str, tuple]) -> tuple:
    """KLD_COLUMNS values for a configuration: those of the measured configuration with the same
    token-changing knobs (eviction and sparse attention change tokens: they have none)."""
    return kt.get(knobs.quality_key(), NO_KLD)


def quality_row(q: Quality) -> tuple:
    """`q` as the values of QUALITY_COLUMNS (contract 1)."""
    return q.q, q.lo, q.hi, q.rel, q.rel_lo, q.rel_hi, q.provenance, q.evidence


def attach_quality(
    points: pd.DataFrame, study: Study, store: Store, task_of: Callable[[str], str] | None = None
) -> pd.DataFrame:
    """Fill the quality columns of simulated points from the store's quality runs, its measured
    eviction effects and KL divergences, and priors; each workload's points from the runs of the task
    that guards it (`task_of(workload)`; default: the study's task), named in `quality_task`."""
    kt = kld_table(study, store)
    task_of = task_of or (lambda _w: study.quality.task)
    wls = (points["workload"].astype(str) if "workload" in points else pd.Series("", index=points.index)).tolist()
    tasks = {w: task_of(w) for w in dict.fromkeys(wls)}
    per_task = {t: (quality_table(study, store, t), eviction_effects(study, store, t)) for t in set(tasks.values())}
    cache: dict[tuple[Knobs, str], tuple] = {}
    vals = []
    for k, w in zip((Knobs.from_row(r) for _, r in points.iterrows()), wls):
        t = tasks[w]
        if (k, t) not in cache:
            qt, effects = per_task[t]
            cache[(k, t)] = quality_row(quality_for(k, "", study, qt, effects)) + kld_row(k, kt)
        vals.append(cache[(k, t)])
    out = points.copy()
    q = pd.DataFrame(vals, columns=list(QUALITY_COLUMNS + KLD_COLUMNS), index=points.index)
    for c in q.columns:
        out[c] = q[c]
    out["quality_task"] = [tasks[w] for w in wls]
    out["quality_benchmark"] = out["quality_task"]  # measured here on the guarding task itself
    return out


def arm_quality_table(study: Study, store: Store) -> pd.DataFrame:
    """One row per (task, measured quality configuration) (a task score and/or KL divergence): the
    score, its paired difference from the baseline on that task with the exact McNemar p, and the KL
    divergence and top-1 agreement against the baseline, each with its 95 % interval. What the guard
    of each task's workloads decides on; the KL divergence does not depend on the task."""
    kt = kld_table(study, store)
    base_key = study.baseline.knobs().quality_key()
    rows = []
    for i, task in enumerate(study.quality.all_tasks()):
        qt = quality_table(study, store, task)
        if i and not qt:
            continue
        for key in dict.fromkeys([*qt, *(kt if i == 0 else ())]):
            hit, kl = qt.get(key, {}), dict(zip(KLD_COLUMNS, kt.get(key, NO_KLD)))
            d = hit.get("paired") or {}
            rows.append(
                {
                    "task": task,
                    "arm": hit.get("arm") or kl["kld_arm"],
                    "baseline": key == base_key,
                    "quality_key": key,
                    "k": hit.get("k"),
                    "n": hit.get("n"),
                    "score": hit.get("p", NAN),
                    "diff": d.get("diff", 0.0 if key == base_key else NAN),
                    "diff_lo": d.get("lo", NAN),
                    "diff_hi": d.get("hi", NAN),
                    "mcnemar_p": d.get("mcnemar_p", NAN),
                    "rel": hit.get("rel", NAN),
                    "rel_lo": hit.get("rel_lo", NAN),
                    "rel_hi": hit.get("rel_hi", NAN),
                    **{c: kl[c] for c in KLD_COLUMNS if c != "kld_arm"},
                }
            )
    return pd.DataFrame(rows)
