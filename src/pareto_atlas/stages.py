"""The pipeline's stages as functions of a context (study, store, output folder, console).

Each stage reads what it needs from the store and writes its results back, so any stage can be
run alone, repeated, or resumed; `build` runs them in order.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from pareto_atlas.measure.weights import ModelError
from pareto_atlas.scale import Executor, InProcess, executor_for
from pareto_atlas.spec.study import Study, StudyError, load_study
from pareto_atlas.store import Store, StoreError

USER_ERRORS: tuple[type[BaseException], ...] = (StudyError, StoreError, ModelError, ValueError, FileNotFoundError)


@dataclass
class Context:
    study: Study
    out: Path
    store: Store
    console: Console
    executor: Executor = field(default_factory=InProcess)

    @classmethod
    def open(cls, study: str, out: Path | None, console: Console, ray: str | None = None,
             store: Path | None = None) -> "Context":
        s = load_study(study)
        out = Path(out) if out else Path("atlas-out") / s.name
        out.mkdir(parents=True, exist_ok=True)
        executor = executor_for(ray)     # first: an unreachable cluster fails before the store is opened
        return cls(s, out, Store(store or out / "store.duckdb"), console, executor)

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc) -> None:
        self.store.close()
        self.executor.close()


def _fmt(v, unit: str = "", nd: int = 1) -> str:
    return "—" if v is None or v != v else f"{v:.{nd}f}{unit}"


def measure(ctx: Context, arms: list[str] | None = None) -> None:
    from pareto_atlas.calibrate.stage import this_machine
    from pareto_atlas.measure.campaign import run_campaign

    c = ctx.console
    c.print(f"[bold]measure[/] {ctx.study.name}: {len(arms or ctx.study.arms)} arm(s) on {ctx.study.engine.name}, "
            f"{ctx.study.workload.prompt_tokens} prompt / {ctx.study.workload.output_tokens} output tokens, "
            f"{ctx.study.load.requests} requests (+{ctx.study.load.warmup} warm-up) per arm unless it sets its own")
    t0 = time.monotonic()
    bandwidth = this_machine(ctx.study, ctx.store).mem_bw_gbs if ctx.study.engine.name == "llamacpp" else None

    def on(ev: str, info: dict) -> None:
        if ev == "skip":
            c.print(f"  [{info['i'] + 1}/{info['n']}] {info['arm']}: already measured, kept")
        elif ev == "anchor":
            c.print(f"  [{info['i'] + 1}/{info['n']}] {info['arm']}: ", end="")
        elif ev == "request":
            c.print(".", end="")
        elif ev == "done":
            m = info["metrics"]
            if info["status"] == "ok":
                c.print(f" ok  TTFT p50 {_fmt(m.get('ttft', {}).get('p50'), ' ms')}  "
                        f"TPOT p50 {_fmt(m.get('tpot', {}).get('p50'), ' ms')}  "
                        f"{_fmt(m.get('throughput_tok_s'), ' tok/s')}  rejected {m.get('n_rejected', 0)}")
                if m.get("decode_bw_line"):
                    c.print(f"      {m['decode_bw_line']}", highlight=False)
            else:
                c.print(f" [red]failed[/]: {info['reason']}", highlight=False, soft_wrap=True)

    s = run_campaign(ctx.study, ctx.store, arms=arms, on_progress=on, bandwidth_gbs=bandwidth, executor=ctx.executor)
    c.print(f"measure: {s.measured} measured, {s.skipped} kept from earlier runs, {s.failed} failed "
            f"({time.monotonic() - t0:.0f} s)")


def quality(ctx: Context, arms: list[str] | None = None, n: int | None = None) -> None:
    from pareto_atlas.quality.campaign import run_quality_campaign

    c = ctx.console
    q = ctx.study.quality
    what = (f"{q.task} ({q.mode}), n = {n or q.n} per arm" if q.task == "gsm8k" else
            f"needle retrieval at {q.retrieval_lengths} tokens, {q.retrieval_per_cell} per length and depth")
    c.print(f"[bold]quality[/] {what}")

    def on(ev: str, info: dict) -> None:
        if ev == "skip":
            c.print(f"  {info['arm']}: already scored, kept")
        elif ev == "start":
            c.print(f"  {info['arm']}: ", end="")
        elif ev == "item":
            c.print(".", end="")
        elif ev == "done":
            if info["status"] == "ok":
                st = info["summary"]["strict"]
                c.print(f" {st['k']}/{st['n']} = {st['p']:.3f}  [95% {st['lo']:.2f}–{st['hi']:.2f}]")
            else:
                c.print(f" [red]failed[/]: {info['reason']}", highlight=False, soft_wrap=True)

    run_quality_campaign(ctx.study, ctx.store, arms=arms, n=n, on_progress=on, executor=ctx.executor)
    from pareto_atlas.quality.campaign import agreement_table

    for _, a in agreement_table(ctx.study, ctx.store).iterrows():
        c.print(f"  {a.arm} vs {a.reference}: same answer on {a.answer_agreement:.0%} of {a.n} items "
                f"[95% {a.answer_agreement_lo:.0%}–{a.answer_agreement_hi:.0%}], identical output {a.identical_outputs:.0%}, "
                f"first divergence at {a.unit} {_fmt(a.median_first_divergence, nd=0)} (median)", highlight=False)


def evict(ctx: Context, policies: list[str] | None = None, keeps: list[float] | None = None,
          task: str | None = None, n: int | None = None) -> None:
    from pareto_atlas.quality.eviction.stage import evict_study

    t0 = time.monotonic()
    rows = evict_study(ctx.study, ctx.store, ctx.console, policies=policies, keeps=keeps, task=task, n=n)
    ctx.console.print(f"evict: {len(rows)} points (full cache included) in the store ({time.monotonic() - t0:.0f} s)")


def calibrate(ctx: Context) -> None:
    from pareto_atlas.calibrate.stage import calibrate_study

    calibrate_study(ctx.study, ctx.store, ctx.console)


def simulate(ctx: Context) -> None:
    from pareto_atlas.simulate.stage import simulate_study

    simulate_study(ctx.study, ctx.store, ctx.console, executor=ctx.executor)


def atlas(ctx: Context):
    from pareto_atlas.atlas.stage import atlas_study

    return atlas_study(ctx.study, ctx.store, ctx.console)


def report(ctx: Context) -> dict:
    from pareto_atlas.report.stage import report_study

    return report_study(ctx.study, ctx.store, ctx.out, ctx.console)


def pick(ctx: Context, constraint: str, objective: str, maximize: bool, prices: list[str]) -> None:
    from pareto_atlas.atlas.stage import pick_study

    pick_study(ctx.study, ctx.store, ctx.console, constraint, objective, maximize, prices)


def build(ctx: Context, with_quality: bool = True) -> None:
    t0 = time.monotonic()
    measure(ctx)
    if with_quality:
        quality(ctx)
    calibrate(ctx)
    simulate(ctx)
    atlas(ctx)
    paths = report(ctx)
    ctx.console.print(f"\n[bold green]done[/] in {time.monotonic() - t0:.0f} s. Outputs in {ctx.out}/:")
    for name, p in paths.items():
        ctx.console.print(f"  {name:<22} {p}")
