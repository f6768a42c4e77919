"""The atlas's terminal tables, rendered from its answer (atlas.answer): the winners per (model,
workload) and card, the models side by side, the quality evidence per configuration, the guard per
workload, and what `pick` prints. Nothing here computes a winner."""

from __future__ import annotations

import math

import pandas as pd
from rich.console import Console
from rich.table import Table

from pareto_atlas.atlas.answer import Answer
from pareto_atlas.atlas.infeasible import infeasible_summary
from pareto_atlas.atlas.pick import PickResult
from pareto_atlas.atlas.prefix import move_lines
from pareto_atlas.spec.study import Study


def _v(x, nd: int = 1) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


SHORT_QUALITY = {
    "measured": "meas",
    "inherited": "inh",
    "measured-effect": "effect",
    "kl-measured": "KL",
    "published": "pub",
    "carried": "carried",
    "reference": "ref",
    "prior": "prior",
    "unmeasured": "none",
}
SHORT_SPEED = {"measured": "meas", "calibrated": "sim", "uncalibrated": "uncal", "prior": "prior"}
EVIDENCE_KEY = (
    "rests on: quality / speed — meas measured, inh inherited from an arm with the same tokens, effect a "
    "measured eviction effect, KL a measured KL divergence, pub published, carried from a measured model of "
    "the family (or of the same architecture), ref the model itself; sim simulated with a calibration (± its "
    "error bar), uncal simulated on a part nothing fitted (a card's defaults, or a link no multi-GPU row of the "
    "card fitted: at least the default's bar); winners.md has "
    "the long form; sim* the weight format's kernel cost was fitted on no anchor or published measurement of "
    "it or its family on that card or its generation: derived from the card's roofline and its calibrated bandwidth"
)


def short_evidence(c) -> str:
    """A winner's evidence in a few words ("KL / sim ±16%"); EVIDENCE_KEY says what they mean."""
    q = SHORT_QUALITY.get(str(c.get("quality_evidence") or ""), str(c.get("quality_evidence") or ""))
    s = SHORT_SPEED.get(str(c.get("speed_evidence") or ""), str(c.get("speed_evidence") or ""))
    err = c.get("lat_rel_err")
    bar = "" if s == "meas" or err is None or err != err else f" ±{100 * err:.0f}%"
    star = "*" if s == "sim" and c.get("weights_cost") == "derived" else ""
    return f"{q} / {s}{star}{bar}"


def _load_short(c) -> str:
    return str(c.get("load") or "").replace(" of capacity)", ")")


def print_winners(cells: pd.DataFrame, console: Console, hardware: str = "all") -> None:
    """One table per (model, workload) the atlas answers for, one line per regime: the winner, where
    and under what load, what it rests on in short (winners.md and the page give the long form), and
    its figures; then why a regime has no winner, and the projected points with their commands."""
    mine = cells[cells.hardware == hardware]
    projected, notes = [], []
    model = mine["model"].fillna("").astype(str) if "model" in mine else pd.Series("", index=mine.index)
    for (m, wl), group in mine.groupby([model, mine.workload.astype(str)], sort=False):
        where = "the best card" if hardware == "all" else hardware
        task = str(group["quality_task"].iloc[0] or "") if "quality_task" in group else ""
        guard = f"; quality guard: {task}" if task else ""
        t = Table(
            title=f"{m or 'model'} · {wl}: dominant configuration per regime ({where}{guard})", title_justify="left"
        )
        for col, kw in (
            ("regime", {"no_wrap": True}),
            ("winner", {"overflow": "fold"}),
            ("on", {"no_wrap": True}),
            ("load", {}),
            ("quality rel [95 %]", {}),
            ("rests on", {"no_wrap": True}),
            ("TPOT p99 ms", {"justify": "right"}),
            ("tok/s", {"justify": "right"}),
            ("$/Mtok", {"justify": "right"}),
        ):
            t.add_column(col, **kw)
        for _, c in group.iterrows():
            if isinstance(c.get("projected_label"), str) and c.get("projected_label"):
                projected.append(c)
            if not c.label:
                notes.append(f"  {c.regime} · {m} · {wl}: {c.note}")
                t.add_row(c.regime, "— (see below)", "", "", "", "", "", "", "")
                continue
            kl = c.get("kld")
            kl = "" if kl is None or kl != kl else f" KL {kl:.2g}"
            dep = c.get("deployment")
            dep = f"\n{dep}" if isinstance(dep, str) and dep else ""  # the GPUs and parallelism, in words
            t.add_row(
                c.regime,
                f"{c.label}{' ▣' if c.stack_beats_singles else ''}"
                + (f" — {c.verdict_note}" if c.get("verdict_note") else "")
                + dep,
                str(c.get("win_hardware", "") or c.hardware),
                _load_short(c),
                f"{_v(c.quality_rel, 3)} [{_v(c.quality_rel_lo, 2)}–{_v(c.quality_rel_hi, 2)}]{kl}",
                short_evidence(c),
                _v(c.tpot_p99_ms),
                _v(c.throughput_tok_s),
                _v(c.cost_per_mtok, 3),
            )
        console.print(t)
    if len(mine):
        console.print(
            "  "
            + EVIDENCE_KEY
            + ("; ▣ a stack that beats every single method" if mine.stack_beats_singles.fillna(False).any() else ""),
            highlight=False,
            soft_wrap=True,
        )
    for n in notes:
        console.print(n, highlight=False, soft_wrap=True)
    for c in projected:
        console.print(
            f"  projected — measure to confirm ({c.regime}, {c.get('model') or ''}): {c.projected_label} on "
            f"{c.projected_hardware}, {c.objective} {c.projected_value:.4g} vs the winner's "
            f"{_v(c.value, 4) if c.label else '—'}; {c.projected_evidence}"
            + (f"\n    confirm: {c.confirm_command}" if c.confirm_command else ""),
            highlight=False,
            soft_wrap=True,
            markup=False,
        )  # the commands hold TOML tables ([[arms]])


def _score_benchmark(c) -> str:
    """The benchmark a winner's absolute score rests on: a published fallback's (MMLU where the model has
    no published IFEval), else the task that guards its workload."""
    b = c.get("quality_benchmark")
    return b if isinstance(b, str) and b else str(c.get("quality_task") or "")


def models_side_by_side(cells: pd.DataFrame) -> pd.DataFrame:
    """Where two or more models answer one workload ("which model should I serve?"): each model's
    best-card winner per regime, compared on the task's absolute score (a model's quality relative
    to its own baseline says nothing across models). `score_task` names the benchmark each score rests
    on: scores on different benchmarks are not comparable, and the printed table says so."""
    best = cells[(cells.hardware == "all") & cells.point_id.fillna("").astype(bool)]
    shared = best.groupby("workload").model.nunique()
    side = best[best.workload.isin(shared[shared >= 2].index)].sort_values(
        ["workload", "regime", "quality"], ascending=[True, True, False]
    )
    return side.assign(score_task=[_score_benchmark(c) for _, c in side.iterrows()])


def mixed_task_lines(side: pd.DataFrame) -> list[str]:
    """One line per (workload, regime) of the side-by-side table whose scores rest on different
    benchmarks: those scores are not one task's and are not ranked against each other."""
    lines = []
    scored = side[side.quality == side.quality]
    for (w, r), g in scored.groupby(["workload", "regime"], sort=False):
        if g.score_task.nunique() >= 2:
            on = ", ".join(f"{m} on {t}" for m, t in zip(g.model.astype(str), g.score_task))
            lines.append(f"  {w} · {r}: the scores rest on different benchmarks ({on}): not comparable")
    return lines


def print_models_side_by_side(cells: pd.DataFrame, console: Console) -> None:
    side = models_side_by_side(cells)
    if side.empty:
        return
    t = Table(
        title="Models side by side per workload: the absolute task score (not quality relative to each "
        "model's own baseline)",
        title_justify="left",
    )
    cols = (
        "workload",
        "regime",
        "model",
        "winner",
        "on",
        "score [95 %]",
        "score's task",
        "rests on",
        "TPOT p99 ms",
        "$/Mtok",
    )
    for col in cols:
        t.add_column(col)
    for _, c in side.iterrows():
        dep = c.get("deployment")  # the GPUs a replica holds and their parallelism (TP, EP, attention-DP)
        t.add_row(
            str(c.workload),
            c.regime,
            str(c.model),
            c.label + (f"\n{dep}" if isinstance(dep, str) and dep else ""),
            str(c.get("win_hardware", "")),
            "—" if c.quality != c.quality else f"{c.quality:.3f}",
            c.score_task,
            short_evidence(c),
            _v(c.tpot_p99_ms),
            _v(c.cost_per_mtok, 3),
        )
    console.print(t)
    for line in mixed_task_lines(side):
        console.print(line, highlight=False, soft_wrap=True)


def print_quality_evidence(study: Study, tab: pd.DataFrame, console: Console) -> pd.DataFrame:
    """Per measured quality configuration (`tab`: store.quality.arm_quality_table): GSM8K paired
    against the baseline, KL divergence and top-1 agreement, each with its interval, and the guard's
    verdict on each axis."""
    from pareto_atlas.atlas.regimes import kld_status, task_status

    if tab.empty:
        return tab
    q = study.quality
    tab["task_guard"] = task_status(
        tab["rel_lo"].to_numpy(float), tab["rel_hi"].to_numpy(float), tab["rel"].to_numpy(float), q.floor
    )
    tab["kld_guard"] = kld_status(tab, q.kld_max)
    t = Table(
        title=f"Quality evidence per configuration, against the baseline '{study.baseline.name}' "
        f"(95 % intervals; floor {q.floor:g} of the baseline, KL <= {q.kld_max or '—'} nats/token)"
    )
    for col in (
        "task",
        "arm",
        "score",
        "difference [95 %] (McNemar p)",
        "vs floor",
        "KL divergence [95 %]",
        "same top-1 token",
        "vs KL limit",
    ):
        t.add_column(col)
    for r in tab.itertuples():
        gsm = "—" if r.n is None or r.n != r.n else f"{int(r.k)}/{int(r.n)}"
        diff = (
            "baseline"
            if r.baseline
            else "—"
            if r.diff != r.diff
            else f"{r.diff:+.2f} [{r.diff_lo:+.2f}, {r.diff_hi:+.2f}] (p={r.mcnemar_p:.2f})"
        )
        kl = "—" if r.kld != r.kld else f"{r.kld:.4f} [{r.kld_lo:.4f}, {r.kld_hi:.4f}]"
        top1 = "—" if r.top1 != r.top1 else f"{100 * r.top1:.1f} % [{100 * r.top1_lo:.1f}, {100 * r.top1_hi:.1f}]"
        t.add_row(
            str(r.task),
            str(r.arm),
            gsm,
            diff,
            "in" if r.baseline else (r.task_guard or "—"),
            kl,
            top1,
            "in" if r.baseline else (r.kld_guard or "—"),
        )
    console.print(t)
    return tab


def print_guard_by_workload(study: Study, points: pd.DataFrame, console: Console) -> pd.DataFrame:
    """Where a model is answered for on workloads guarded by different tasks: each measured or
    carried configuration's verdict per workload, so that a verdict that differs shows."""
    from pareto_atlas.atlas.summary import TOKEN_KNOBS, guard_by_workload
    from pareto_atlas.spec.knobs import Knobs

    g = guard_by_workload(points, study.quality.floor)
    if g.empty:
        return g
    tasks = g.groupby("model")["quality_task"].nunique()
    g = g[g["model"].isin(tasks[tasks >= 2].index) & (g["verdict"] != "")]
    if g.empty:
        return g
    for m, of_model in g.groupby("model", sort=False):
        wls = list(dict.fromkeys(of_model["workload"].astype(str)))
        t = Table(
            title=f"{m}: the quality guard per workload (floor {study.quality.floor:g} of the baseline, 95 % intervals)",
            title_justify="left",
        )
        t.add_column("configuration", no_wrap=True)
        for w in wls:
            task = of_model.loc[of_model.workload == w, "quality_task"].iloc[0]
            t.add_column(f"{w} ({task})")
        t.add_column("differs")
        knob_cols = [c for c in TOKEN_KNOBS if c in of_model]
        for key, conf in of_model.groupby(knob_cols, sort=False):
            label = Knobs(**dict(zip(knob_cols, key))).label()
            cells = []
            for w in wls:
                r = conf[conf.workload == w]
                cells.append(
                    "—"
                    if r.empty
                    else f"{r.verdict.iloc[0]} {_v(r.quality_rel.iloc[0], 2)} "
                    f"[{_v(r.quality_rel_lo.iloc[0], 2)}–{_v(r.quality_rel_hi.iloc[0], 2)}]"
                )
            t.add_row(label, *cells, "yes" if conf.differs.iloc[0] else "")
        console.print(t)
    n = g.drop_duplicates(subset=["model", *[c for c in TOKEN_KNOBS if c in g]])
    console.print(
        f"  {int(n.differs.sum())} of {len(n)} configurations have a guard verdict that differs between workloads",
        highlight=False,
    )
    return g


def moved_lines(before: pd.DataFrame, after: pd.DataFrame, hw_of: dict) -> list[str]:
    """One line per best-card cell ("all") whose winner changed: from what, on which card, to what."""
    hw_b = before[before.hardware == "all"].set_index(["regime", "model", "workload"])
    hw_a = after[after.hardware == "all"].set_index(["regime", "model", "workload"])
    lines = []
    for key, a in hw_a.iterrows():
        b = hw_b.loc[key] if key in hw_b.index else None
        if b is None or (b.point_id or "") == (a.point_id or ""):
            continue
        where = lambda c: (
            f"{c.label} on {hw_of.get(c.point_id, '?')} ({c.value:.4g} {c.objective})"  # noqa: E731
            if c.label
            else "none"
        )
        lines.append(f"{key[0]} · {key[1]} · {key[2]}: {where(b)} -> {where(a)}")
    return lines


def print_atlas(study: Study, answer: Answer, quality: pd.DataFrame, console: Console) -> pd.DataFrame:
    """What `pareto-atlas atlas` prints: the head line, the quality evidence (`quality`: the store's
    arm_quality_table), the guard per workload, the winners on the best card (and on this machine,
    where it is not always the best card of a model it runs), the models side by side. Returns the
    cells with the card each winner runs on."""
    points, cells = answer.points, answer.placed_cells
    n_meas = int((points.provenance == "measured").sum())
    console.print(
        f"[bold]atlas[/] {study.name}: {len(points)} points ({n_meas} measured, "
        f"{len(points) - n_meas} simulated or prior), {len(answer.regimes)} regimes, "
        f"quality floor {study.quality.floor:.0%} of "
        + (f"the baseline arm '{study.baseline.name}'" if study.measures else "the model at its own precision")
        + " on the 95 % interval"
        + (f", KL divergence <= {study.quality.kld_max:g} where measured" if study.quality.kld_max else "")
        + (
            "; priors may win (allow_priors)"
            if study.quality.allow_priors
            else "; winners need measured evidence (priors are listed as projected)"
        )
    )
    print_quality_evidence(study, quality, console)
    print_guard_by_workload(study, points, console)
    print_infeasible(points, console)
    print_winners(cells, console, "all")
    models = answer.models
    on_cpu = set(models[(points.hardware == "this-cpu").to_numpy()])
    if any(set(points.hardware[models == m]) != {"this-cpu"} for m in on_cpu):
        print_winners(cells, console, "this-cpu")
    print_models_side_by_side(cells, console)
    if len(answer.prefix_moves):  # what prefix caching is worth, where a workload shares (atlas.prefix)
        for line in move_lines(answer.prefix_moves):
            console.print(line, highlight=False, markup=False, soft_wrap=True)
    return cells


def print_infeasible(points: pd.DataFrame, console: Console) -> None:
    """Per (model, card), how many configurations were infeasible and why (atlas.infeasible)."""
    for entry in infeasible_summary(points):
        for line in entry.lines():
            console.print(line, highlight=False, markup=False, soft_wrap=True)


def print_pick(result: PickResult, model: str, workload: str, console: Console) -> None:
    """One question's answer: the (model, workload) it is about, then the result's own lines."""
    console.print(f"[bold]{model}[/] · {workload}", highlight=False)
    console.print(result.summary(), highlight=False, markup=False)  # confirm commands hold [[arms]]


def print_moved(before: Answer, after: Answer, prices: dict[str, float], console: Console) -> None:
    """Where the best-card regime winners moved under new prices, one line per moved cell."""
    moved = moved_lines(before.best_cells, after.best_cells, dict(zip(before.points.point_id, before.points.hardware)))
    console.print(
        f"regime winners (best card) after repricing {', '.join(f'{k} ${v:g}/h' for k, v in prices.items())}: "
        + (f"{len(moved)} moved" if moved else "none moved"),
        highlight=False,
    )
    for line in moved:
        console.print("  " + line, highlight=False, markup=False)
