"""The stages as functions of a context (stages.context.Context): each reads what it needs from the store
and writes its results back, so any stage can be run alone, repeated, or resumed. The quality stage is
stages.quality's; `build` (stages.build) runs them in order."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from pareto_atlas.stages.context import Context, consented, needs_arms
from pareto_atlas.stages.progress import measure_progress
from pareto_atlas.store import StoreError

PEER_FORMATS = ("vllm-bench", "guidellm")


def measure(ctx: Context, arms: list[str] | None = None) -> None:
    from pareto_atlas.measure.hwprobe import this_machine
    from pareto_atlas.measure.campaign import run_campaign

    needs_arms(ctx, "measure")
    consented(ctx)
    c = ctx.console
    c.print(
        f"[bold]measure[/] {ctx.study.name}: {len(arms or ctx.study.arms)} arm(s) on {ctx.study.engine.name}, "
        f"{ctx.study.workload.prompt_tokens} prompt / {ctx.study.workload.output_tokens} output tokens, "
        f"{ctx.study.load.requests} requests (+{ctx.study.load.warmup} warm-up) per arm unless it sets its own"
    )
    t0 = time.monotonic()
    local = ctx.study.engine.name in ("llamacpp", "vllm")  # engines started on this machine
    bandwidth = this_machine(ctx.study, ctx.store).mem_bw_gbs if local else None

    on = measure_progress(c)

    try:
        s = run_campaign(
            ctx.study,
            ctx.store,
            arms=arms,
            on_progress=on,
            bandwidth_gbs=bandwidth,
            executor=ctx.executor,
            consent=ctx.consent,
        )
    except StoreError:
        c.print()  # the anchor's progress dots end their line; the error gets its own
        raise
    again = f", {s.remeasured} measured again (other work beside them)" if s.remeasured else ""
    c.print(
        f"measure: {s.measured} measured, {s.skipped} kept from earlier runs, {s.failed} failed{again} "
        f"({time.monotonic() - t0:.0f} s)"
    )


def evict(
    ctx: Context,
    policies: list[str] | None = None,
    keeps: list[float] | None = None,
    task: str | None = None,
    n: int | None = None,
    required: bool = True,
) -> None:
    """The study's KV-eviction sweep in transformers. `required`: without torch it is an error (the
    `evict` command), else a skip with a note (the build's stage)."""
    from pareto_atlas.quality.eviction.stage import evict_study

    t0 = time.monotonic()
    if not required:
        try:
            from pareto_atlas.quality.eviction.model import require_torch

            require_torch()
        except ImportError:
            ctx.console.print(
                "evict: skipped, torch is not installed (pip install 'pareto-atlas[eviction]'); "
                "eviction stacks stay projected",
                highlight=False,
                markup=False,
            )
            return
    rows = evict_study(ctx.study, ctx.store, ctx.console, policies=policies, keeps=keeps, task=task, n=n)
    ctx.console.print(f"evict: {len(rows)} points (full cache included) in the store ({time.monotonic() - t0:.0f} s)")


def kld(
    ctx: Context,
    arms: list[str] | None = None,
    tokens: int | None = None,
    keep_base: bool = False,
    required: bool = False,
) -> None:
    """KL divergence and top-1 agreement of each quality configuration against the baseline.
    `required`: a missing llama-perplexity (or a non-llama.cpp study) is an error, not a skip."""
    from pareto_atlas.quality.kld import KldError
    from pareto_atlas.quality.kld_stage import KldUnavailable, kld_study

    needs_arms(ctx, "kld")
    t0 = time.monotonic()
    try:
        rows = kld_study(
            ctx.study, ctx.store, ctx.console, arms=arms, tokens=tokens, keep_base=keep_base, workdir=ctx.out / "kld"
        )
    except KldUnavailable as e:
        if required:
            raise
        ctx.console.print(f"{e}; skipped", highlight=False)
        return
    except KldError as e:  # the baseline's run failed: nothing can be compared
        raise ValueError(f"kld: {e}") from None
    ctx.console.print(f"kld: {len(rows)} configuration(s) in the store ({time.monotonic() - t0:.0f} s)")


def calibrate(ctx: Context, allow: tuple[str, ...] = ()) -> None:
    from pareto_atlas.calibrate.stage import calibrate_study

    needs_arms(ctx, "calibrate")
    calibrate_study(ctx.study, ctx.store, ctx.console, allow=allow)


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


def import_files(
    ctx: Context,
    files: list[Path],
    hardware: str | None = None,
    model: str | None = None,
    engine: str | None = None,
    knobs: str | None = None,
    output_tokens: int | None = None,
    allow: tuple[str, ...] = (),
) -> None:
    """Import result files of other tools into the study's store, then calibrate the cards they name."""
    from pareto_atlas.calibrate.imported import calibrate_imported
    from pareto_atlas.measure.imports import import_paths

    outcomes = import_paths(
        ctx.store,
        ctx.study.name,
        files,
        hardware=hardware,
        model=model,
        engine=engine,
        knobs=_knobs(knobs),
        requested_output=output_tokens,
    )
    for o in outcomes:
        ctx.console.print(
            f"[bold]import[/] {o.path}: {o.tool}@{o.version}, sha256 {o.sha256[:12]}: {o.status}"
            f"{f', {len(o.anchors)} anchor(s)' if o.anchors else ''}",
            highlight=False,
            soft_wrap=True,
        )
        ctx.console.print("\n".join(o.lines), markup=False, highlight=False, soft_wrap=True)
    if not hardware or not model:
        ctx.console.print("  no --hardware/--model card named: anchors kept, no card calibrated", highlight=False)
        return
    calibrate_imported(ctx.study.name, ctx.store, ctx.console, allow)


def export_peer(ctx: Context, fmt: str) -> None:
    from pareto_atlas.measure.imports.export import export_peer as write

    paths = write(ctx.store, ctx.study.name, ctx.out / "export" / fmt, fmt)
    ctx.console.print(
        f"exported {len(paths)} anchor(s) with their requests as {fmt} files to {ctx.out / 'export' / fmt}",
        highlight=False,
    )


def published(
    ctx: Context,
    tables: list[Path] | None = None,
    engines: list[str] | None = None,
    hardware: list[str] | None = None,
    multi_gpu: bool = False,
) -> None:
    from pareto_atlas.calibrate.published_stage import multigpu_study, published_study
    from pareto_atlas.report.claims import ratio_lines

    t0 = time.monotonic()
    cals = published_study(ctx.study.name, ctx.store, ctx.console, tables, engines, hardware, ratio_lines=ratio_lines)
    if multi_gpu:  # the link fit rests on the shipped one-GPU fits: those just made, where nothing was added
        multigpu_study(ctx.console, engines, hardware, None if tables or engines else cals)
    ctx.console.print(f"published: done in {time.monotonic() - t0:.0f} s")


def published_quality(console: Console, tables: list[Path], model: str | None, task: str) -> None:
    from pareto_atlas.quality.published import load_published_quality, summary_lines

    tab = load_published_quality(tables)
    for line in summary_lines(tab):
        console.print(line, highlight=False, soft_wrap=True)
    if model is None:
        return
    rows = tab[tab.model == model]
    if rows.empty:
        raise ValueError(f"--model {model!r}: no published scores; models: {', '.join(sorted(set(tab.model)))}")
    from pareto_atlas.quality.kv_method import kv_method
    from pareto_atlas.quality.published import published_for
    from pareto_atlas.quality.published_pool import guard_interval, per_source

    for (w, kv, ev), _ in rows.groupby(["weights", "kv", "eviction"], dropna=False):
        hits = published_for(
            model,
            str(w or "BF16"),
            str(kv or "f16"),
            str(ev or "none"),
            0.5 if str(ev or "none") != "none" else 1.0,
            table=tab,
        )
        best = guard_interval(hits, task)
        used = (
            f"guard uses {best.benchmark}: rel {best.rel:.3f} [{best.rel_lo:.3f}, {best.rel_hi:.3f}] ({best.method})"
            if best is not None and not best.informational
            else "no score the guard can use (informational only)"
        )
        console.print(
            f"  {model} weights {w or 'its own'} kv {kv or 'f16'} eviction {ev or 'none'}: {len(hits)} "
            f"score(s); {used}",
            highlight=False,
            soft_wrap=True,
        )
        if best is not None and not best.informational:
            for r in per_source(hits, best.benchmark):
                console.print(
                    f"    source {r.source}: rel {r.rel:.3f} [{r.rel_lo:.3f}, {r.rel_hi:.3f}] "
                    f"({r.metric}, {r.shots or '?'}-shot)" + (f"; KV method: {r.kv_method}" if r.kv_method else ""),
                    highlight=False,
                    soft_wrap=True,
                )
        if str(kv or "f16") not in ("f16", "bf16") and (m := kv_method("vllm", str(kv))) is not None:
            same = [r for r in hits if r.kv_method.startswith(m.kv_scales + " ")]
            verdict = (
                "the ladder uses those alone"
                if same
                else "the atlas's vLLM configurations with this KV cache do not rest on these scores"
            )
            console.print(
                f"    the atlas's vLLM kv={kv} runs {m.describe()}: {len(same)} of these score(s) are "
                f"that method: {verdict}",
                highlight=False,
                soft_wrap=True,
            )


def simulate(ctx: Context) -> None:
    from pareto_atlas.simulate.stage import simulate_study

    simulate_study(ctx.study, ctx.store, ctx.console, executor=ctx.executor)


def atlas(ctx: Context):
    from pareto_atlas.atlas.stage import atlas_study

    return atlas_study(ctx.study, ctx.store, ctx.console)


def report(ctx: Context) -> dict:
    from pareto_atlas.report.stage import report_study

    return report_study(ctx.study, ctx.store, ctx.out, ctx.console)


def pick(
    ctx: Context,
    constraint: str,
    objective: str,
    maximize: bool,
    prices: list[str],
    allow_priors: bool = False,
    model: str | None = None,
    workload: str | None = None,
) -> None:
    from pareto_atlas.atlas.stage import pick_study

    pick_study(
        ctx.study, ctx.store, ctx.console, constraint, objective, maximize, prices, allow_priors, model, workload
    )
