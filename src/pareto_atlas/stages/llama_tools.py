"""llama.cpp's own tools (llama-perplexity for the KL stage, llama-quantize): built by a script shipped as
package data beside this module (a checkout's scripts/build_llama_tools.sh links to it), started in the
background while GSM8K is scored and waited for before the KL stage."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from pareto_atlas.stages.context import Context
from pareto_atlas.stages.estimates import TOOLS_BUILD_S

TOOLS_SCRIPT = Path(__file__).resolve().with_name("build_llama_tools.sh")


def tools_to_build() -> bool:
    """Whether llama-perplexity is missing here and the script that builds it is at hand."""
    from pareto_atlas.quality.kld import llama_perplexity

    return llama_perplexity() is None and TOOLS_SCRIPT.is_file()


def start_tools_build(ctx: Context) -> subprocess.Popen | None:
    """Start building llama-perplexity (for the KL stage) in the background, niced, when it is
    missing: while GSM8K is scored, whose answers do not depend on timing; the anchors, which do,
    are measured before it starts. None when there is nothing to build or no script to build it."""
    if ctx.study.engine.name != "llamacpp" or not tools_to_build():
        return None
    log = ctx.out / "llama_tools_build.log"
    ctx.console.print(
        f"building llama.cpp's llama-perplexity in the background (niced; about {TOOLS_BUILD_S / 60:.0f} min "
        f"on 2 cores, once) while GSM8K is scored; log: {log}",
        highlight=False,
    )
    with open(log, "wb") as f:
        # its own process group, so an interrupted build stops its compilers too
        # through bash: package data need not keep its executable bit; PYTHON: the interpreter that
        # downloads the llama.cpp source (the script's own guess is a checkout's .venv)
        return subprocess.Popen(
            ["nice", "-n", "10", "bash", str(TOOLS_SCRIPT)],
            stdout=f,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHON": os.environ.get("PYTHON") or sys.executable},
        )


def wait_tools_build(ctx: Context, proc: subprocess.Popen | None) -> None:
    if proc is None:
        return
    t = time.monotonic()
    rc = proc.wait()
    tail = (ctx.out / "llama_tools_build.log").read_text(errors="replace").strip().splitlines()[-1:] or [""]
    ctx.console.print(
        f"llama-perplexity build {'done' if rc == 0 else f'failed ({tail[0]})'}"
        f" (waited {time.monotonic() - t:.0f} s for it)",
        highlight=False,
    )
