"""The engine interface: start one arm, get an OpenAI-compatible endpoint, stop it.

Engines that launch a server run it as a separate process group, so a crash, hang or kill of
the engine cannot take the campaign down and its memory can be read by pid.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NoReturn

import httpx

from ...spec.knobs import Knobs
from pareto_atlas.spec.fields import check_fields


class EngineStartError(RuntimeError):
    """The engine did not come up; the message is one line saying why."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


@dataclass(frozen=True)
class ArmLaunch:
    """Everything needed to launch one arm. `extra` carries engine-specific options
    (documented by each engine); unknown keys are rejected there, not silently ignored."""

    model_path: str = ""
    knobs: Knobs = field(default_factory=Knobs)
    n_ctx: int = 2048  # context of one request (llama.cpp gets n_ctx x slots in all)
    threads: int = 2
    draft_model_path: str | None = None
    extra: Mapping = field(default_factory=dict)
    startup_timeout_s: float = 180.0

    @classmethod
    def coerce(cls, launch: "ArmLaunch | Mapping") -> "ArmLaunch":
        if isinstance(launch, ArmLaunch):
            return launch
        check_fields(cls, launch, "launch")
        d = dict(launch)
        knobs = d.get("knobs")
        if isinstance(knobs, Mapping):
            d["knobs"] = Knobs.from_dict(dict(knobs))
        if "model_path" in d and d["model_path"] is not None:
            d["model_path"] = str(d["model_path"])
        if d.get("draft_model_path") is not None:
            d["draft_model_path"] = str(d["draft_model_path"])
        return cls(**d)

    def with_extra(self, **kw) -> "ArmLaunch":
        return replace(self, extra={**self.extra, **kw})


def check_extra(engine: str, extra: Mapping, allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(extra) - set(allowed))
    if unknown:
        raise ValueError(f"{engine}: launch.extra key {unknown[0]!r} is not supported; allowed: {', '.join(allowed)}")


class RunningEngine(ABC):
    """A served arm. Use as a context manager so the engine stops however the run ends."""

    name: str = "?"
    base_url: str = ""
    pid: int | None = None  # the process whose memory is the arm's (None when attached)
    version: str = "unknown"
    model: str | None = None  # the model name to put in requests (None: server default)
    extra_body: Mapping = {}  # engine-specific request fields (e.g. llama.cpp's cache_prompt)

    def headers(self) -> dict[str, str]:
        """Request headers (credentials read at call time, never kept on the object)."""
        return {}

    @abstractmethod
    def describe(self) -> dict:
        """Provenance: engine name and version, launch flags. Never contains a secret."""

    @abstractmethod
    def stop(self) -> None: ...

    def alive(self) -> bool:
        return True

    def counters(self) -> dict | None:
        """The server's own counters now (e.g. vLLM's /metrics), or None when it keeps none."""
        return None

    def run_summary(self, before: dict | None, after: dict | None, metrics: dict) -> dict:
        """Metrics keys from the counters before and after the measured requests ({} without);
        `metrics`: the client-side metrics of the run, to cross-check against."""
        return {}

    def __enter__(self) -> "RunningEngine":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} {self.version} at {self.base_url} pid={self.pid}>"


class Engine(ABC):
    name: str = "?"

    @abstractmethod
    def start(self, launch: ArmLaunch | Mapping) -> RunningEngine: ...


# ----------------------------------------------------------------------------- process helpers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_LLAMA_ERROR = re.compile(r"^[\d.]+ E (.*)$")  # llama.cpp log line at error level: "0.00.007.650 E msg"


def last_line(path: Path, default: str = "") -> str:
    """Why a server died, from its log: llama.cpp's first error-level line (the root cause;
    later ones are consequences), else the last non-empty line (a Python traceback's last
    line is the exception)."""
    try:
        lines = [s.strip() for s in path.read_text(errors="replace").splitlines() if s.strip()]
    except OSError:
        return default
    for s in lines:
        m = _LLAMA_ERROR.match(s)
        if m:
            return m.group(1).strip()[:300]
    return lines[-1][:300] if lines else default


_AUTOGROUP = re.compile(r"\S+\s+nice\s+(-?\d+)")


def autogroup_nice(pid: int | str = "self") -> int | None:
    """The nice value of `pid`'s scheduler autogroup, or None where the kernel has no autogroups."""
    try:
        m = _AUTOGROUP.match(Path(f"/proc/{pid}/autogroup").read_text())
    except OSError:
        return None
    return int(m.group(1)) if m else None


def share_autogroup_nice(pid: int) -> None:
    """Give a server started in its own session the campaign's own autogroup priority.

    With autogroups on (`kernel.sched_autogroup_enabled`), CPU time is shared between sessions
    first and `nice` counts only inside one; a server in a new session would therefore compete at
    the default weight whatever priority the campaign was given, and a measurement beside other
    work times the other work. Best effort: without autogroups, or without the right to raise a
    priority, the server keeps the default."""
    mine = autogroup_nice()
    if mine is None or mine == autogroup_nice(pid):
        return
    try:
        Path(f"/proc/{pid}/autogroup").write_text(str(mine))
    except OSError:
        pass


class ServerProcess:
    """A server child in its own process group, stderr kept in a temp file for diagnosis.
    `explain(log_path, default)` says why it died (default: `last_line`); an engine whose root cause
    is not its last line (vLLM's engine core dies first, its API server after) passes its own."""

    def __init__(
        self,
        argv: list[str],
        env: Mapping[str, str] | None = None,
        stdout_pipe: bool = False,
        explain: Callable[[Path, str], str] | None = None,
    ):
        self.argv, self.explain = argv, explain or last_line
        fd, name = tempfile.mkstemp(prefix="pareto-engine-", suffix=".log")
        os.close(fd)
        self.log_path = Path(name)
        self._log = self.log_path.open("wb")
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if stdout_pipe else self._log,
                stderr=self._log,
                env={**os.environ, **(env or {})},
                start_new_session=True,
                text=True,
                errors="replace",
            )
        except OSError as e:
            self._log.close()
            raise EngineStartError(f"cannot run {argv[0]!r}: {e.strerror or e}") from e
        share_autogroup_nice(self.proc.pid)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def why_dead(self) -> str:
        rc = self.proc.poll()
        return self.explain(self.log_path, f"exited with code {rc}") + (f" (exit code {rc})" if rc else "")

    def wait_healthy(self, base_url: str, timeout_s: float, path: str = "/health") -> None:
        """Poll `path` until 200; fail early with the log's last line if the process dies."""
        deadline = time.monotonic() + timeout_s
        with httpx.Client(base_url=base_url, timeout=2.0) as c:
            while time.monotonic() < deadline:
                if not self.alive():
                    self.fail(f"engine exited during start: {self.why_dead()}")
                try:
                    if c.get(path).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
        self.fail(f"engine not healthy at {base_url}{path} after {timeout_s:g} s: {self.explain(self.log_path, '')}")

    def fail(self, reason: str) -> NoReturn:
        """Stop, drop the log, and raise `reason` (computed from the log before it goes)."""
        self.stop()
        self.cleanup()
        raise EngineStartError(reason)

    def stop(self, grace_s: float = 5.0) -> None:
        if self.alive():
            for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        else:
            self.proc.poll()
        if self.proc.stdout:
            self.proc.stdout.close()
        self._log.close()

    def cleanup(self) -> None:
        self.log_path.unlink(missing_ok=True)
