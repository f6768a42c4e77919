"""The store: migrations, transactional anchor writes, simulated points, export."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest

from pareto_atlas.store import Store, StoreError
from pareto_atlas.store.db import now


def _anchor(aid: str, status: str = "ok") -> dict:
    return {"anchor_id": aid, "study": "s", "arm": "a", "repeat": 0, "status": status, "reason": None,
            "knobs_json": "{}", "metrics_json": '{"ttft_p50_ms": 1.0}', "started_at": now(), "finished_at": now()}


def test_migrations_are_recorded_once(tmp_path):
    p = tmp_path / "s.duckdb"
    Store(p).close()
    with Store(p) as s:
        names = [r[0] for r in s.con.execute("SELECT name FROM migrations").fetchall()]
    assert len(names) == len(set(names)) >= 3


def test_anchor_and_requests_land_together(tmp_path):
    with Store(tmp_path / "s.duckdb") as s:
        s.put_anchor(_anchor("x"), [{"idx": 0, "ok": True}, {"idx": 1, "ok": False}])
        assert s.anchor_status("x") == "ok"
        assert [r["idx"] for r in s.requests("x")] == [0, 1]
        # a failing write leaves the earlier state intact
        bad = _anchor("x") | {"no_such_column": 1}
        with pytest.raises(duckdb.Error):
            s.put_anchor(bad, [{"idx": 5}])
        assert [r["idx"] for r in s.requests("x")] == [0, 1]
        # a rerun replaces a failed anchor, never duplicates it
        s.put_anchor(_anchor("y", "failed"), [])
        s.put_anchor(_anchor("y"), [{"idx": 0, "ok": True}])
        assert len(s.anchors(status=None)) == 2 and s.anchor_status("y") == "ok"


def test_committed_anchor_survives_reopen(tmp_path):
    p = tmp_path / "s.duckdb"
    with Store(p) as s:
        s.put_anchor(_anchor("x"), [{"idx": 0, "ok": True}])
    with Store(p) as s:
        assert s.anchor_status("x") == "ok"


def test_sim_points_round_trip_and_schema_growth(tmp_path):
    with Store(tmp_path / "s.duckdb") as s:
        s.put_sim_run("r1", "s", None, pd.DataFrame({"point_id": ["a", "b"], "tpot_p50_ms": [1.0, 2.0]}))
        s.put_sim_run("r2", "s", None, pd.DataFrame({"point_id": ["c"], "tpot_p50_ms": [3.0], "mem_gb": [0.5]}))
        latest = s.sim_points(study="s")
        assert list(latest.point_id) == ["c"] and latest.mem_gb.iloc[0] == 0.5
        assert len(s.sim_points("r1")) == 2


def test_not_a_database_is_one_line(tmp_path):
    p = tmp_path / "bad.duckdb"
    p.write_text("this is not a database")
    with pytest.raises(StoreError) as e:
        Store(p)
    assert "\n" not in str(e.value) and str(p) in str(e.value)


def test_export_writes_every_table(tmp_path):
    with Store(tmp_path / "s.duckdb") as s:
        s.put_anchor(_anchor("x"), [{"idx": 0, "ok": True}])
        paths = s.export(tmp_path / "out", "csv")
    assert {p.stem for p in paths} >= {"anchors", "requests", "quality_runs", "calibrations"}
