"""The store: migrations, transactional anchor writes, simulated points, export."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest

from pareto_atlas.store import Store, StoreError
from pareto_atlas.store.db import now


def _anchor(aid: str, status: str = "ok") -> dict:
    return {
        "anchor_id": aid,
        "study": "s",
        "arm": "a",
        "repeat": 0,
        "status": status,
        "reason": None,
        "knobs_json": "{}",
        "metrics_json": '{"ttft_p50_ms": 1.0}',
        "started_at": now(),
        "finished_at": now(),
    }


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


def _evict_row(eid: str, policy: str = "h2o", keep: float = 0.5, correct: int = 2) -> dict:
    return {
        "evict_id": eid,
        "ref_id": "ref",
        "study": "s",
        "model": "m",
        "model_sha256": "abc",
        "task": "retrieval",
        "mode": "niah",
        "n": 1,
        "seed": 0,
        "items_json": "{}",
        "policy": policy,
        "keep": keep,
        "chunk": 128,
        "label": f"{policy}@{keep:g}",
        "kv_keep": keep - 0.02,
        "peak_kv_tokens": 300,
        "kv_bytes_per_token": 9216,
        "n_items": 3,
        "correct": correct,
        "p": correct / 3,
        "lo": 0.2,
        "hi": 0.9,
        "ppl": 5.5,
        "ppl_full": 5.0,
        "ppl_item": "retrieval/niah/L256/d0.90/0",
        "seconds": 12.0,
        "engine": "transformers-dense-gguf",
        "engine_version": "t",
    }


def test_eviction_point_and_items_round_trip_and_resume(tmp_path):
    p = tmp_path / "s.duckdb"
    with Store(p) as s:
        assert not s.has_eviction_point("e1") and s.eviction_points().empty
        s.put_eviction_point(
            _evict_row("e1"), [{"item_id": "b", "correct_strict": False}, {"item_id": "a", "correct_strict": True}]
        )
        # a failing write leaves the stored point and its items as they were
        with pytest.raises(duckdb.Error):
            s.put_eviction_point(_evict_row("e1") | {"no_such_column": 1}, [{"item_id": "z"}])
    with Store(p) as s:  # committed: a rerun finds it and skips it
        assert s.has_eviction_point("e1")
        got = s.eviction_points("s")
        assert len(got) == 1 and got.kv_keep.iloc[0] == pytest.approx(0.48) and got.created_at.notna().all()
        assert got.tool_version.iloc[0] and got.engine.iloc[0] == "transformers-dense-gguf"
        assert [it["item_id"] for it in s.eviction_items("e1")] == ["a", "b"]
        # writing the same point again replaces it and its items, never duplicates
        s.put_eviction_point(_evict_row("e1", correct=3), [{"item_id": "a", "correct_strict": True}])
        assert len(s.eviction_points()) == 1 and s.eviction_points().correct.iloc[0] == 3
        assert len(s.eviction_items("e1")) == 1
        assert s.eviction_points("other").empty
