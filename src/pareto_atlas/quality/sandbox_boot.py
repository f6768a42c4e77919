"""The inside of one sandboxed run: `quality.sandbox` starts this file (never imports it) as pid 1
of fresh mount, network, PID, IPC and UTS namespaces made by `unshare`, still as root.

It makes every inherited mount read-only, covers the world-writable and socket directories
(/tmp, /var/tmp, /dev/shm, /run, ...) with empty tmpfs, mounts a fresh tmpfs at /tmp/work as the
program's only writable directory, then forks the program as an unprivileged user with no new
privileges under `prlimit` limits, waits for it (reaping orphans: it is the namespace's init) and
writes how it ended, as one JSON object, to the status pipe. When it exits the kernel kills
everything left in the PID namespace. Stdlib only, run with `python -I -S`.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
MS_NOATIME, MS_NODIRATIME, MS_RELATIME, MS_STRICTATIME = 0x400, 0x800, 0x200000, 0x1000000
# A bind remount must restate the per-mount flags it keeps, or it would clear nosuid/nodev/noexec.
KEEP = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
    "strictatime": MS_STRICTATIME,
}
# Hidden under empty read-only tmpfs: where an unprivileged user could write (sticky world-writable
# directories) or reach a host daemon through a Unix socket file (the network namespace stops only
# abstract sockets and IP).
COVER = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue", "/run", "/var/run", "/var/lock", "/run/lock")
WORK = "/tmp/work"
OUT = "/run/sandbox-out"  # root-only: the program's stdout/stderr files, kept from its reach
TAIL = 4096

_libc = ctypes.CDLL(None, use_errno=True)


def _mount(src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: s.encode() if s is not None else None
    if _libc.mount(enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def _unescape(path: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as \\ooo."""
    out, i = [], 0
    while i < len(path):
        if path[i] == "\\" and len(path[i + 1 : i + 4]) == 3 and path[i + 1 : i + 4].isdigit():
            out.append(chr(int(path[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(path[i])
            i += 1
    return "".join(out)


def make_readonly() -> list[str]:
    """Bind-remount every mount read-only in this (private) mount namespace; the host's mounts are
    untouched (MS_BIND changes the per-mount flag, not the filesystem). Returns the failures."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    failed = []
    with open("/proc/self/mountinfo") as f:
        mounts = [line.split() for line in f]
    for fields in mounts:
        target, opts = _unescape(fields[4]), fields[5].split(",")
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for o in opts:
            flags |= KEEP.get(o, 0)
        try:
            _mount(None, target, None, flags)
        except OSError as e:
            failed.append(f"{target}: {e.strerror}")
    if any(f.startswith("/: ") for f in failed):
        raise RuntimeError(f"could not make / read-only: {failed}")
    return failed


def cover_and_mount_work(uid: int, gid: int, work_kb: int) -> None:
    for d in COVER:
        if os.path.isdir(d) and not os.path.islink(d):
            # /tmp is made read-only once /tmp/work exists in it; /run stays root-only (mode 700)
            ro = 0 if d in ("/tmp", "/run") else MS_RDONLY
            mode = "700" if d == "/run" else "755"
            _mount("tmpfs", d, "tmpfs", ro | MS_NOSUID | MS_NODEV | MS_NOEXEC, f"size=16m,nr_inodes=64,mode={mode}")
    os.mkdir(WORK, 0o755)
    os.mkdir(OUT, 0o700)
    _mount(
        "tmpfs",
        WORK,
        "tmpfs",
        MS_NOSUID | MS_NODEV | MS_NOEXEC,
        f"size={work_kb}k,nr_inodes=4096,mode=700,uid={uid},gid={gid}",
    )
    # /tmp itself: read-only now that the work mount point exists in it
    _mount(None, "/tmp", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - TAIL))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def run_child(cfg: dict, status_fd: int) -> dict:
    pid = os.fork()
    if pid == 0:
        try:
            os.close(status_fd)
            null = os.open("/dev/null", os.O_RDONLY)
            os.dup2(null, 0)
            for fd, name in ((1, "stdout"), (2, "stderr")):
                out = os.open(f"{OUT}/{name}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(out, fd)
            os.chdir(WORK)
            env = {
                "PATH": "/usr/bin:/bin",
                "HOME": WORK,
                "TMPDIR": WORK,
                "LANG": "C.UTF-8",
                "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONHASHSEED": "0",
            }
            os.execve(cfg["argv"][0], cfg["argv"], env)
        finally:
            os._exit(127)
    while True:  # pid 1 of the namespace: orphans of the program are reaped here too
        got, status, usage = os.wait4(-1, 0)
        if got == pid:
            break
    return {
        "exit": os.waitstatus_to_exitcode(status),
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "max_rss_kb": usage.ru_maxrss,
        "stdout": _tail(f"{OUT}/stdout"),
        "stderr": _tail(f"{OUT}/stderr"),
    }


def main() -> None:
    cfg = json.loads(sys.argv[1])
    status_fd = int(cfg["status_fd"])
    try:
        program = sys.stdin.buffer.read()
        warnings = make_readonly()
        cover_and_mount_work(cfg["uid"], cfg["gid"], cfg["work_kb"])
        path = os.path.join(WORK, "main.py")
        with open(path, "wb") as f:
            f.write(program)
        os.chown(path, cfg["uid"], cfg["gid"])
        report = run_child(cfg, status_fd) | {"warnings": warnings}
    except Exception as e:  # noqa: BLE001 - any set-up failure is reported, never run around
        report = {"setup_error": f"{type(e).__name__}: {e}"}
    os.write(status_fd, json.dumps(report).encode())
    os.close(status_fd)


if __name__ == "__main__":
    main()
