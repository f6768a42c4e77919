"""The pipeline's stages as functions of a context (study, store, output folder, console).

Each stage reads what it needs from the store and writes its results back, so any stage can be
run alone, repeated, or resumed; `build` runs them in order.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from pareto_atlas.measure.consent import Consent, authorize
from pareto_atlas.measure.weights import ModelError
from pareto_atlas.scale import Executor, InProcess, executor_for
from pareto_atlas.spec.study import QualityTask, Study, StudyError, load_study
from pareto_atlas.store import Store, StoreError

USER_ERRORS: tuple[type[BaseException], ...] = (StudyError, StoreError, ModelError, ValueError, FileNotFoundError)


@dataclass
class Context:
    study: Study
    out: Path
    store: Store
    console: Console
    executor: Executor = field(default_factory=InProcess)
    consent: Consent | None = None     # what the user allowed the study (None: their config file alone)

    @classmethod
    def open(cls, study: str, out: Path | None, console: Console, ray: str | None = None,
             store: Path | None = None, consent: Consent | None = None) -> "Context":
        s = load_study(study)
        out = Path(out) if out else Path("atlas-out") / s.name
        out.mkdir(parents=True, exist_ok=True)
        executor = executor_for(ray)     # first: an unreachable cluster fails before the store is opened
        return cls(s, out, Store(store or default_store(s, out)), console, executor, consent)

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc) -> None:
        self.store.close()
        self.executor.close()


def default_store(study: Study, out: Path) -> Path:
    """<out>/store.duckdb; a study that compares with another (`compare_with`) shares that study's
    store (atlas-out/<its name>/store.duckdb) unless --out is given, so both engines' anchors meet."""
    if study.compare_with and out == Path("atlas-out") / study.name:
        return Path("atlas-out") / load_study(study.compare_with).name / "store.duckdb"
    return out / "store.duckdb"


def _fmt(v, unit: str = "", nd: int = 1) -> str:
    return "—" if v is None or v != v else f"{v:.{nd}f}{unit}"


def _needs_arms(ctx: Context, stage: str) -> None:
    if not ctx.study.measures:
        raise StudyError(f"{stage}: study {ctx.study.name!r} has no [[arms]], nothing to run on an engine; "
                         f"`build` runs simulate, atlas and report on published evidence")


def _consented(ctx: Context) -> None:
    """Refuse a study that asks for what the user has not allowed before anything is printed or
    started; the campaigns check again (for callers of the library) and print what goes where."""
    authorize(ctx.study, ctx.consent if ctx.consent is not None else Consent.from_user())


def measure(ctx: Context, arms: list[str] | None = None) -> None:
    from pareto_atlas.calibrate.stage import this_machine
    from pareto_atlas.measure.campaign import run_campaign

    _needs_arms(ctx, "measure")
    _consented(ctx)
    c = ctx.console
    c.print(f"[bold]measure[/] {ctx.study.name}: {len(arms or ctx.study.arms)} arm(s) on {ctx.study.engine.name}, "
            f"{ctx.study.workload.prompt_tokens} prompt / {ctx.study.workload.output_tokens} output tokens, "
            f"{ctx.study.load.requests} requests (+{ctx.study.load.warmup} warm-up) per arm unless it sets its own")
    t0 = time.monotonic()
    local = ctx.study.engine.name in ("llamacpp", "vllm")     # engines started on this machine
    bandwidth = this_machine(ctx.study, ctx.store).mem_bw_gbs if local else None

    spent: list[float] = []      # seconds per anchor measured so far: the ETA of the rest

    def on(ev: str, info: dict) -> None:
        if ev == "consent":
            c.print(f"  {info['line']}", highlight=False, markup=False, soft_wrap=True)
        elif ev == "skip":
            c.print(f"  [{info['i'] + 1}/{info['n']}] {info['arm']}: already measured, kept")
        elif ev == "anchor":
            spent.append(time.monotonic())
            left = info["n"] - info["i"]
            eta = "" if len(spent) < 2 else \
                f" (ETA ~{(spent[-1] - spent[0]) / (len(spent) - 1) * left / 60:.1f} min)"
            c.print(f"  [{info['i'] + 1}/{info['n']}]{eta} {info['arm']}: ", end="", highlight=False)
        elif ev == "request":
            c.print(".", end="")
        elif ev == "done":
            m = info["metrics"]
            if info["status"] == "ok":
                c.print(f" ok  TTFT p50 {_fmt(m.get('ttft', {}).get('p50'), ' ms')}  "
                        f"TPOT p50 {_fmt(m.get('tpot', {}).get('p50'), ' ms')}  "
                        f"{_fmt(m.get('throughput_tok_s'), ' tok/s')}  rejected {m.get('n_rejected', 0)}"
                        + (f"  start-up {m['engine_startup_s']:.0f} s" if m.get("engine_startup_s") else "")
                        + (f"  [red]{escape(m['error_line'])}[/]" if m.get("error_line") else ""), soft_wrap=True)
                if m.get("decode_bw_line"):
                    c.print(f"      {m['decode_bw_line']}", highlight=False)
                if m.get("contended"):
                    c.print(f"      {m['contention_line']}; measured again at the end", highlight=False)
            else:
                c.print(f" [red]failed[/]: {info['reason']}", highlight=False, soft_wrap=True)
        elif ev == "remeasured":
            after = info["after"]
            c.print(f" again: other work {info['before']:.2f} -> "
                    f"{'?' if after is None else f'{after:.2f}'} cores; kept the {info['kept']} try"
                    + (f" (TTFT p50 {_fmt(info['metrics'].get('ttft', {}).get('p50'), ' ms')}, TPOT p50 "
                       f"{_fmt(info['metrics'].get('tpot', {}).get('p50'), ' ms')})" if info["kept"] == "new" else ""),
                    highlight=False)

    try:
        s = run_campaign(ctx.study, ctx.store, arms=arms, on_progress=on, bandwidth_gbs=bandwidth, executor=ctx.executor,
                         consent=ctx.consent)
    except StoreError:
        c.print()       # the anchor's progress dots end their line; the error gets its own
        raise
    again = f", {s.remeasured} measured again (other work beside them)" if s.remeasured else ""
    c.print(f"measure: {s.measured} measured, {s.skipped} kept from earlier runs, {s.failed} failed{again} "
            f"({time.monotonic() - t0:.0f} s)")


def parse_n(value: int | str | None, task: str) -> int | None:
    """--n: a positive count, or 'all' (the task's every item); None: the study's n."""
    from pareto_atlas.quality.campaign import TASK_SIZES

    if value is None or isinstance(value, int):
        n = value
    elif value.strip().lower() == "all":
        if task not in TASK_SIZES:
            raise ValueError(f"--n: 'all' is not defined for {task}; give a count (items per cell: "
                             f"{'subtask and length' if task == 'ruler' else 'length and depth'})")
        n = TASK_SIZES[task]
    else:
        try:
            n = int(value)
        except ValueError:
            raise ValueError(f"--n: {value!r} is not allowed; a positive whole number or 'all'") from None
    if n is not None and n < 1:
        raise ValueError(f"--n: {n} is not allowed; a positive whole number or 'all'")
    top = TASK_SIZES.get(task, 1000)      # retrieval, ruler: items per cell
    if n is not None and n > top:
        raise ValueError(f"--n: {n} is not allowed; 1..{top} ({task} has {top} items{'' if task in TASK_SIZES else ' a cell at most'}) or 'all'")
    return n


def quality(ctx: Context, arms: list[str] | None = None, n: int | str | None = None, task: str | None = None,
            max_tokens: int | None = None) -> None:
    """Score the study's quality arms: on `task` when given, else on the study's task and then on
    each of its further [quality] tasks (each guards its own workloads), with that task's n."""
    _needs_arms(ctx, "quality")
    _consented(ctx)
    if task is not None:
        return _quality_task(ctx, arms, n, task, max_tokens)
    q = ctx.study.quality
    for t in q.all_tasks():
        _quality_task(ctx, arms, n if t == q.task else (n if n is not None else q.tasks[t]), t, max_tokens)


def _quality_task(ctx: Context, arms: list[str] | None, n: int | str | None, task: str,
                  max_tokens: int | None) -> None:
    from pareto_atlas.quality.campaign import agreement_table, max_tokens_for, run_quality_campaign, with_task
    from pareto_atlas.spec.study import QualitySpec

    c = ctx.console
    try:
        study = with_task(ctx.study, task, max_tokens)
    except ValueError as e:      # pydantic's error: say which field and what is allowed, in one line
        if max_tokens is not None and max_tokens < 16:
            raise ValueError(f"--max-tokens: {max_tokens} is not allowed; at least 16") from e
        raise ValueError(f"--task: {task!r} is not allowed; one of {', '.join(QUALITY_TASKS)}") from e
    q = study.quality
    n = parse_n(n, q.task)
    if q.task == "ruler":
        if n:      # --n is items per cell: part of what the run scores (its id)
            q = QualitySpec.model_validate(q.model_dump(exclude_unset=True) | {"ruler_per_cell": n})
            study = study.model_copy(update={"quality": q})
        if max(q.ruler_lengths) > study.engine.n_ctx:
            raise ValueError(f"quality.ruler_lengths: {max(q.ruler_lengths)} tokens is not allowed: within "
                             f"engine.n_ctx = {study.engine.n_ctx}")
    what = {"gsm8k": f"{q.task} ({q.mode}), n = {n or q.n} per arm",
            "humaneval": f"HumanEval pass@1 (EvalPlus-style chat prompt, greedy, max_tokens {max_tokens_for(q)}, "
                         f"answers run in the sandbox), n = {n or q.n} per arm",
            "ifeval": f"IFEval (strict and loose), max_tokens {max_tokens_for(q)}, n = {n or q.n} per arm",
            "ruler": f"RULER {', '.join(q.ruler_subtasks)} at {q.ruler_lengths} tokens (whole requests), "
                     f"{q.ruler_per_cell} per subtask and length",
            }.get(q.task, f"needle retrieval at {q.retrieval_lengths} tokens, "
                          f"{n or q.retrieval_per_cell} per length and depth")
    c.print(f"[bold]quality[/] {what}")

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
                for line in _task_lines(study, s):
                    c.print(f"    {line}", highlight=False)
            else:
                c.print(f" [red]failed[/]: {info['reason']}", highlight=False, soft_wrap=True)

    try:
        run_quality_campaign(study, ctx.store, arms=arms, n=n, on_progress=on, executor=ctx.executor, consent=ctx.consent)
    except StoreError:
        c.print()       # the arm's progress dots end their line; the error gets its own
        raise
    agree = agreement_table(study, ctx.store)
    from pareto_atlas.quality.stats import items_for_halfwidth
    from pareto_atlas.store.quality import quality_table

    base = quality_table(study, ctx.store).get(study.baseline.knobs().quality_key()) or {}
    for _, a in (agree[agree.task == q.task] if len(agree) else agree).iterrows():
        c.print(f"  {a.task} {a.arm} vs {a.reference}: same answer on {a.answer_agreement:.0%} of {a.n} items "
                f"[95% {a.answer_agreement_lo:.0%}–{a.answer_agreement_hi:.0%}], identical output {a.identical_outputs:.0%}, "
                f"first divergence at {a.unit} {_fmt(a.median_first_divergence, nd=0)} (median); flips: "
                f"{a.right_to_wrong} right->wrong, {a.wrong_to_right} wrong->right (exact McNemar p = {a.mcnemar_p:.3g})",
                highlight=False)
        need = items_for_halfwidth(int(a.right_to_wrong + a.wrong_to_right), int(a.n), POWER_HALFWIDTH, p=base.get("p"))
        c.print(f"    items for a ±{POWER_HALFWIDTH:.0%} interval on the difference at these rates: "
                f"{'at least ' if need['floored'] else ''}{need['paired']} paired"
                + (f", {need['unpaired']} unpaired" if "unpaired" in need else ""), highlight=False)


def _task_lines(study: Study, s: dict) -> list[str]:
    """The task-specific lines under an arm's score (from its saved summary)."""
    from pareto_atlas.quality.humaneval import PUBLISHED_PASS_AT_1

    task = study.quality.task
    out = []
    if task == "humaneval":
        out.append("sandbox outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(s.get("sandbox_outcomes", {}).items())))
        ref = PUBLISHED_PASS_AT_1.get(study.model.name)
        if ref is not None:
            out.append(f"reference (not an input): the maker reports HumanEval pass@1 {ref} % for {study.model.name} "
                       "(Qwen2.5-Coder technical report, EvalPlus harness, unquantized weights)")
    elif task == "ruler":
        for c in s.get("ruler_cells", []):
            st = c["strict"]
            out.append(f"{c['subtask']} at {c['context_tokens']}: {st['k']}/{st['n']} = {st['p']:.3f} "
                       f"[95% {st['lo']:.2f}–{st['hi']:.2f}], string_match_all {c['string_match_all']:.3f}")
    elif task == "ifeval":
        for key in ("prompt_strict", "prompt_loose", "instruction_strict", "instruction_loose"):
            sc = s.get(key)
            if sc:
                out.append(f"{key.replace('_', '-level ', 1)}: {sc['k']}/{sc['n']} = {sc['p']:.3f} "
                           f"[95% {sc['lo']:.2f}–{sc['hi']:.2f}]")
        apart = s.get("sentence_count")
        if apart:
            out.append(f"sentence-count prompts (counted by our own splitter, not NLTK punkt): {apart['n_prompts']} "
                       f"prompts, strict {apart['prompt_strict']['k']}/{apart['n_prompts']}; "
                       f"without them: prompt-level strict {apart['without']['prompt_strict']['p']:.3f}")
    return out


def evict(ctx: Context, policies: list[str] | None = None, keeps: list[float] | None = None,
          task: str | None = None, n: int | None = None, required: bool = True) -> None:
    """The study's KV-eviction sweep in transformers. `required`: without torch it is an error (the
    `evict` command), else a skip with a note (the build's stage)."""
    from pareto_atlas.quality.eviction.stage import evict_study

    t0 = time.monotonic()
    if not required:
        try:
            from pareto_atlas.quality.eviction.model import require_torch
            require_torch()
        except ImportError:
            ctx.console.print("evict: skipped, torch is not installed (pip install 'pareto-atlas[eviction]'); "
                              "eviction stacks stay projected", highlight=False, markup=False)
            return
    rows = evict_study(ctx.study, ctx.store, ctx.console, policies=policies, keeps=keeps, task=task, n=n)
    ctx.console.print(f"evict: {len(rows)} points (full cache included) in the store ({time.monotonic() - t0:.0f} s)")


def kld(ctx: Context, arms: list[str] | None = None, tokens: int | None = None, keep_base: bool = False,
        required: bool = False) -> None:
    """KL divergence and top-1 agreement of each quality configuration against the baseline.
    `required`: a missing llama-perplexity (or a non-llama.cpp study) is an error, not a skip."""
    from pareto_atlas.quality.kld import KldError
    from pareto_atlas.quality.kld_stage import KldUnavailable, kld_study

    _needs_arms(ctx, "kld")
    t0 = time.monotonic()
    try:
        rows = kld_study(ctx.study, ctx.store, ctx.console, arms=arms, tokens=tokens, keep_base=keep_base,
                         workdir=ctx.out / "kld")
    except KldUnavailable as e:
        if required:
            raise
        ctx.console.print(f"{e}; skipped", highlight=False)
        return
    except KldError as e:       # the baseline's run failed: nothing can be compared
        raise ValueError(f"kld: {e}") from None
    ctx.console.print(f"kld: {len(rows)} configuration(s) in the store ({time.monotonic() - t0:.0f} s)")


def calibrate(ctx: Context, allow: tuple[str, ...] = ()) -> None:
    from pareto_atlas.calibrate.stage import calibrate_study

    _needs_arms(ctx, "calibrate")
    calibrate_study(ctx.study, ctx.store, ctx.console, allow=allow)


PEER_FORMATS = ("vllm-bench", "guidellm")
QUALITY_TASKS = QualityTask.__args__
# The half-width (absolute, on the paired difference from the baseline) the quality stage says n for.
POWER_HALFWIDTH = 0.05


def _knobs(text: str | None):
    """ "weights=FP8,kv=fp8" as Knobs (a bad field is a one-line error naming it)."""
    from pareto_atlas.spec.knobs import Knobs

    if not text:
        return Knobs()
    pairs = [p.split("=", 1) for p in text.split(",") if p.strip()]
    if any(len(p) != 2 for p in pairs):
        raise ValueError(f"--knobs {text!r}: write name=value pairs separated by commas, e.g. weights=FP8,kv=fp8")
    d = {k.strip(): v.strip() for k, v in pairs}
    return Knobs.from_dict({k: (type(getattr(Knobs(), k))(v) if hasattr(Knobs(), k) else v) for k, v in d.items()})


def import_files(ctx: Context, files: list[Path], hardware: str | None = None, model: str | None = None,
                 engine: str | None = None, knobs: str | None = None, output_tokens: int | None = None,
                 allow: tuple[str, ...] = ()) -> None:
    """Import result files of other tools into the study's store, then calibrate the cards they name."""
    from pareto_atlas.calibrate.imported import calibrate_imported
    from pareto_atlas.measure.imports import import_paths

    outcomes = import_paths(ctx.store, ctx.study.name, files, hardware=hardware, model=model, engine=engine,
                            knobs=_knobs(knobs), requested_output=output_tokens)
    for o in outcomes:
        ctx.console.print(f"[bold]import[/] {o.path}: {o.tool}@{o.version}, sha256 {o.sha256[:12]}: {o.status}"
                          f"{f', {len(o.anchors)} anchor(s)' if o.anchors else ''}", highlight=False, soft_wrap=True)
        ctx.console.print("\n".join(o.lines), markup=False, highlight=False, soft_wrap=True)
    if not hardware or not model:
        ctx.console.print("  no --hardware/--model card named: anchors kept, no card calibrated", highlight=False)
        return
    calibrate_imported(ctx.study.name, ctx.store, ctx.console, allow)


def export_peer(ctx: Context, fmt: str) -> None:
    from pareto_atlas.measure.imports.export import export_peer as write

    paths = write(ctx.store, ctx.study.name, ctx.out / "export" / fmt, fmt)
    ctx.console.print(f"exported {len(paths)} anchor(s) with their requests as {fmt} files to "
                      f"{ctx.out / 'export' / fmt}", highlight=False)


def published(ctx: Context, tables: list[Path] | None = None, engines: list[str] | None = None,
              hardware: list[str] | None = None, multi_gpu: bool = False) -> None:
    from pareto_atlas.calibrate.published_stage import multigpu_study, published_study

    t0 = time.monotonic()
    published_study(ctx.study.name, ctx.store, ctx.console, tables, engines, hardware)
    if multi_gpu:
        multigpu_study(ctx.console, engines, hardware)
    ctx.console.print(f"published: done in {time.monotonic() - t0:.0f} s")


def published_quality(console: Console, tables: list[Path], model: str | None, task: str) -> None:
    from pareto_atlas.quality.published import guard_choice, load_published_quality, summary_lines

    tab = load_published_quality(tables)
    for line in summary_lines(tab):
        console.print(line, highlight=False, soft_wrap=True)
    if model is None:
        return
    rows = tab[tab.model == model]
    if rows.empty:
        raise ValueError(f"--model {model!r}: no published scores; models: {', '.join(sorted(set(tab.model)))}")
    from pareto_atlas.quality.published import published_for

    for (w, kv, ev), _ in rows.groupby(["weights", "kv", "eviction"], dropna=False):
        hits = published_for(model, str(w or "BF16"), str(kv or "f16"), str(ev or "none"),
                             0.5 if str(ev or "none") != "none" else 1.0, table=tab)
        best = guard_choice(hits, task)
        used = (f"guard uses {best.benchmark}: rel {best.rel:.3f} [{best.rel_lo:.3f}, {best.rel_hi:.3f}] ({best.method})"
                if best is not None and not best.informational else "no score the guard can use (informational only)")
        console.print(f"  {model} weights {w or 'its own'} kv {kv or 'f16'} eviction {ev or 'none'}: {len(hits)} "
                      f"score(s); {used}", highlight=False, soft_wrap=True)


def simulate(ctx: Context) -> None:
    from pareto_atlas.simulate.stage import simulate_study

    simulate_study(ctx.study, ctx.store, ctx.console, executor=ctx.executor)


def atlas(ctx: Context):
    from pareto_atlas.atlas.stage import atlas_study

    return atlas_study(ctx.study, ctx.store, ctx.console)


def report(ctx: Context) -> dict:
    from pareto_atlas.report.stage import report_study

    return report_study(ctx.study, ctx.store, ctx.out, ctx.console)


def pick(ctx: Context, constraint: str, objective: str, maximize: bool, prices: list[str],
         allow_priors: bool = False, model: str | None = None, workload: str | None = None) -> None:
    from pareto_atlas.atlas.stage import pick_study

    pick_study(ctx.study, ctx.store, ctx.console, constraint, objective, maximize, prices, allow_priors, model, workload)


# First-build guesses of each stage's seconds on a 2-core machine, per unit of its work (anchors,
# GSM8K items, KL arms); later builds use the times the last one recorded in <out>/build_times.json.
# (measured 2026-11-30 on this 2-core machine: 29 s an anchor, 5.1 s a GSM8K item at 4 slots, 20 s a
# KL configuration); building llama-perplexity the first time adds TOOLS_BUILD_S to the quality stage.
FIRST_GUESS_S = {"measure": 30.0, "quality": 5.5, "kld": 25.0, "evict": 40.0, "calibrate": 30.0, "simulate": 20.0,
                 "atlas": 2.0, "report": 15.0}
TOOLS_BUILD_S = 420.0


def _work(study: Study, stage: str) -> float:
    """Units of work of a stage in FIRST_GUESS_S's terms."""
    if stage == "measure":
        return sum(a.repeats or study.load.repeats for a in study.arms)
    if stage == "quality":
        return sum(1 for a in study.arms if a.quality) * (study.quality.n + sum(study.quality.tasks.values()))
    if stage == "kld":
        return len({a.knobs().quality_key() for a in study.arms}) + 1
    if stage == "evict":        # the full cache and each (policy, keep), each a pass over the items
        return 1 + len(study.eviction.policies) * len(study.eviction.keeps)
    return 1.0


class BuildClock:
    """Each stage's time, the elapsed total and an ETA for the stages still to run."""

    def __init__(self, ctx: Context, stages: list[str]):
        self.ctx, self.stages, self.t0 = ctx, stages, time.monotonic()
        self.path = ctx.out / "build_times.json"
        try:
            self.last = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.last = {}
        self.took: dict[str, float] = {}

    def guess(self, stage: str) -> float:
        if stage in self.last:
            return float(self.last[stage])
        extra = 0.0
        if stage == "quality" and "kld" in self.stages:
            from pareto_atlas.quality.kld import llama_perplexity

            extra = TOOLS_BUILD_S if llama_perplexity() is None and TOOLS_SCRIPT.is_file() else 0.0
        return FIRST_GUESS_S[stage] * _work(self.ctx.study, stage) + extra

    def start(self) -> None:
        eta = sum(self.guess(st) for st in self.stages)
        src = "the last build's times" if self.last else "first-build guesses"
        self.ctx.console.print(f"[bold]build[/] {self.ctx.study.name}: stages {', '.join(self.stages)}; "
                               f"ETA ~{eta / 60:.0f} min ({src})", highlight=False)

    def done(self, stage: str, t_stage: float) -> None:
        self.took[stage] = round(time.monotonic() - t_stage, 1)
        rest = self.stages[self.stages.index(stage) + 1:]
        eta = sum(self.guess(st) for st in rest)
        self.ctx.console.print(f"[dim]── {stage}: {self.took[stage]:.0f} s · elapsed {(time.monotonic() - self.t0) / 60:.1f} min"
                               + (f" · ETA ~{eta / 60:.1f} min for {', '.join(rest)}" if rest else "") + "[/]",
                               highlight=False)
        try:
            self.path.write_text(json.dumps({**self.last, **self.took}, indent=1))
        except OSError:
            pass


TOOLS_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "build_llama_tools.sh"


def _start_tools_build(ctx: Context) -> subprocess.Popen | None:
    """Start building llama-perplexity (for the KL stage) in the background, niced, when it is
    missing: while GSM8K is scored, whose answers do not depend on timing; the anchors, which do,
    are measured before it starts. None when there is nothing to build or no script to build it."""
    from pareto_atlas.quality.kld import llama_perplexity

    if ctx.study.engine.name != "llamacpp" or llama_perplexity() is not None or not TOOLS_SCRIPT.is_file():
        return None
    log = ctx.out / "llama_tools_build.log"
    ctx.console.print(f"building llama.cpp's llama-perplexity in the background (niced; about 7 min on 2 cores, once) "
                      f"while GSM8K is scored; log: {log}", highlight=False)
    with open(log, "wb") as f:
        # its own process group, so an interrupted build stops its compilers too
        return subprocess.Popen(["nice", "-n", "10", str(TOOLS_SCRIPT)], stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _wait_tools_build(ctx: Context, proc: subprocess.Popen | None) -> None:
    if proc is None:
        return
    t = time.monotonic()
    rc = proc.wait()
    tail = (ctx.out / "llama_tools_build.log").read_text(errors="replace").strip().splitlines()[-1:] or [""]
    ctx.console.print(f"llama-perplexity build {'done' if rc == 0 else f'failed ({tail[0]})'}"
                      f" (waited {time.monotonic() - t:.0f} s for it)", highlight=False)


# The stages that need anchors or quality runs on the study's engine: a study without arms skips them.
MEASURING = ("measure", "quality", "kld", "evict", "calibrate")


def build_stages(study: Study, with_quality: bool = True) -> list[str]:
    """The stages `build` runs for a study, in order: without arms nothing is measured; the KL
    divergence runs where [quality] kld is on, the eviction sweep where [eviction] build is."""
    names = ["measure", "quality", "kld", "evict", "calibrate", "simulate", "atlas", "report"]
    drop = set() if study.eviction.build else {"evict"}
    if not study.measures:
        drop |= set(MEASURING)
    elif not with_quality:
        drop |= {"quality", "kld", "evict"}
    elif not study.quality.kld:
        drop.add("kld")
    return [n for n in names if n not in drop]


def build(ctx: Context, with_quality: bool = True) -> None:
    stages_of = {"measure": measure, "quality": quality, "kld": kld, "evict": lambda c: evict(c, required=False),
                 "calibrate": calibrate, "simulate": simulate, "atlas": atlas, "report": report}
    plan = {name: stages_of[name] for name in build_stages(ctx.study, with_quality)}
    if not ctx.study.measures:
        ctx.console.print(f"{ctx.study.name}: no [[arms]], nothing to measure on an engine: skipping "
                          f"{', '.join(MEASURING)}; simulate, atlas and report run on published evidence alone "
                          "(GPU speed: the published anchors' fits; quality: the published scores, the model "
                          "itself at 16 bits, priors marked projected)", highlight=False, markup=False)
    if {"measure", "quality"} & set(plan):
        _consented(ctx)
    clock = BuildClock(ctx, list(plan))
    clock.start()
    paths: dict = {}
    tools = None
    try:
        for name, stage in plan.items():
            t = time.monotonic()
            if name == "quality" and "kld" in plan:
                tools = _start_tools_build(ctx)
            if name == "kld":
                _wait_tools_build(ctx, tools)
                tools = None
            out = stage(ctx)
            if name == "report":
                paths = out
            clock.done(name, t)
    finally:
        if tools is not None and tools.poll() is None:      # interrupted: the script resumes next time
            os.killpg(tools.pid, signal.SIGTERM)
    if ctx.study.claims:
        from pareto_atlas.report.claims import claims_study

        paths.update(claims_study(ctx.study, ctx.store, ctx.out, ctx.console))
    per_stage = ", ".join(f"{k} {v:.0f} s" for k, v in clock.took.items())
    ctx.console.print(f"\n[bold green]done[/] in {time.monotonic() - clock.t0:.0f} s ({per_stage}). Outputs in {ctx.out}/:")
    for name, p in paths.items():
        ctx.console.print(f"  {name:<22} {p}")
