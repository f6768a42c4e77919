"""`build`: the study's stages in order, with the build's clock, and llama.cpp's tools built in the
background where the KL stage needs them."""

from __future__ import annotations

import os
import signal
import time

from pareto_atlas.spec.study import Study
from pareto_atlas.stages.clock import BuildClock
from pareto_atlas.stages.context import Context, consented
from pareto_atlas.stages.llama_tools import start_tools_build, wait_tools_build
from pareto_atlas.stages.quality import quality
from pareto_atlas.stages.run import atlas, calibrate, evict, kld, measure, report, simulate

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


# what a failed anchor's reason says when the tool its model is built with was not built yet
WAITED_FOR_TOOLS = "llama-quantize, which is not built"


def measure_waiting_for_tools(ctx: Context) -> None:
    """The arms whose model is built by one of llama.cpp's tools (llama-quantize: the default's Q4_K
    kernel anchor) failed on a fresh machine, where the tools are built after the anchors are measured
    (so the build does not time them); measured now that the build is done, with nothing else running,
    so the calibration has them in this build rather than the next."""
    failed = ctx.store.anchors(ctx.study.name, status="failed")
    waiting = failed[failed["reason"].fillna("").str.contains(WAITED_FOR_TOOLS, regex=False)] if len(failed) else failed
    arms = [a for a in dict.fromkeys(waiting.get("arm", [])) if a in {x.name for x in ctx.study.arms}]
    if arms:
        ctx.console.print(f"measure, now that llama.cpp's tools are built: {', '.join(arms)}", highlight=False)
        measure(ctx, arms=arms)


def build(ctx: Context, with_quality: bool = True) -> None:
    stages_of = {
        "measure": measure,
        "quality": quality,
        "kld": kld,
        "evict": lambda c: evict(c, required=False),
        "calibrate": calibrate,
        "simulate": simulate,
        "atlas": atlas,
        "report": report,
    }
    plan = {name: stages_of[name] for name in build_stages(ctx.study, with_quality)}
    if not ctx.study.measures:
        ctx.console.print(
            f"{ctx.study.name}: no [[arms]], nothing to measure on an engine: skipping "
            f"{', '.join(MEASURING)}; simulate, atlas and report run on published evidence alone "
            "(GPU speed: the published anchors' fits; quality: the published scores, the model "
            "itself at 16 bits, priors marked projected)",
            highlight=False,
            markup=False,
        )
    if "simulate" in plan:  # a grid value no searched layout takes fails before anything is measured
        from pareto_atlas.simulate.space import check_grid_layouts

        check_grid_layouts(ctx.study.simulate.grid)
    if {"measure", "quality"} & set(plan):
        consented(ctx)
    clock = BuildClock(ctx, list(plan))
    clock.start()
    paths: dict = {}
    tools = None
    try:
        for name, stage in plan.items():
            t = time.monotonic()
            if name == "quality" and "kld" in plan:
                tools = start_tools_build(ctx)
            if name == "kld":
                built = tools is not None
                wait_tools_build(ctx, tools)
                tools = None
                if built and "measure" in plan:
                    measure_waiting_for_tools(ctx)
            out = stage(ctx)
            if name == "report":
                paths = out
            clock.done(name, t)
    finally:
        if tools is not None and tools.poll() is None:  # interrupted: the script resumes next time
            os.killpg(tools.pid, signal.SIGTERM)
    if ctx.study.claims:
        from pareto_atlas.report.claims import claims_study

        paths.update(claims_study(ctx.study, ctx.store, ctx.out, ctx.console))
    per_stage = ", ".join(f"{k} {v:.0f} s" for k, v in clock.took.items())
    ctx.console.print(
        f"\n[bold green]done[/] in {time.monotonic() - clock.t0:.0f} s ({per_stage}). Outputs in {ctx.out}/:"
    )
    for name, p in paths.items():
        ctx.console.print(f"  {name:<22} {p}")
