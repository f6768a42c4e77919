"""The store under damage and contention: a truncated or corrupted file, a store from a newer
version, a full disk during a campaign, two writers at once, a writer killed mid-write. Each ends
in one clear line and a store that is intact or rolled back to its last whole write, which
`pareto-atlas check` confirms."""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pareto_atlas.store import Store, StoreError
from pareto_atlas.store.db import now
from pareto_atlas.store.integrity import check_store

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{REPO / 'tests'}"}
WRITER = [sys.executable, str(REPO / "tests" / "store_writer.py")]
CLI = [sys.executable, "-m", "pareto_atlas"]


def _anchor(aid: str) -> dict:
    return {
        "anchor_id": aid,
        "study": "s",
        "arm": aid,
        "repeat": 0,
        "status": "ok",
        "reason": None,
        "knobs_json": "{}",
        "metrics_json": "{}",
        "started_at": now(),
        "finished_at": now(),
    }


def filled_store(path: Path, anchors: int = 40, records: int = 50) -> Path:
    with Store(path) as s:
        for i in range(anchors):
            s.put_anchor(_anchor(f"a{i}"), [{"idx": j, "ok": True, "text": "y" * 300} for j in range(records)])
    return path


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=timeout, env=ENV)


def error_line(p: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    assert lines and lines[-1].startswith("error: "), p.stderr[-2000:]
    return lines[-1]


def whole_anchors(path: Path, records: int) -> int:
    """Anchors in the store, each asserted to hold all its records (never half-written)."""
    with Store(path) as s:
        counts = s.con.execute(
            "SELECT a.anchor_id, count(r.idx) FROM anchors a LEFT JOIN requests r "
            "USING (anchor_id) GROUP BY a.anchor_id"
        ).fetchall()
    assert all(n == records for _, n in counts), counts
    return len(counts)


# -- a truncated or corrupted file ------------------------------------------------------------------------
@pytest.mark.parametrize("damage", ["truncated", "zeroed block"])
def test_a_damaged_store_is_one_line_and_is_not_touched(tmp_path: Path, damage: str):
    p = filled_store(tmp_path / "store.duckdb", anchors=60)
    data = p.read_bytes()
    mid = len(data) // 2
    p.write_bytes(data[:mid] if damage == "truncated" else data[:mid] + b"\0" * 65536 + data[mid + 65536 :])
    before = sha(p)
    try:
        Store(p).close()
        opened = True
    except StoreError as e:
        msg = str(e)
        assert "\n" not in msg and str(p) in msg and "damaged" in msg, msg
        opened = False
    if opened:  # the damage lies in a block read only later: check reads every table to its end
        assert not check_store(p).ok
    res = cli("check", "--store", str(p))
    assert res.returncode in (1, 2) and "Traceback" not in res.stderr
    if res.returncode == 2:
        assert "damaged" in error_line(res)
    else:
        assert "cannot be read to its end" in res.stderr
    assert sha(p) == before  # nothing tried to "repair" the file in place


def test_a_measure_on_a_truncated_store_fails_in_one_line(tmp_path: Path):
    p = filled_store(tmp_path / "o" / "store.duckdb", anchors=60)
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 3])
    res = cli("measure", "--study", "tiny", "--out", str(tmp_path / "o"))
    assert res.returncode == 2 and "truncated or damaged" in error_line(res)


# -- a store written by a newer version ---------------------------------------------------------------------
def test_a_store_from_a_newer_version_is_refused_before_anything_is_written(tmp_path: Path):
    p = filled_store(tmp_path / "store.duckdb", anchors=3)
    with Store(p) as s:
        s.con.execute("INSERT INTO migrations VALUES ('107_from_the_future', ?)", [now()])
    before = sha(p)
    with pytest.raises(StoreError) as e:
        Store(p)
    msg = str(e.value)
    assert "\n" not in msg and "newer pareto-atlas" in msg and "107_from_the_future" in msg and "upgrade" in msg
    assert sha(p) == before
    rep = check_store(p)
    assert rep.unknown == ["107_from_the_future"] and not rep.ok
    res = cli("doctor", "--store", str(p))
    assert res.returncode == 1 and "unknown to this version (107_from_the_future)" in res.stderr


# -- a full disk during a campaign ---------------------------------------------------------------------------
def _small_fs(where: Path, size_kib: int) -> bool:
    """A tmpfs of this size mounted at `where` (root in a sandbox can); False where mounting is refused."""
    where.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None or os.geteuid() != 0:
        return False
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(where)], capture_output=True)
    return r.returncode == 0


@pytest.mark.parametrize("mechanism", ["tmpfs", "file size limit"])
def test_a_full_disk_mid_campaign_is_one_line_and_keeps_every_whole_anchor(tmp_path: Path, mechanism: str):
    out = tmp_path / "fs"
    mounted = mechanism == "tmpfs" and _small_fs(out, 4096)
    if mechanism == "tmpfs" and not mounted:
        pytest.skip("mounting a tmpfs is refused here (not root, or no mount); the file size limit case stands in")
    out.mkdir(parents=True, exist_ok=True)
    try:
        store = out / "store.duckdb"
        Store(store).close()  # the schema fits; the campaign's anchors will not
        limit = None
        if mounted:
            free = os.statvfs(out).f_bavail * os.statvfs(out).f_frsize
            (out / "ballast").write_bytes(b"\0" * max(free - 96 * 1024, 0))
        else:
            # no mount here: the closest real mechanism, a file size limit on the writing process
            limit = 96 * 1024  # per file: the WAL a campaign's commits append to passes it first

        def cap():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), no signal
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        p = subprocess.run(
            WRITER + ["campaign", str(out), "40"],
            capture_output=True,
            text=True,
            timeout=300,
            env=ENV,
            preexec_fn=cap if limit else None,
        )
        assert p.returncode == 2, p.stderr[-3000:]
        line = error_line(p)
        assert ("disk holding it is full" if mounted else "file size limit") in line, line
        assert "rolled back" in line and "kept" in line
        if mounted:
            (out / "ballast").unlink()
        saved = sum(1 for ln in p.stderr.splitlines() if " ok " in ln)
        assert whole_anchors(store, 6) == saved < 40  # every anchor reported saved is there, whole
        assert check_store(store).ok
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(out)], capture_output=True)


# -- two writers at once ----------------------------------------------------------------------------------
def test_a_second_build_on_a_store_in_use_is_refused_in_one_line_and_the_first_finishes(tmp_path: Path):
    out, gate = tmp_path / "two", tmp_path / "second-tried"
    # the first build's second anchor waits for the gate: however slowly the second build starts on a
    # loaded machine, the first still holds the store when it tries
    first = subprocess.Popen(
        WRITER + ["campaign", str(out), "2", "0.03", str(gate)], stderr=subprocess.PIPE, text=True, env=ENV
    )
    try:
        seen = ""
        for line in first.stderr:  # the first anchor is saved: the store is open for writing
            seen += line
            if " ok " in line:
                break
        assert " ok " in seen, seen
        second = cli("measure", "--study", str(out / "faults.toml"), "--out", str(out))
        line = error_line(second)
        assert second.returncode == 2 and f"pid {first.pid}" in line and "one build at a time" in line, line
        gate.touch()
        rest = first.stderr.read()
        assert first.wait(timeout=300) == 0, rest[-2000:]
    finally:
        gate.touch()
        if first.poll() is None:
            first.kill()
    assert "2 measured" in rest
    assert whole_anchors(out / "store.duckdb", 6) == 2 and check_store(out / "store.duckdb").ok


# -- kill -9 mid-write -----------------------------------------------------------------------------------------
def test_a_writer_killed_mid_write_leaves_only_whole_anchors(tmp_path: Path):
    p = tmp_path / "store.duckdb"
    records = 3000  # ~0.7 MB an anchor: the kill most likely lands inside a write
    w = subprocess.Popen(WRITER + ["anchors", str(p), "200", str(records)], stdout=subprocess.PIPE, text=True, env=ENV)
    saved = -1
    for line in w.stdout:
        saved = int(line.split()[1])
        if saved >= 2:
            break
    time.sleep(0.05)
    w.kill()  # SIGKILL: no rollback, no close, the WAL as it lies
    w.wait(timeout=30)
    assert saved >= 2
    # every "saved" line the writer printed before it died counts, read or not when the kill went
    # out: a slow reader on a loaded machine is behind the writer by any number of anchors
    for line in w.stdout:
        saved = int(line.split()[1])
    rep = check_store(p)  # read-only, straight after the kill
    assert rep.ok, rep.lines()
    n = whole_anchors(p, records)
    assert saved + 1 <= n <= saved + 2  # the ones reported, and at most the one in flight, whole
    with Store(p) as s:  # and it takes writes again
        s.put_anchor(_anchor("after"), [{"idx": 0, "ok": True}])
        assert s.anchor_status("after") == "ok"


def test_a_campaign_killed_with_sigkill_resumes_without_remeasuring(tmp_path: Path):
    """The campaign process killed with SIGKILL between two anchors (no cleanup, no atexit): the anchor it
    saved is kept, whole, and a rerun measures only the other one. The same on llama.cpp, where a measured
    anchor takes tens of seconds: tests/e2e/test_build_tiny.py's (`make test-slow`)."""
    out, gate = tmp_path / "sigkill", tmp_path / "never"
    with socket.socket() as sk:  # one port for both runs: the anchors' identity names the server
        sk.bind(("127.0.0.1", 0))
        env = {**ENV, "STORE_WRITER_PORT": str(sk.getsockname()[1])}
    # the second anchor waits for a gate that never opens: the kill lands while the campaign holds the store
    w = subprocess.Popen(
        WRITER + ["campaign", str(out), "2", "0.01", str(gate)], stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        first_ok = ""
        for line in w.stderr:  # the first anchor's line ends when it is written to the store
            if " ok " in line:
                first_ok = line
                break
        w.kill()
        w.wait(timeout=30)
    finally:
        if w.poll() is None:
            w.kill()
    assert first_ok, "no anchor finished before the kill"
    assert check_store(out / "store.duckdb").ok and whole_anchors(out / "store.duckdb", 6) == 1
    p = subprocess.run(
        WRITER + ["campaign", str(out), "2", "0.01"], capture_output=True, text=True, timeout=300, env=env
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert "1 measured, 1 kept from earlier runs" in p.stderr and "0 failed" in p.stderr, p.stderr[-2000:]
    with Store(out / "store.duckdb") as s:
        assert (s.anchors("faults").status == "ok").sum() == 2


# -- a failed load changes nothing -----------------------------------------------------------------------------
def test_failed_loads_leave_the_store_as_it_was(tmp_path: Path):
    out = tmp_path / "o"
    p = filled_store(out / "store.duckdb", anchors=3, records=2)

    def content() -> dict:
        with Store(p) as s:
            return {
                t: s.con.execute(f'SELECT * FROM "{t}" ORDER BY ALL').fetchall()
                for (t,) in s.con.execute("SELECT table_name FROM information_schema.tables").fetchall()
            }

    before = content()
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "tiny"\n[model]\nname = "smollm2-135m-instruct"\nchat = 0\n[[arms]]\nname = "a"\n')
    table = tmp_path / "t.csv"
    table.write_text("source_id,source\nx,y\n")
    (tmp_path / "trace.csv").write_text("arrival_s,prompt_tokens,output_tokens\n0,64,8\nnan,64,8\n")
    traced = tmp_path / "traced.toml"
    traced.write_text(
        'name = "tiny"\n[model]\nname = "smollm2-135m-instruct"\n[workload]\ntrace = "trace.csv"\n'
        '[[arms]]\nname = "a"\n'
    )
    from typer.testing import CliRunner

    from pareto_atlas.cli import app

    for args in (
        ["measure", "--study", str(bad), "--out", str(out)],
        ["measure", "--study", str(traced), "--out", str(out)],
        ["pick", "--study", "tiny", "--out", str(out), "--price", "L4=nan"],
        ["published", "--study", "tiny", "--out", str(out), "--table", str(table)],
    ):
        res = CliRunner().invoke(app, args)  # in-process: the CLI's own error handling
        assert res.exit_code == 2 and "error: " in res.output and "Traceback" not in res.output, (args, res.output)
    assert content() == before


# -- check on a healthy store ---------------------------------------------------------------------------------
def test_check_on_a_healthy_store_is_ok_and_notes_a_quality_arm_stopped_midway(tmp_path: Path):
    from typer.testing import CliRunner

    from pareto_atlas.cli import app

    out = tmp_path / "tiny"
    p = filled_store(out / "store.duckdb", anchors=2, records=3)
    with Store(p) as s:
        s.put_quality_item("unfinished-run", {"item_id": "0", "correct": True})
    res = CliRunner().invoke(app, ["check", "--study", "tiny", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert f"store {p}: ok" in " ".join(res.output.split())
    assert "anchors 2" in res.output and "requests 6" in res.output
    assert "1 quality arm(s) stopped midway" in res.output
    rep = check_store(p)
    assert rep.ok and not rep.missing and not rep.unknown
