"""A store's integrity, read-only: `pareto-atlas check` (alias `doctor`).

What it reports: the migrations applied, missing and unknown (a newer pareto-atlas), every table
read to its end (a damaged block fails here, not halfway through a report), rows whose parent is
gone (requests without their anchor, items without their run, points without their simulation),
measured anchors without request records, and quality items saved by an arm that has not finished
(kept on purpose: a rerun resumes from them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from pareto_atlas import __version__
from pareto_atlas.store.db import StoreError, connect, io_reason, unknown_migrations
from pareto_atlas.store.migrations import MIGRATIONS

# (child table, key, parent table): a child row whose key is not in its parent is an orphan
CHILDREN = (
    ("requests", "anchor_id", "anchors"),
    ("eviction_items", "evict_id", "eviction_points"),
    ("sim_points", "sim_id", "sim_runs"),
)


@dataclass
class Report:
    path: Path
    applied: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # known to this code, not yet applied (the next open applies them)
    unknown: list[str] = field(default_factory=list)  # applied by a newer pareto-atlas
    rows: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.problems or self.unknown)

    def lines(self) -> list[str]:
        out = [
            f"store {self.path}: {'ok' if self.ok else 'PROBLEMS'} (pareto-atlas {__version__})",
            f"  migrations: {len(self.applied)} applied"
            + (
                f", {len(self.missing)} not yet applied ({', '.join(self.missing)}; the next write applies them)"
                if self.missing
                else ""
            )
            + (
                f", {len(self.unknown)} unknown to this version ({', '.join(self.unknown)}): written by a newer "
                f"pareto-atlas"
                if self.unknown
                else ""
            ),
            "  rows: " + (", ".join(f"{t} {n}" for t, n in self.rows.items()) or "none"),
        ]
        out += [f"  problem: {p}" for p in self.problems] + [f"  note: {n}" for n in self.notes]
        return out


def _tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [
        r[0]
        for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' ORDER BY table_name"
        ).fetchall()
    ]


def _count(con, sql: str) -> int:
    return int(con.execute(sql).fetchone()[0])


def check_store(path: str | Path) -> Report:
    """The integrity report of a store file, opened read-only (nothing is written, not even a
    migration). A file that cannot be opened at all raises StoreError."""
    rep = Report(Path(path))
    con = connect(rep.path, read_only=True)
    try:
        tables = _tables(con)
        if "migrations" in tables:
            rep.applied = [r[0] for r in con.execute("SELECT name FROM migrations ORDER BY name").fetchall()]
        rep.unknown = unknown_migrations(con)
        rep.missing = [n for n, _ in MIGRATIONS if n not in rep.applied]
        for t in tables:
            try:
                # every column of every row: a damaged block fails to decode here
                con.execute(f'SELECT sum(length(CAST(COLUMNS(*) AS VARCHAR))) FROM "{t}"').fetchall()
                rep.rows[t] = _count(con, f'SELECT count(*) FROM "{t}"')
            except duckdb.Error as e:
                rep.problems.append(f"table {t} cannot be read to its end: {io_reason(e)}")
        readable = set(rep.rows)
        for child, key, parent in CHILDREN:
            if {child, parent} <= readable:
                n = _count(
                    con,
                    f'SELECT count(*) FROM "{child}" c WHERE NOT EXISTS '
                    f'(SELECT 1 FROM "{parent}" p WHERE p.{key} = c.{key})',
                )
                if n:
                    rep.problems.append(f"{n} {child} row(s) whose {key} has no row in {parent} (orphaned)")
        if {"anchors", "requests"} <= readable:
            bare = con.execute(
                "SELECT anchor_id, arm FROM anchors a WHERE status = 'ok' AND NOT EXISTS "
                "(SELECT 1 FROM requests r WHERE r.anchor_id = a.anchor_id)"
            ).fetchall()
            if bare:
                rep.problems.append(
                    f"{len(bare)} measured anchor(s) without request records, e.g. arm {bare[0][1]!r} "
                    f"({bare[0][0]}): their figures cannot be traced to requests"
                )
        if {"sim_runs", "sim_points"} <= readable:
            off = con.execute(
                "SELECT r.sim_id, r.n_points, count(p.sim_id) FROM sim_runs r LEFT JOIN sim_points p "
                "ON p.sim_id = r.sim_id GROUP BY r.sim_id, r.n_points "
                "HAVING count(p.sim_id) != r.n_points"
            ).fetchall()
            if off:
                rep.problems.append(
                    f"{len(off)} simulation run(s) whose points do not match their count, e.g. "
                    f"{off[0][0]}: {off[0][2]} of {off[0][1]}"
                )
        if {"quality_items", "quality_runs"} <= readable:
            pending = _count(
                con,
                "SELECT count(DISTINCT qrun_id) FROM quality_items i WHERE NOT EXISTS "
                "(SELECT 1 FROM quality_runs r WHERE r.qrun_id = i.qrun_id)",
            )
            if pending:
                rep.notes.append(
                    f"{pending} quality arm(s) stopped midway: their saved items are kept, a rerun resumes from them"
                )
    except duckdb.Error as e:
        raise StoreError(f"store {rep.path}: cannot read: {io_reason(e)}") from None
    finally:
        con.close()
    return rep
