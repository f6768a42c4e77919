"""The kld_points table: its migration, a transactional write, a rerun that replaces, never duplicates."""

from __future__ import annotations

import duckdb
import pytest

from pareto_atlas.store import Store


def _row(kid: str, study: str = "s", kld: float = 0.08) -> dict:
    return {
        "kld_id": kid,
        "study": study,
        "arm": "q4_0",
        "role": "arm",
        "quality_key": '{"weights": "Q4_0"}',
        "weights": "Q4_0",
        "kv": "f16",
        "model": "m",
        "n_tokens": 4080,
        "chunks": 16,
        "ctx": 512,
        "kld": kld,
        "kld_lo": kld * 0.9,
        "kld_hi": kld * 1.1,
        "kld_deff": 2.5,
        "top1": 0.9,
        "top1_lo": 0.88,
        "top1_hi": 0.92,
        "ln_ppl_ratio": 0.08,
        "engine": "llama-perplexity",
        "engine_version": "llama.cpp x",
        "seconds": 60.0,
        "output": "Mean    KLD:   0.080000 ±   0.003000\n",
    }


def test_kld_migration_is_recorded_and_table_exists(tmp_path):
    p = tmp_path / "s.duckdb"
    Store(p).close()
    with Store(p) as s:
        names = [r[0] for r in s.con.execute("SELECT name FROM migrations").fetchall()]
        assert "006_kld_points" in names and len(names) == len(set(names))
        assert s.kld_points().empty


def test_kld_row_round_trips_and_a_rerun_replaces_it(tmp_path):
    with Store(tmp_path / "s.duckdb") as s:
        s.put_kld(_row("a"))
        s.put_kld(_row("b", study="other"))
        assert s.has_kld_point("a") and not s.has_kld_point("zzz")
        got = s.kld_points("s")
        assert list(got.kld_id) == ["a"]
        r = got.iloc[0]
        assert (r.kld, r.kld_lo, r.kld_hi, r.top1, r.n_tokens) == (0.08, 0.08 * 0.9, 0.08 * 1.1, 0.9, 4080)
        assert r.output.startswith("Mean    KLD") and r.tool_version and r.created_at is not None
        s.put_kld(_row("a", kld=0.5))
        assert len(s.kld_points()) == 2 and s.kld_points("s").kld.iloc[0] == 0.5


def test_a_failing_kld_write_leaves_the_stored_row(tmp_path):
    with Store(tmp_path / "s.duckdb") as s:
        s.put_kld(_row("a"))
        with pytest.raises(duckdb.Error):
            s.put_kld(_row("a", kld=0.5) | {"no_such_column": 1})
        assert s.kld_points("s").kld.tolist() == [0.08]
