"""llama.cpp's tools are built for this CPU (GGML_NATIVE): the build script and the package must agree
on where this CPU's build lives, or a build made on another CPU (which can die of SIGILL) is used."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from pareto_atlas.measure.weights import cpu_key

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "build_llama_tools.sh"


def test_the_script_and_the_package_key_the_build_by_the_same_cpu_flags():
    line = next(ln for ln in SCRIPT.read_text().splitlines() if ln.startswith("cpu="))
    snippet = line.split("=", 1)[1].strip()
    out = subprocess.run(["bash", "-c", f"echo {snippet}"], capture_output=True, text=True, check=True).stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{8}", out) and out == cpu_key()
    assert 'bin="$root/bin-$cpu"' in SCRIPT.read_text()
