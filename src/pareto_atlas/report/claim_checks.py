"""The verdict of each published claim against this study's atlas: agrees; differs, with the
evidence that moved it; or cannot say, with what would settle it. Each check takes the claim's
references (passed in by report.claims, which alone loads them) and the product's answers
(report.paper_answers, computed from the atlas alone).
"""

from __future__ import annotations

import pandas as pd

from pareto_atlas.report import paper_answers as A
from pareto_atlas.report.claim_row import AGREES, DIFFERS, CANNOT, ClaimRow, verdict_row
from pareto_atlas.report.claim_frontier import _frontier
from pareto_atlas.report.claim_frontier import rate_difference as rate_difference  # re-exported: importable as before

# A simulated TPOT ratio agrees with a published one within this (stated) margin. Both points of a
# ratio are simulated with one card's calibration, so the error they share cancels and the points'
# own bars (up to +-202 % on the L4) would overstate the ratio's; what does not cancel is how well
# the cost model splits a step between weights, KV cache and overhead.
RATIO_TOLERANCE = 0.05


def _w(w) -> str:
    return "no winner" if w is None else f"{w.label} on {w.hardware} ({A.load_text(w)})"


def _fp8_winners(view: A.AtlasView, ref: dict, ctx: dict) -> list[ClaimRow]:
    names = [r.name for r in view.regimes]
    wins = {n: A.winner(view, n) for n in names}
    fp8 = [n for n, w in wins.items() if w is not None and w.weights == "FP8"]
    answer = f"FP8 is in {len(fp8)} of {len(names)} winners: " + "; ".join(f"{n} {_w(w)}" for n, w in wins.items())
    # FP8 alone first: a point whose only prior is FP8's quality (no eviction, sparsity or prior speed)
    core = A.is_knobs(weights="FP8", eviction="none", sparse_budget=1.0)
    alone = lambda p: core(p) & (A.speed_evidence(p) != "prior")  # noqa: E731
    proj = {}
    for n in names:
        if n not in fp8:
            p = A.projected_beating_winner(view, n, alone)
            p = A.projected_beating_winner(view, n, A.is_knobs(weights="FP8")) if p is None else p
            if p is not None:
                proj[n] = p
    want = int(ref["fp8_winners"])
    if len(fp8) == want:
        return [verdict_row(ref, answer, AGREES)]
    if len(fp8) < want <= len(fp8) + len(proj):
        ev = "; ".join(
            f"{n}: {p.label} on {p.hardware} would beat the winner ({p.objective_value:.4g}) but its {p.evidence}"
            for n, p in proj.items()
        )
        first = next((p for p in proj.values() if bool(alone(pd.DataFrame([p]))[0])), next(iter(proj.values())))
        return [
            verdict_row(
                ref,
                answer,
                CANNOT,
                f"{ev}. Needs a quality score of {ctx['model']} with FP8 weights (none published in "
                f"spec/published_quality.csv), e.g. {first.confirm}",
            )
        ]
    return [
        verdict_row(
            ref,
            answer,
            DIFFERS,
            f"even resting on priors FP8 would win only {len(fp8) + len(proj)} regime(s)",
        )
    ]


def _hardware_winners(view: A.AtlasView, ref: dict, ctx: dict) -> list[ClaimRow]:
    rows = []
    for regime, key in ref["winners"].items():
        hw = ctx["cards"][key]
        w = A.winner(view, regime)
        claim = f"{key} ({hw}) takes {regime}" + (
            f" at ${ref['low_cost_per_mtok']:g}/Mtok" if regime == "low-cost" else ""
        )
        answer = _w(w) + (
            ""
            if w is None
            else f": {w.cell_objective} {w.cell_value:.4g} [{w.cell_value_lo:.4g}, {w.cell_value_hi:.4g}]"
        )
        if w is None:
            rows.append(
                verdict_row(
                    ref, answer, CANNOT, "no configuration is admitted in this regime", part=regime, claim=claim
                )
            )
            continue
        if w.hardware == hw:
            verdict, ev = AGREES, ""
            if regime == "low-cost" and not w.cell_value_lo <= ref["low_cost_per_mtok"] <= w.cell_value_hi:
                verdict, ev = (
                    DIFFERS,
                    (
                        f"same card, but its cost interval excludes ${ref['low_cost_per_mtok']:g}: "
                        f"{w.label} at {w.cell_value:.3f} rests on {w.cell_evidence}"
                    ),
                )
            rows.append(verdict_row(ref, answer, verdict, ev, part=regime, claim=claim))
            continue
        on_hw = lambda p, hw=hw: (p.hardware == hw).to_numpy()  # noqa: E731
        p = A.projected_beating_winner(view, regime, on_hw)
        if p is not None:
            rows.append(
                verdict_row(
                    ref,
                    answer,
                    CANNOT,
                    f"on {hw}, {p.label} would beat it ({p.objective_value:.4g}) but its {p.evidence}; "
                    f"needs: {p.confirm}",
                    part=regime,
                    claim=claim,
                )
            )
            continue
        b = A.best_admitted(view, regime, on_hw)
        tie = (
            ""
            if b is None or b[w.cell_objective] != w.cell_value
            else f" (a tie on {w.cell_objective}, broken by cost: ${w.cost_per_mtok:.3f} vs ${b.cost_per_mtok:.3f}/Mtok)"
        )
        rows.append(
            verdict_row(
                ref,
                answer,
                DIFFERS,
                f"the winner rests on {w.cell_evidence}; best admitted on {hw}: "
                + ("none" if b is None else f"{b.label} ({A.load_text(b)}) at {b[w.cell_objective]:.4g}")
                + tie,
                part=regime,
                claim=claim,
            )
        )
    return rows


def _no_l4(view: A.AtlasView, ref: dict, ctx: dict) -> list[ClaimRow]:
    hw, reg = ctx["cards"][ref["card"]], view.regime(ref["regime"])
    b = A.meets_budget(view, ref["regime"], hw)
    budget = ", ".join(str(c) for c in reg.constraints)
    answer = (
        f"{b.central} of {b.total} {hw} configurations simulated with its calibration meet {budget} on "
        f"central values ({b.sure} on their pessimistic bounds, {b.possible} on their optimistic ones); "
        f"{b.on_prior_speed} more on a prior speed"
    )
    if b.central == 0:
        note = "" if b.possible == 0 else f"{b.possible} could within the {hw} error bar"
        return [verdict_row(ref, answer, AGREES, note)]
    best = (
        f"best: {b.best.label} ({A.load_text(b.best)}), TPOT p99 {b.best.tpot_p99_ms:.1f} ms, {A.evidence_of(b.best)}"
    )
    if b.sure:
        return [verdict_row(ref, answer, DIFFERS, best)]
    return [
        verdict_row(
            ref,
            answer,
            CANNOT,
            f"{best}; within the {hw} error bar (±{b.best.lat_rel_err:.0%}): more published {hw} anchors "
            f"(spec/published_anchors.csv) would narrow it. The budget is the study's (MLPerf's "
            f"interactive one); the paper's is not in its text",
        )
    ]


def _guard_regime(view: A.AtlasView) -> str:
    names = [r.name for r in view.regimes if r.quality_floor is not None]
    return "quality-floor" if "quality-floor" in names else names[0]


def _guard_answer(label: str, guards, evidence, sub: pd.DataFrame) -> str:
    g = ", ".join(f"{k or 'unmeasured'} {v}" for k, v in guards.most_common())
    e = ", ".join(f"{k} {v}" for k, v in evidence.most_common())
    core = sub[(sub.eviction == "none") & (sub.sparse_budget == 1.0) & (sub.q_evidence != "unmeasured")]
    src = ""
    if len(core):
        c = core.iloc[0]
        src = f"; alone: {c.q_evidence} {c.quality_rel:.3f} [{c.q_lo:.3f}, {c.q_hi:.3f}] ({c.quality_provenance})"
    return f"{len(sub)} {label} configurations: guard {g}; quality {e}{src}"


def _awq(view: A.AtlasView, ref: dict, ctx: dict) -> list[ClaimRow]:
    guards, ev, sub = A.guard_verdicts(view, A.is_knobs(weights="AWQ4"), _guard_regime(view))
    answer = _guard_answer("AWQ4", guards, ev, sub)
    if set(ev) <= {"prior", "unmeasured"}:
        near = A.nearest_published(ctx["card"], "W4A16", task=ctx["task"])
        nearest = (
            ""
            if near is None
            else f"; nearest published 4-bit evidence: W4A16 (GPTQ-style int4) {near.benchmark} rel {near.rel:.3f} "
            f"[{near.rel_lo:.3f}, {near.rel_hi:.3f}] ({near.provenance}) -> "
            f"{A.task_verdict(near.rel_lo, near.rel_hi, near.rel, ref['floor'])} at {ref['floor']:g}"
        )
        return [
            verdict_row(
                ref,
                answer,
                CANNOT,
                f"AWQ's quality rests on a prior only; needs a GSM8K score of {ctx['model']} with AWQ "
                f"weights (the published table's AWQ rows are Qwen2-7B proxies, informational), published "
                f"or measured (an arm weights = \"AWQ4\", quality = true on a GPU host){nearest}",
            )
        ]
    verdict = AGREES if set(guards) == {"boundary"} else DIFFERS
    return [verdict_row(ref, answer, verdict, "" if verdict == AGREES else answer)]


def _fp8_kv(view: A.AtlasView, ref: dict, ctx: dict) -> list[ClaimRow]:
    guards, ev, sub = A.guard_verdicts(view, A.is_knobs(kv="fp8"), _guard_regime(view))
    answer = _guard_answer("FP8-KV", guards, ev, sub)
    if guards.get("in"):
        return [verdict_row(ref, answer, DIFFERS, "some FP8-KV configurations are in")]
    if set(guards) == {"out"}:
        return [verdict_row(ref, answer, AGREES)]
    others = A.published_kv_models("fp8")
    return [
        verdict_row(
            ref,
            answer,
            CANNOT,
            f"no quality evidence for an FP8 KV cache on {ctx['model']}: not admitted, but not eliminated "
            f"either; needs a task score with an FP8 KV cache and nothing else changed, published or "
            f"measured (an arm kv = \"fp8\", quality = true on a GPU host). The published table's FP8-KV "
            f"rows are other models with FP8 weights too ({', '.join(others) or 'none'})",
        )
    ]


def _ratio_text(v: float) -> str:
    return "n/a" if v != v else f"{v:.2f}"


def _ngram(view: A.AtlasView, ref: dict, ctx: dict) -> list[ClaimRow]:
    lo, hi = ref["tpot_ratio"]
    cards = list(ctx["cards"].values())
    ratios = {hw: A.tpot_ratio(view, hw, {}, spec="ngram") for hw in cards}
    inside = all(lo - RATIO_TOLERANCE <= r <= hi + RATIO_TOLERANCE for r in ratios.values() if r == r)
    gains = A.spec_gains(view, "ngram")
    accept = A.knob_value(view, "spec_accept", spec="ngram")
    answer = (
        "batch-1 TPOT ratio "
        + ", ".join(f"{hw} {_ratio_text(r)}" for hw, r in ratios.items())
        + "; winners using it: "
        + (", ".join(f"{n} ({g:+.1%} vs the best without it, bar ±{e:.0%})" for n, (g, e) in gains.items()) or "none")
    )
    adds = [n for n, (g, e) in gains.items() if abs(g) > e]
    rests = f"n-gram speed rests on the grid's stated acceptance {accept:g} per drafted token (simulate.space)"
    if inside and not adds:
        return [verdict_row(ref, answer, AGREES, rests)]
    why = [] if inside else [f"ratio outside {lo:g}-{hi:g} ±{RATIO_TOLERANCE:g}"]
    why += [f"it wins {n} beyond the error bar" for n in adds]
    return [verdict_row(ref, answer, DIFFERS, "; ".join(why) + f"; {rests}")]


def _tpot_ratios(view: A.AtlasView, ref: dict, ctx: dict) -> list[ClaimRow]:
    rows = []
    for fmt, paper in (("AWQ4", ref["awq"]), ("FP8", ref["fp8"])):
        per, off, basis = [], [], []
        for key, hw in ctx["cards"].items():
            r = A.tpot_ratio(view, hw, {}, weights=fmt)
            want = paper[key] if isinstance(paper, dict) else None
            lo, hi = (want, want) if want is not None else paper
            per.append(f"{hw} {_ratio_text(r)}")
            if r == r and not lo - RATIO_TOLERANCE <= r <= hi + RATIO_TOLERANCE:
                off.append(f"{hw} {r:.2f} vs {want if want is not None else f'{lo:g}-{hi:g}'}")
            seen = A.published_formats(hw)
            basis.append(
                f"{hw} fit on {'/'.join(sorted(seen)) or 'no'} anchors"
                + ("" if fmt in seen else f" (no {fmt} anchor: the cost model's bytes-moved projection)")
            )
        claim = f"{fmt}/FP16 TPOT: " + (
            ", ".join(f"{k} {v:g}" for k, v in paper.items())
            if isinstance(paper, dict)
            else f"{paper[0]:g}-{paper[1]:g} on all three"
        )
        verdict = AGREES if not off else DIFFERS
        ev = ("" if not off else "outside ±" + f"{RATIO_TOLERANCE:g}: " + ", ".join(off) + ". ") + "; ".join(basis)
        rows.append(verdict_row(ref, "batch 1: " + ", ".join(per), verdict, ev, part=fmt, claim=claim))
    return rows


def _price_rise(view: A.AtlasView, ref: dict, ctx: dict) -> list[ClaimRow]:
    hw, to = ctx["cards"][ref["card"]], ctx["cards"][ref["to"]]
    new = A.price_of(view, hw) * (1 + ref["rise"])
    moves = A.reprice_moves(view, {hw: new})
    parts, ok = [], True
    for regime in ref["regimes"]:
        b, a = moves[regime]
        parts.append(f"{regime}: {_w(b)} -> {_w(a)}")
        ok &= a is not None and a.hardware == to and (b is None or b.hardware != to)
    answer = f"{hw} at ${new:g}/h: " + "; ".join(parts)
    cmd = f"pareto-atlas pick --study {view.study_ref.name} --price \"{hw}={new:g}\""
    return [
        verdict_row(
            ref,
            answer,
            AGREES if ok else DIFFERS,
            ("" if ok else f"they do not all move from another card to {to}; ") + f"re-plan: {cmd}",
        )
    ]


CHECKS = {
    "fp8-winners": _fp8_winners,
    "hardware-winners": _hardware_winners,
    "no-l4-tight-latency": _no_l4,
    "awq-boundary": _awq,
    "fp8-kv-eliminated": _fp8_kv,
    "ngram-nothing": _ngram,
    "tpot-ratios": _tpot_ratios,
    "frontier-share": _frontier,
    "a100-price-rise": _price_rise,
}


def claim_rows(view: A.AtlasView, refs: dict, ctx: dict) -> list[ClaimRow]:
    """Every claim of `refs` against the atlas `view` (ctx: model, card, task, and the paper's cards)."""
    ctx = {**ctx, "cards": refs["cards"]}
    rows = []
    for ref in refs["claims"]:
        if ref["id"] not in CHECKS:
            raise ValueError(f"references: claim {ref['id']!r} has no check; known: {', '.join(CHECKS)}")
        rows += CHECKS[ref["id"]](view, ref, ctx)
    return rows
