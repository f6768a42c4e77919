"""A store file's faults: which DuckDB errors are the file's or the disk's (damage, a full disk, a lock) rather
than a query's, and what went wrong in words a user can act on."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb


class StoreError(RuntimeError):
    """The store cannot be opened or is inconsistent."""


# DuckDB errors that are the file's or the disk's fault, not the query's: a write that meets them
# is rolled back and reported as a StoreError (a query's own mistakes stay duckdb errors).
_IO_ERRORS = (duckdb.OperationalError, duckdb.FatalException, duckdb.InternalException)


def is_fault(e: BaseException) -> bool:
    """Whether a DuckDB error is the file's or the disk's (damage, a full disk, a lock), not a query's.
    A damaged block surfaces as a bare duckdb.Error ("Corrupt database file: ... checksum")."""
    return isinstance(e, _IO_ERRORS) or (type(e) is duckdb.Error and ("Corrupt" in str(e) or "checksum" in str(e)))


def io_reason(e: BaseException) -> str:
    """What went wrong with the file, in words a user can act on."""
    msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    file = re.search(r'file "([^"]+)"', msg)
    where = f" writing {Path(file.group(1)).name}" if file else ""
    if "No space left on device" in msg:
        return f"the disk holding it is full (No space left on device{where})"
    if "File too large" in msg or "EFBIG" in msg:
        return f"the file size limit was reached (File too large{where})"
    if "Conflicting lock" in msg or "Could not set lock" in msg:
        pid = re.search(r"PID (\d+)", msg)
        return (
            f"another process{' (pid ' + pid.group(1) + ')' if pid else ''} has it open; "
            f"one build at a time per store (or give this one another --out)"
        )
    if "version number" in msg or "newer version" in msg or "storage version" in msg.lower():
        return f"it was written by a newer DuckDB than this pareto-atlas reads ({msg[:160]}); upgrade pareto-atlas"
    if (
        "Could not read enough bytes" in msg
        or "not a valid DuckDB database" in msg
        or "Corrupt" in msg
        or "checksum" in msg
    ):
        return (
            f"it is truncated or damaged ({msg[:160]}); `pareto-atlas check` reports what is readable, "
            f"a copy from before the damage (or a new --out) starts again"
        )
    return msg[:240]
