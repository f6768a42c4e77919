"""The store: one DuckDB file holding every anchor, request, quality item, calibration and
simulated point with its provenance.

Writes are transactional (an anchor and its requests land together or not at all), so a campaign
killed at any moment loses nothing that finished and resumes where it stopped.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

import duckdb
import pandas as pd

from pareto_atlas import __version__
from pareto_atlas.store.migrations import MIGRATIONS
from pareto_atlas.store.faults import StoreError, is_fault, io_reason


def now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, default=str)


def connect(path: Path, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """A connection to the store's file, or a one-line StoreError saying why not."""
    if read_only and not path.is_file():
        raise StoreError(f"store {path}: no such file")
    try:
        return duckdb.connect(str(path), read_only=read_only)
    except duckdb.Error as e:
        raise StoreError(f"store {path}: cannot open: {io_reason(e)}") from None


def unknown_migrations(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Migrations recorded in the file that this code does not know: a newer pareto-atlas wrote it."""
    has = con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'migrations'").fetchone()[0]
    if not has:
        return []
    known = {name for name, _ in MIGRATIONS}
    return sorted(r[0] for r in con.execute("SELECT name FROM migrations").fetchall() if r[0] not in known)


class Store:
    """A DuckDB file. Open with `Store(path)`; use as a context manager to close it."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.con = connect(self.path)
        try:
            newer = unknown_migrations(self.con)
            if newer:
                # refused before anything is written: this code would write rows the newer schema does not expect
                raise StoreError(
                    f"store {self.path}: written by a newer pareto-atlas (migration {newer[0]!r} is unknown "
                    f"to {__version__}, which knows {MIGRATIONS[0][0]}..{MIGRATIONS[-1][0]}); upgrade "
                    f"pareto-atlas to use it, or give this build another --out"
                )
            self._migrate()
        except StoreError:
            self.con.close()
            raise
        except duckdb.Error as e:
            self.con.close()
            if not is_fault(e):
                raise
            raise StoreError(f"store {self.path}: cannot read: {io_reason(e)}") from None

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.con.close()
        except duckdb.Error as e:
            # closing checkpoints the WAL into the file; where that fails (a full disk) the WAL stays
            # and the next open replays it: nothing committed is lost, so closing does not raise over it
            if not is_fault(e):
                raise

    # -- schema ---------------------------------------------------------------------------
    def _migrate(self) -> None:
        self.con.execute("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TIMESTAMP)")
        done = {r[0] for r in self.con.execute("SELECT name FROM migrations").fetchall()}
        for name, sql in MIGRATIONS:
            if name in done:
                continue
            with self.transaction():
                self.con.execute(sql)
                self.con.execute("INSERT INTO migrations VALUES (?, ?)", [name, now()])

    def transaction(self):
        store = self

        class _Tx:
            def __enter__(self):
                store.con.execute("BEGIN TRANSACTION")

            def __exit__(self, exc_type, exc, tb):
                try:
                    store.con.execute("ROLLBACK" if exc_type else "COMMIT")
                except duckdb.Error as e:
                    if not is_fault(e):
                        raise
                    # a failed COMMIT is rolled back by DuckDB: this write is lost, every earlier one kept
                    if exc_type is None or is_fault(exc):
                        raise StoreError(
                            f"store {store.path}: could not save: {io_reason(exc or e)}; this write "
                            f"was rolled back, everything saved before it is kept"
                        ) from None
                    return False
                if exc_type is not None and is_fault(exc):
                    raise StoreError(
                        f"store {store.path}: could not save: {io_reason(exc)}; this write was "
                        f"rolled back, everything saved before it is kept"
                    ) from None
                return False

        return _Tx()

    # -- anchors ----------------------------------------------------------------------------
    def anchor_status(self, anchor_id: str) -> str | None:
        row = self.con.execute("SELECT status FROM anchors WHERE anchor_id = ?", [anchor_id]).fetchone()
        return row[0] if row else None

    def _replace(
        self, table: str, key: str, row: dict, children: str | None = None, child_rows: list[tuple] = ()
    ) -> None:
        """Write one row (and its child rows) in one transaction, replacing an earlier try of the same key."""
        row = {**row, "tool_version": __version__}
        cols = list(row)
        with self.transaction():
            if children:
                self.con.execute(f"DELETE FROM {children} WHERE {key} = ?", [row[key]])
            self.con.execute(f"DELETE FROM {table} WHERE {key} = ?", [row[key]])
            self.con.execute(
                f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", [row[c] for c in cols]
            )
            if child_rows:
                self.con.executemany(
                    f"INSERT INTO {children} VALUES ({', '.join('?' * len(child_rows[0]))})", child_rows
                )

    def put_anchor(self, row: dict, records: Iterable[dict]) -> None:
        """Write an anchor and its raw per-request records in one transaction (replacing a failed try)."""
        recs = [(row["anchor_id"], r["idx"], bool(r.get("warmup")), bool(r.get("ok")), dumps(r)) for r in records]
        self._replace("anchors", "anchor_id", row, "requests", recs)

    def anchors(self, study: str | None = None, status: str | None = "ok") -> pd.DataFrame:
        q, args = "SELECT * FROM anchors WHERE 1=1", []
        if study is not None:
            q, args = q + " AND study = ?", args + [study]
        if status is not None:
            q, args = q + " AND status = ?", args + [status]
        return self.con.execute(q + " ORDER BY started_at", args).df()

    def requests(self, anchor_id: str) -> list[dict]:
        rows = self.con.execute(
            "SELECT record_json FROM requests WHERE anchor_id = ? ORDER BY idx", [anchor_id]
        ).fetchall()
        return [json.loads(r[0]) for r in rows]

    # -- quality ------------------------------------------------------------------------------
    def quality_status(self, qrun_id: str) -> str | None:
        row = self.con.execute("SELECT status FROM quality_runs WHERE qrun_id = ?", [qrun_id]).fetchone()
        return row[0] if row else None

    def put_quality_run(self, row: dict, items: Iterable[dict]) -> None:
        """Write a quality run and its per-item records in one transaction."""
        recs = [(row["qrun_id"], str(it["item_id"]), dumps(it)) for it in items]
        self._replace("quality_runs", "qrun_id", row, "quality_items", recs)

    def put_quality_item(self, qrun_id: str, item: dict) -> None:
        """Save one scored item as soon as it exists, so a quality arm stopped midway resumes
        with the items it already has (the run's own row comes when the arm finishes)."""
        with self.transaction():
            self.con.execute(
                "DELETE FROM quality_items WHERE qrun_id = ? AND item_id = ?", [qrun_id, str(item["item_id"])]
            )
            self.con.execute("INSERT INTO quality_items VALUES (?, ?, ?)", [qrun_id, str(item["item_id"]), dumps(item)])

    def quality_runs(self, study: str | None = None, status: str | None = "ok") -> pd.DataFrame:
        q, args = "SELECT * FROM quality_runs WHERE 1=1", []
        if study is not None:
            q, args = q + " AND study = ?", args + [study]
        if status is not None:
            q, args = q + " AND status = ?", args + [status]
        return self.con.execute(q + " ORDER BY started_at", args).df()

    def quality_items(self, qrun_id: str) -> list[dict]:
        rows = self.con.execute(
            "SELECT record_json FROM quality_items WHERE qrun_id = ? ORDER BY item_id", [qrun_id]
        ).fetchall()
        return [json.loads(r[0]) for r in rows]

    # -- KV eviction (measured in transformers) -----------------------------------------------------
    def has_eviction_point(self, evict_id: str) -> bool:
        return self.con.execute("SELECT count(*) FROM eviction_points WHERE evict_id = ?", [evict_id]).fetchone()[0] > 0

    def put_eviction_point(self, row: dict, items: Iterable[dict]) -> None:
        """Write one eviction point and its scored item records in one transaction."""
        row = {"created_at": now(), **row}
        recs = [(row["evict_id"], str(it["item_id"]), dumps(it)) for it in items]
        self._replace("eviction_points", "evict_id", row, "eviction_items", recs)

    def eviction_points(self, study: str | None = None) -> pd.DataFrame:
        q, args = "SELECT * FROM eviction_points", []
        if study is not None:
            q, args = q + " WHERE study = ?", [study]
        return self.con.execute(q + " ORDER BY created_at", args).df()

    def eviction_items(self, evict_id: str) -> list[dict]:
        rows = self.con.execute(
            "SELECT record_json FROM eviction_items WHERE evict_id = ? ORDER BY item_id", [evict_id]
        ).fetchall()
        return [json.loads(r[0]) for r in rows]

    # -- KL divergence against the baseline (llama-perplexity) ---------------------------------------
    def has_kld_point(self, kld_id: str) -> bool:
        return self.con.execute("SELECT count(*) FROM kld_points WHERE kld_id = ?", [kld_id]).fetchone()[0] > 0

    def put_kld(self, row: dict) -> None:
        """Write one configuration's KL-divergence row in one transaction (replacing an earlier one)."""
        self._replace("kld_points", "kld_id", {"created_at": now(), **row})

    def kld_points(self, study: str | None = None) -> pd.DataFrame:
        q, args = "SELECT * FROM kld_points", []
        if study is not None:
            q, args = q + " WHERE study = ?", [study]
        return self.con.execute(q + " ORDER BY created_at", args).df()

    # -- calibration --------------------------------------------------------------------------
    def put_calibration(self, row: dict) -> None:
        self._replace("calibrations", "calib_id", {**row, "created_at": now()})

    def calibrations(self, study: str | None = None) -> pd.DataFrame:
        q, args = "SELECT * FROM calibrations", []
        if study is not None:
            q, args = q + " WHERE study = ?", [study]
        return self.con.execute(q + " ORDER BY created_at", args).df()

    # -- hardware probes ------------------------------------------------------------------------
    def put_probe(self, probe_id: str, hardware: str, card: dict) -> None:
        with self.transaction():
            self.con.execute("DELETE FROM hardware_probes WHERE probe_id = ?", [probe_id])
            self.con.execute(
                "INSERT INTO hardware_probes VALUES (?, ?, ?, ?)", [probe_id, hardware, dumps(card), now()]
            )

    def latest_probe(self, hardware: str) -> dict | None:
        row = self.con.execute(
            "SELECT card_json FROM hardware_probes WHERE hardware = ? ORDER BY created_at DESC LIMIT 1", [hardware]
        ).fetchone()
        return json.loads(row[0]) if row else None

    # -- simulated points ------------------------------------------------------------------------
    def put_sim_run(self, sim_id: str, study: str, calib_id: str | None, points: pd.DataFrame) -> None:
        """Replace a simulation run's points (a points table, contract 1) in one transaction."""
        df = points.assign(sim_id=sim_id)
        self.con.register("_incoming", df)
        try:
            with self.transaction():
                exists = self.con.execute(
                    "SELECT count(*) FROM information_schema.tables WHERE table_name = 'sim_points'"
                ).fetchone()[0]
                if not exists:
                    self.con.execute("CREATE TABLE sim_points AS SELECT * FROM _incoming LIMIT 0")
                have = {
                    r[0]
                    for r in self.con.execute(
                        "SELECT column_name FROM information_schema.columns WHERE table_name = 'sim_points'"
                    ).fetchall()
                }
                for col in df.columns:
                    if col not in have:
                        dtype = self.con.execute(f'SELECT typeof("{col}") FROM _incoming LIMIT 1').fetchone()
                        self.con.execute(
                            f'ALTER TABLE sim_points ADD COLUMN "{col}" {dtype[0] if dtype else "VARCHAR"}'
                        )
                self.con.execute("DELETE FROM sim_points WHERE sim_id = ?", [sim_id])
                self.con.execute("DELETE FROM sim_runs WHERE sim_id = ?", [sim_id])
                self.con.execute("INSERT INTO sim_points BY NAME SELECT * FROM _incoming")
                self.con.execute(
                    "INSERT INTO sim_runs VALUES (?, ?, ?, ?, ?, ?)",
                    [sim_id, study, calib_id, len(df), now(), __version__],
                )
        finally:
            self.con.unregister("_incoming")

    def sim_points(self, sim_id: str | None = None, study: str | None = None) -> pd.DataFrame:
        exists = self.con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'sim_points'"
        ).fetchone()[0]
        if not exists:
            return pd.DataFrame()
        if sim_id is None:
            q = (
                "SELECT sim_id FROM sim_runs"
                + (" WHERE study = ?" if study else "")
                + " ORDER BY created_at DESC LIMIT 1"
            )
            row = self.con.execute(q, [study] if study else []).fetchone()
            if row is None:
                return pd.DataFrame()
            sim_id = row[0]
        return self.con.execute("SELECT * FROM sim_points WHERE sim_id = ?", [sim_id]).df()

    # -- a sweep's saved shards (simulate.resume) ---------------------------------------------------
    def sim_shard(self, sweep_key: str, shard: int) -> bytes | None:
        row = self.con.execute(
            "SELECT points FROM sim_shards WHERE sweep_key = ? AND shard = ?", [sweep_key, shard]
        ).fetchone()
        return bytes(row[0]) if row else None

    def put_sim_shard(self, sweep_key: str, study: str, shard: int, n_shards: int, points: bytes) -> None:
        with self.transaction():
            self.con.execute("DELETE FROM sim_shards WHERE sweep_key = ? AND shard = ?", [sweep_key, shard])
            self.con.execute(
                "INSERT INTO sim_shards VALUES (?, ?, ?, ?, ?, ?, ?)",
                [sweep_key, study, shard, n_shards, points, now(), __version__],
            )

    def prune_sim_shards(self, study: str, keep: str) -> None:
        """Drop this study's shards of every sweep but `keep` (they would never be resumed)."""
        with self.transaction():
            self.con.execute("DELETE FROM sim_shards WHERE study = ? AND sweep_key != ?", [study, keep])

    # -- export ------------------------------------------------------------------------------
    def export(self, out_dir: Path, fmt: str = "parquet") -> list[Path]:
        if fmt not in ("parquet", "csv", "json"):
            raise StoreError(f"export format {fmt!r}: allowed parquet, csv, json")
        out_dir.mkdir(parents=True, exist_ok=True)
        paths = []
        tables = [
            r[0]
            for r in self.con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
            ).fetchall()
        ]
        for t in tables:
            p = out_dir / f"{t}.{fmt}"
            opts = {"parquet": "(FORMAT parquet)", "csv": "(FORMAT csv, HEADER)", "json": "(FORMAT json, ARRAY true)"}[
                fmt
            ]
            self.con.execute(f"COPY {t} TO '{p}' {opts}")
            paths.append(p)
        return paths
