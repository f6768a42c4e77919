"""The frontier-share claim: how often stacked combinations reach the raw frontier beside single methods, on
evidence and priors included, with the interval of the difference of the two rates (Newcombe)."""

from __future__ import annotations

from pareto_atlas.report import paper_answers as A
from pareto_atlas.report.claim_row import AGREES, DIFFERS, CANNOT, ClaimRow, verdict_row


def _frontier_text(f: dict) -> str:
    (sk, sn), (gk, gn) = f["stacked"], f["single"]
    return (
        f"{f['on']} of {f['considered']} points on the raw frontier; stacks {sk} of {sn} ({_rate(sk, sn):.0%}), "
        f"singles {gk} of {gn} ({_rate(gk, gn):.0%})"
    )


def _rate(k: int, n: int) -> float:
    return k / n if n else float("nan")


def _frontier(view: A.AtlasView, ref: dict, ctx: dict) -> list[ClaimRow]:
    """The raw frontier over quality, TPOT p99 and cost, on the points that rest on evidence (the
    paper's quality was measured) and, beside it, on every point priors included."""
    ev, every = A.frontier_counts(view, evidence_only=True), A.frontier_counts(view)
    (sk, sn), (gk, gn) = ev["stacked"], ev["single"]
    answer = f"on evidence: {_frontier_text(ev)}; priors included: {_frontier_text(every)}"
    grid = (
        f"counts are not comparable (the paper's grid: {ref['frontier'][1]} configurations); priors included, "
        f"{every['on_prior']} of the {every['on']} frontier points rest on prior quality and {every['excluded']} "
        f"points have no quality at all"
    )
    if not sn or not gn:
        return [
            verdict_row(
                ref,
                answer,
                CANNOT,
                f"too few points rest on evidence to compare stacks with singles; {grid}",
            )
        ]
    lo, hi = rate_difference(sk, sn, gk, gn)
    diff = f"stacks minus singles {_rate(sk, sn) - _rate(gk, gn):+.1%} [95 % {lo:+.1%}, {hi:+.1%}] (Newcombe)"
    verdict, how = (
        (AGREES, "on evidence stacks reach the frontier more often, as claimed")
        if lo > 0
        else (DIFFERS, "on evidence singles reach it more often")
        if hi < 0
        else (
            CANNOT,
            "on evidence the two rates are not separated; a grid whose points rest on more "
            "evidence (published FP8 / AWQ / FP8-KV scores) would separate them",
        )
    )
    return [verdict_row(ref, answer, verdict, f"{how}: {diff}; {grid}")]


def rate_difference(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float]:
    """95 % interval of k1/n1 - k2/n2 (Newcombe's hybrid score method, from Wilson intervals), the two
    counts taken as independent samples."""
    from pareto_atlas.quality.stats import wilson_interval

    p1, p2 = k1 / n1, k2 / n2
    (l1, u1), (l2, u2) = wilson_interval(k1, n1), wilson_interval(k2, n2)
    d = p1 - p2
    return d - ((p1 - l1) ** 2 + (u2 - p2) ** 2) ** 0.5, d + ((u1 - p1) ** 2 + (p2 - l2) ** 2) ** 0.5
