"""Run one untrusted program (model-generated Python) in a sandbox, never in the project's process.

Each run is its own process tree: `unshare` makes fresh mount, network (loopback only, down),
PID, IPC and UTS namespaces; `sandbox_boot.py` (pid 1 there, root) makes every mount read-only,
covers /tmp, /var/tmp, /dev/shm and /run with empty tmpfs and mounts a fresh tmpfs at /tmp/work,
the program's only writable directory; the program then runs as `nobody` with no groups and no new
privileges (`setpriv`), under `prlimit` limits on address space, CPU time, processes, file size
and open files. A wall-clock timeout kills the whole process group here and, with it, the PID
namespace. Every outcome is a `SandboxResult`; nothing the program does raises in the caller.

Needs root (CAP_SYS_ADMIN for the namespaces and mounts, CAP_SETUID for setpriv); `probe()` says
whether this machine allows it, and why not.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

STATUSES = ("passed", "failed", "timeout", "killed-by-limit", "error")
BOOT = Path(__file__).with_name("sandbox_boot.py")
NOBODY = 65534


@dataclass(frozen=True)
class Limits:
    """Per-run limits. `cpu_s` is the soft limit (SIGXCPU); the hard one, a second later, is SIGKILL."""

    wall_s: float = 10.0
    cpu_s: int = 10
    address_space_mb: int = 1024
    processes: int = 32  # RLIMIT_NPROC, counted over the user's processes
    file_size_mb: int = 16
    open_files: int = 64
    work_dir_mb: int = 64  # size of the tmpfs at /tmp/work

    def __post_init__(self) -> None:
        for name in ("wall_s", "cpu_s", "address_space_mb", "processes", "file_size_mb", "open_files", "work_dir_mb"):
            if not getattr(self, name) > 0:
                raise ValueError(f"sandbox limits: {name} = {getattr(self, name)} must be > 0")


@dataclass(frozen=True)
class SandboxResult:
    status: str  # one of STATUSES
    reason: str  # "" when passed; else why, in one line
    exit_code: int | None  # negative: killed by that signal
    wall_s: float
    cpu_s: float | None = None
    max_rss_kb: int | None = None
    stdout: str = ""  # the last 4 kB of each
    stderr: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def to_dict(self) -> dict:
        return asdict(self)


class SandboxUnavailable(RuntimeError):
    pass


def _world_usable(path: str) -> bool:
    """The unprivileged user can run `path`: every directory above it searchable, the file r+x."""
    p = Path(path)
    try:
        if p.stat().st_mode & 0o005 != 0o005:
            return False
        return all(d.stat().st_mode & 0o001 for d in p.parents)
    except OSError:
        return False


@lru_cache(maxsize=1)
def default_interpreter() -> str:
    """A Python the unprivileged user can run: this one if its install is world-readable (a
    pyenv under /root is not), else the system's python3."""
    for cand in (os.path.realpath(sys.executable), "/usr/bin/python3", "/usr/local/bin/python3"):
        real = os.path.realpath(cand)
        if os.path.exists(real) and _world_usable(real):
            return real
    raise SandboxUnavailable(
        "no Python interpreter that the unprivileged user 'nobody' can run "
        "(tried this interpreter, /usr/bin/python3, /usr/local/bin/python3)"
    )


def _tool(name: str) -> str:
    found = shutil.which(name) or next((p for p in (f"/usr/bin/{name}", f"/bin/{name}") if os.path.exists(p)), None)
    if not found:
        raise SandboxUnavailable(f"sandbox needs {name} (util-linux), which is not installed")
    return found


def program_argv(limits: Limits, interpreter: str) -> list[str]:
    """setpriv (drop to nobody) -> prlimit (lower the limits as nobody) -> python on main.py."""
    mb = 1024 * 1024
    return [
        _tool("setpriv"),
        f"--reuid={NOBODY}",
        f"--regid={NOBODY}",
        "--clear-groups",
        "--no-new-privs",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--",
        _tool("prlimit"),
        f"--as={limits.address_space_mb * mb}",
        f"--cpu={limits.cpu_s}:{limits.cpu_s + 1}",
        f"--nproc={limits.processes}",
        f"--fsize={limits.file_size_mb * mb}",
        f"--nofile={limits.open_files}",
        "--core=0",
        "--",
        interpreter,
        "-I",
        "-S",
        "main.py",
    ]


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def classify(report: dict, limits: Limits) -> tuple[str, str]:
    """(status, reason) from the boot's report of how the program ended."""
    code, err = report["exit"], _last_line(report.get("stderr", ""))
    if code == 0:
        return "passed", ""
    if code < 0:
        sig = -code
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and (report.get("cpu_s") or 0) >= limits.cpu_s):
            return "killed-by-limit", f"CPU time limit ({limits.cpu_s} s): {name}"
        if sig == signal.SIGXFSZ:
            return "killed-by-limit", f"file size limit ({limits.file_size_mb} MB): {name}"
        if sig == signal.SIGKILL:
            return "killed-by-limit", "killed by SIGKILL (memory?)"
        return "failed", f"killed by {name}"
    if err.startswith("MemoryError"):
        return "killed-by-limit", f"address-space limit ({limits.address_space_mb} MB): {err}"
    if "Resource temporarily unavailable" in err or "[Errno 11]" in err:
        return "killed-by-limit", f"process limit ({limits.processes}): {err}"
    if "File too large" in err or "[Errno 27]" in err:
        return "killed-by-limit", f"file size limit ({limits.file_size_mb} MB): {err}"
    if "Too many open files" in err or "[Errno 24]" in err:
        return "killed-by-limit", f"open-file limit ({limits.open_files}): {err}"
    return "failed", err or f"exit code {code}"


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _gone(pid: int) -> bool:
    """Exited: no such process, or a zombie (the namespace's init turns zombie only after the kernel
    has killed and reaped everything else in its PID namespace)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def _kill_group(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """SIGKILL unshare's process group and the namespace's init, then wait until the namespace is
    gone, so that nothing of a killed run outlives `run_program`."""
    inits = _children(proc.pid)
    for kill in [lambda: os.killpg(proc.pid, signal.SIGKILL)] + [lambda p=p: os.kill(p, signal.SIGKILL) for p in inits]:
        try:
            kill()
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and not all(_gone(p) for p in inits):
        time.sleep(0.01)


def run_program(source: str, limits: Limits = Limits(), interpreter: str | None = None) -> SandboxResult:
    """Run `source` as /tmp/work/main.py in a fresh sandbox; always returns, whatever it does."""
    t0 = time.monotonic()
    try:
        interp = interpreter or default_interpreter()
        argv = program_argv(limits, interp)
        unshare = _tool("unshare")
    except SandboxUnavailable as e:
        return SandboxResult("error", str(e), None, 0.0)
    r, w = os.pipe()
    cfg = {"status_fd": w, "uid": NOBODY, "gid": NOBODY, "work_kb": limits.work_dir_mb * 1024, "argv": argv}
    cmd = [
        unshare,
        "--mount",
        "--net",
        "--pid",
        "--ipc",
        "--uts",
        "--fork",
        "--kill-child",
        "--mount-proc",
        os.path.realpath(sys.executable),
        "-I",
        "-S",
        str(BOOT),
        json.dumps(cfg),
    ]
    timed_out = False
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(w,),
            start_new_session=True,
        )
    except OSError as e:
        os.close(r), os.close(w)
        return SandboxResult("error", f"could not start unshare: {e}", None, time.monotonic() - t0)
    os.close(w)
    try:
        try:
            _, boot_err = proc.communicate(source.encode(), timeout=limits.wall_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            _, boot_err = proc.communicate()
        with os.fdopen(r, "rb") as f:
            raw = f.read()
    finally:
        if proc.poll() is None:
            _kill_group(proc)
            proc.wait()
    wall = time.monotonic() - t0
    if timed_out:
        return SandboxResult("timeout", f"wall-clock limit ({limits.wall_s:g} s)", None, wall)
    try:
        report = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        report = {}
    if "exit" not in report:
        why = (
            report.get("setup_error")
            or _last_line(boot_err.decode("utf-8", "replace"))
            or f"unshare exit {proc.returncode}"
        )
        return SandboxResult("error", f"sandbox set-up failed: {why}", None, wall)
    status, reason = classify(report, limits)
    return SandboxResult(
        status,
        reason,
        report["exit"],
        wall,
        report.get("cpu_s"),
        report.get("max_rss_kb"),
        report.get("stdout", ""),
        report.get("stderr", ""),
    )


def run_many(sources: Sequence[str], limits: Limits = Limits(), workers: int = 2) -> list[SandboxResult]:
    """Run each program in its own sandbox, `workers` at a time; results in input order."""
    if workers < 1:
        raise ValueError(f"sandbox workers: {workers} must be >= 1")
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda s: run_program(s, limits), sources))


def machine_allows() -> tuple[bool, str]:
    """(allowed, why not): whether this machine lets us make the namespaces at all (root, and
    unshare not refused). Unlike `probe`, a bug in the sandbox itself does not make this False."""
    if os.geteuid() != 0:
        return False, "the sandbox needs root (namespaces, tmpfs mounts, setpriv to nobody)"
    try:
        done = subprocess.run(
            [_tool("unshare"), "--mount", "--net", "--pid", "--fork", "true"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (SandboxUnavailable, OSError, subprocess.TimeoutExpired) as e:
        return False, str(e)
    return (done.returncode == 0, _last_line(done.stderr) or f"unshare exit {done.returncode}")


@lru_cache(maxsize=1)
def probe() -> tuple[bool, str]:
    """(usable, why not): runs a trivial program through the whole sandbox once."""
    res = run_program("print('ok')", Limits(wall_s=20))
    if res.status == "passed" and res.stdout.strip() == "ok":
        return True, ""
    return False, res.reason or res.status
