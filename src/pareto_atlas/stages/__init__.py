"""The pipeline's stages as functions of a context (study, store, output folder, console, executor).

Each stage reads what it needs from the store and writes its results back, so any stage can be run
alone, repeated, or resumed; `build` runs them in order. One concept a module:

- `context`: what a stage runs in; `run`: the stages; `quality`: the quality stage;
- `progress`: what the stages print as they go; `clock`: the build's stage times and ETA
  (`estimates`: its first-build estimates, in one place);
- `llama_tools`: llama.cpp's tools, built by the script shipped beside it (package data);
- `build`: the stages in order.
"""

from __future__ import annotations

from pareto_atlas.measure.resolve import load_study
from pareto_atlas.stages.build import MEASURING, build, build_stages
from pareto_atlas.stages.clock import BuildClock
from pareto_atlas.stages.context import USER_ERRORS, Context, default_store, needs_arms
from pareto_atlas.stages.estimates import FIRST_GUESS_S, TOOLS_BUILD_S
from pareto_atlas.stages.llama_tools import TOOLS_SCRIPT
from pareto_atlas.stages.progress import POWER_HALFWIDTH
from pareto_atlas.stages.quality import QUALITY_TASKS, parse_n, quality
from pareto_atlas.stages.run import (
    PEER_FORMATS,
    _knobs,
    atlas,
    calibrate,
    evict,
    export_peer,
    import_files,
    kld,
    measure,
    pick,
    published,
    published_quality,
    report,
    simulate,
)

__all__ = [
    "FIRST_GUESS_S",
    "MEASURING",
    "PEER_FORMATS",
    "POWER_HALFWIDTH",
    "QUALITY_TASKS",
    "TOOLS_BUILD_S",
    "TOOLS_SCRIPT",
    "USER_ERRORS",
    "BuildClock",
    "Context",
    "_knobs",
    "atlas",
    "build",
    "build_stages",
    "calibrate",
    "default_store",
    "evict",
    "export_peer",
    "import_files",
    "kld",
    "load_study",
    "measure",
    "needs_arms",
    "parse_n",
    "pick",
    "published",
    "published_quality",
    "quality",
    "report",
    "simulate",
]
