"""The engine's process: it shares the campaign's scheduling priority, and a SIGTERM stops it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pareto_atlas.measure.engines.base import autogroup_nice

needs_autogroups = pytest.mark.skipif(autogroup_nice() is None, reason="this kernel has no scheduler autogroups")


def _run(code: str) -> str:
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    # its own session, so its autogroup is its own and the test runner's priority is untouched
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


@needs_autogroups
def test_a_server_in_its_own_session_takes_the_campaigns_autogroup_priority():
    out = _run(
        """
        from pathlib import Path
        from pareto_atlas.measure.engines.base import ServerProcess, autogroup_nice
        Path("/proc/self/autogroup").write_text("7")   # lowering one's own priority needs no right
        server = ServerProcess(["sleep", "30"])
        try:
            print(autogroup_nice(), autogroup_nice(server.pid), Path(f"/proc/{server.pid}/autogroup").read_text() != Path("/proc/self/autogroup").read_text())
        finally:
            server.stop()
            server.cleanup()
        """
    )
    mine, server, own_group = out.split()
    assert (mine, server) == ("7", "7")
    assert own_group == "True"  # still its own process group and session, only the priority shared


def test_sigterm_unwinds_like_ctrl_c_and_stops_the_server():
    out = _run(
        """
        import os, signal
        from pareto_atlas.cli_run import stop_on_sigterm
        from pareto_atlas.measure.engines.base import ServerProcess
        stop_on_sigterm()
        server = ServerProcess(["sleep", "30"])
        print(server.pid, flush=True)
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            print("not interrupted")
        except KeyboardInterrupt:
            print("interrupted")
        finally:
            server.stop()
            server.cleanup()
        print(server.alive())
        """
    )
    pid, how, alive = out.split()
    assert how == "interrupted" and alive == "False"
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid), 0)
