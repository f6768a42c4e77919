"""What the stages print as they go: each anchor's and each quality arm's progress line and result,
the lines under an arm's score, and each arm's agreement with the baseline."""

from __future__ import annotations

import time
from typing import Callable

from rich.console import Console
from rich.markup import escape

from pareto_atlas.spec.study import Study
from pareto_atlas.store import Store

Progress = Callable[[str, dict], None]
# The half-width (absolute, on the paired difference from the baseline) the quality stage says n for.
POWER_HALFWIDTH = 0.05


def fmt(v, unit: str = "", nd: int = 1) -> str:
    return "—" if v is None or v != v else f"{v:.{nd}f}{unit}"


def measure_progress(c: Console) -> Progress:
    """The measure stage's progress: a line per anchor (with an ETA from the anchors so far), a dot per
    request, then its figures or why it failed."""
    spent: list[float] = []  # seconds per anchor measured so far: the ETA of the rest

    def on(ev: str, info: dict) -> None:
        if ev == "consent":
            c.print(f"  {info['line']}", highlight=False, markup=False, soft_wrap=True)
        elif ev == "skip":
            c.print(f"  [{info['i'] + 1}/{info['n']}] {info['arm']}: already measured, kept")
        elif ev == "anchor":
            spent.append(time.monotonic())
            left = info["n"] - info["i"]
            eta = "" if len(spent) < 2 else f" (ETA ~{(spent[-1] - spent[0]) / (len(spent) - 1) * left / 60:.1f} min)"
            c.print(f"  [{info['i'] + 1}/{info['n']}]{eta} {info['arm']}: ", end="", highlight=False)
        elif ev == "request":
            c.print(".", end="")
        elif ev == "done":
            m = info["metrics"]
            if info["status"] == "ok":
                c.print(
                    f" ok  TTFT p50 {fmt(m.get('ttft', {}).get('p50'), ' ms')}  "
                    f"TPOT p50 {fmt(m.get('tpot', {}).get('p50'), ' ms')}  "
                    f"{fmt(m.get('throughput_tok_s'), ' tok/s')}  rejected {m.get('n_rejected', 0)}"
                    + (f"  start-up {m['engine_startup_s']:.0f} s" if m.get("engine_startup_s") else "")
                    + (f"  [red]{escape(m['error_line'])}[/]" if m.get("error_line") else ""),
                    soft_wrap=True,
                )
                # an anchor about reuse (cache on or a workload that shares): what the server reused; every
                # anchor records it, but unique prompts reuse nothing worth a line
                if m.get("prefix_hit_rate") is not None and (info.get("prefix", True) or m["prefix_hit_rate"] > 0):
                    c.print(
                        f"      prefix cache: hit rate {m['prefix_hit_rate']:.1%} of prompt tokens (as the server "
                        f"reports them), TTFT p50 {fmt(m.get('ttft', {}).get('p50'), ' ms')} "
                        f"p99 {fmt(m.get('ttft', {}).get('p99'), ' ms')}",
                        highlight=False,
                    )
                    if m.get("shared_prefix_line"):  # what the prompts share, counted by the server's tokenizer
                        c.print(f"      {m['shared_prefix_line']}", highlight=False)
                if m.get("decode_bw_line"):
                    c.print(f"      {m['decode_bw_line']}", highlight=False)
                if m.get("contended"):
                    c.print(f"      {m['contention_line']}; measured again at the end", highlight=False)
            else:
                c.print(f" [red]failed[/]: {info['reason']}", highlight=False, soft_wrap=True)
        elif ev == "remeasured":
            after = info["after"]
            c.print(
                f" again: other work {info['before']:.2f} -> "
                f"{'?' if after is None else f'{after:.2f}'} cores; kept the {info['kept']} try"
                + (
                    f" (TTFT p50 {fmt(info['metrics'].get('ttft', {}).get('p50'), ' ms')}, TPOT p50 "
                    f"{fmt(info['metrics'].get('tpot', {}).get('p50'), ' ms')})"
                    if info["kept"] == "new"
                    else ""
                ),
                highlight=False,
            )

    return on


def quality_progress(c: Console, study: Study) -> Progress:
    """The quality stage's progress: a line per arm, a dot per item, then its score and its task's lines."""

    def on(ev: str, info: dict) -> None:
        if ev == "consent":
            c.print(f"  {info['line']}", highlight=False, markup=False, soft_wrap=True)
        elif ev == "skip":
            c.print(f"  {info['arm']}: already scored, kept")
        elif ev == "start":
            c.print(f"  {info['arm']}: ", end="")
        elif ev == "item":
            c.print(".", end="")
        elif ev == "done":
            if info["status"] == "ok":
                s = info["summary"]
                st = s["strict"]
                c.print(f" {st['k']}/{st['n']} = {st['p']:.3f}  [95% {st['lo']:.2f}–{st['hi']:.2f}]")
                for line in task_lines(study, s):
                    c.print(f"    {line}", highlight=False)
            else:
                c.print(f" [red]failed[/]: {info['reason']}", highlight=False, soft_wrap=True)

    return on


def task_lines(study: Study, s: dict) -> list[str]:
    """The task-specific lines under an arm's score (from its saved summary), as its module words them."""
    from pareto_atlas.quality.tasks import task

    return task(study.quality.task).summary_lines(study, s)


def print_agreement(c: Console, study: Study, store: Store, task: str) -> None:
    """Each scored arm of `task` against the baseline, item by item, and the items a ±POWER_HALFWIDTH
    interval on the difference would take at these rates."""
    from pareto_atlas.quality.campaign import agreement_table
    from pareto_atlas.quality.stats import items_for_halfwidth
    from pareto_atlas.store.quality import quality_table

    agree = agreement_table(study, store)
    base = quality_table(study, store).get(study.baseline.knobs().quality_key()) or {}
    for _, a in (agree[agree.task == task] if len(agree) else agree).iterrows():
        c.print(
            f"  {a.task} {a.arm} vs {a.reference}: same answer on {a.answer_agreement:.0%} of {a.n} items "
            f"[95% {a.answer_agreement_lo:.0%}–{a.answer_agreement_hi:.0%}], identical output {a.identical_outputs:.0%}, "
            f"first divergence at {a.unit} {fmt(a.median_first_divergence, nd=0)} (median); flips: "
            f"{a.right_to_wrong} right->wrong, {a.wrong_to_right} wrong->right (exact McNemar p = {a.mcnemar_p:.3g})",
            highlight=False,
        )
        need = items_for_halfwidth(int(a.right_to_wrong + a.wrong_to_right), int(a.n), POWER_HALFWIDTH, p=base.get("p"))
        c.print(
            f"    items for a ±{POWER_HALFWIDTH:.0%} interval on the difference at these rates: "
            f"{'at least ' if need['floored'] else ''}{need['paired']} paired"
            + (f", {need['unpaired']} unpaired" if "unpaired" in need else ""),
            highlight=False,
        )
