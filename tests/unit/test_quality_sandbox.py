"""The sandbox for model-generated code: each test runs a hostile program for real and checks, from
outside the sandbox, that the harm did not happen (each fails if its limit or namespace is gone)."""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

import pytest

from pareto_atlas.quality import sandbox as sb

FAST = sb.Limits(wall_s=5, cpu_s=2)

# Skipped only where the machine forbids namespaces; a broken sandbox fails every test below.
allowed, why = sb.machine_allows()
pytestmark = pytest.mark.skipif(not allowed, reason=f"this machine forbids the sandbox: {why}")


def _nobody_pids() -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (d / "status").read_text().split("Uid:")[1].split()[0] == str(sb.NOBODY):
                    out.append(int(d.name))
            except (OSError, IndexError):
                pass
    return out


def test_correct_program_passes_as_nobody_without_privileges():
    r = sb.run_program(
        "import os\nprint(os.getuid(), os.getgid(), os.getgroups(), os.getcwd())\n"
        "print([l for l in open('/proc/self/status') if l.startswith(('NoNewPrivs', 'CapEff'))])\n"
        "assert sum(range(10)) == 45\n",
        FAST,
    )
    assert r.status == "passed", r
    first, caps = r.stdout.splitlines()[:2]
    assert first == f"{sb.NOBODY} {sb.NOBODY} [] /tmp/work"
    assert "NoNewPrivs:\\t1" in caps and "CapEff:\\t0000000000000000" in caps


def test_a_failing_program_is_a_failed_sample_with_its_reason():
    r = sb.run_program("def f(x):\n    return x + 1\nassert f(1) == 3, 'wrong'\n", FAST)
    assert (r.status, r.reason) == ("failed", "AssertionError: wrong")


def test_cannot_open_a_connection_to_a_host_socket():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    prog = (
        f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
        "s.sendall(b'escaped')\nprint('connected')\n"
    )
    r = sb.run_program(prog, FAST)
    srv.settimeout(0.2)  # a finished handshake would wait in the backlog
    try:
        got = [srv.accept()]
    except OSError:
        got = []
    srv.close()
    assert got == [] and "connected" not in r.stdout
    assert r.status == "failed" and ("unreachable" in r.reason or "refused" in r.reason), r.reason


def test_cannot_write_outside_its_directory():
    tag = uuid.uuid4().hex
    targets = [f"/tmp/{tag}", f"/dev/shm/{tag}", f"/var/tmp/{tag}", str(Path.cwd() / tag), f"/{tag}"]
    prog = (
        "import os\nwrote = []\n"
        f"for p in {targets!r}:\n"
        "    try:\n        open(p, 'w').write('x'); wrote.append(p)\n    except OSError:\n        pass\n"
        "open('inside.txt', 'w').write('fine')\nprint('inside', open('inside.txt').read())\n"
        "assert not wrote, wrote\n"
    )
    r = sb.run_program(prog, FAST)
    leaked = [p for p in targets if os.path.exists(p)]
    for p in leaked:
        os.remove(p)
    assert leaked == [] and r.status == "passed", (r, leaked)
    assert "inside fine" in r.stdout


def test_cannot_fork_bomb_the_machine():
    prog = (
        "import os, time\nn = 0\ntry:\n    for _ in range(500):\n        if os.fork() == 0:\n"
        "            time.sleep(60); os._exit(0)\n        n += 1\nfinally:\n    print('forks', n, flush=True)\n"
    )
    r = sb.run_program(prog, FAST)
    assert r.status == "killed-by-limit" and "process limit" in r.reason, r
    assert int(r.stdout.split()[-1]) < sb.Limits().processes
    assert r.wall_s < FAST.wall_s
    assert _nobody_pids() == []  # the sleeping children died with the PID namespace


def test_cannot_exhaust_memory():
    r = sb.run_program("x = bytearray(8 << 30)\nprint('allocated', len(x))\n", FAST)
    assert r.status == "killed-by-limit" and "MemoryError" in r.reason, r
    assert "allocated" not in r.stdout


def test_cannot_run_past_its_cpu_time():
    r = sb.run_program("while True:\n    pass\n", sb.Limits(wall_s=6, cpu_s=1))
    assert r.status == "killed-by-limit" and "CPU time" in r.reason, r
    assert r.wall_s < 4


def test_cannot_run_past_its_wall_clock_even_detached():
    # sleeping uses no CPU; a child in its own session escapes the process group but not the PID namespace
    prog = "import os, time\nif os.fork() == 0:\n    os.setsid()\ntime.sleep(60)\n"
    r = sb.run_program(prog, sb.Limits(wall_s=1.5, cpu_s=5))
    assert r.status == "timeout" and 1.5 <= r.wall_s < 5, r
    assert _nobody_pids() == []


def test_cannot_fill_the_disk():
    r = sb.run_program("open('big', 'wb').write(b'x' * (64 << 20))\n", FAST)
    assert r.status == "killed-by-limit" and "file size" in r.reason, r


def test_unavailable_tools_are_an_error_result_not_an_exception(monkeypatch):
    monkeypatch.setattr(sb, "_tool", lambda name: (_ for _ in ()).throw(sb.SandboxUnavailable(f"no {name}")))
    r = sb.run_program("print(1)", FAST)
    assert r.status == "error" and "no setpriv" in r.reason


def test_limits_are_checked():
    with pytest.raises(ValueError, match="cpu_s"):
        sb.Limits(cpu_s=0)
