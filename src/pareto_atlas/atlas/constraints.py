"""The small constraint language shared by regimes and `pick`.

    "tpot_p99_ms<=40, quality_rel>=95%, hardware!=L4"

Clauses are separated by commas or the word `and`; each is `column operator value`. Numeric
columns take <=, <, >=, >, ==, != and a number (a trailing % divides by 100); text columns take
== and != only. Errors name the bad token and what is allowed, in one line.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pareto_atlas.atlas.objectives import OBJECTIVE_COLUMNS, OTHER_NUMERIC

OPS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt, "==": operator.eq, "!=": operator.ne}
NUMERIC_COLUMNS = (
    *OBJECTIVE_COLUMNS,
    *OTHER_NUMERIC,
    "lat_rel_err",
    "thr_rel_err",
    "kv_keep",
    "spec_k",
    "spec_accept",
    "slots",
    "chunk_tokens",
    "sparse_budget",
    "quality_lo",
    "quality_hi",
    "gpus",
    "tp",
    "pp",
    "replicas",
    "prefill_workers",
    "prefill_tp",
    "decode_workers",
)
TEXT_COLUMNS = (
    "hardware",
    "workload",
    "provenance",
    "quality_provenance",
    "label",
    "optimizations",
    "weights",
    "kv",
    "eviction",
    "spec",
    "batching",
    "point_id",
)
ALLOWED_COLUMNS = NUMERIC_COLUMNS + TEXT_COLUMNS

_CLAUSE = re.compile(r"^\s*(?P<col>[^\s<>=!]+)\s*(?P<op>[<>=!]+)?\s*(?P<val>.*?)\s*$")


class ConstraintError(ValueError):
    """A constraint the language cannot read; the message is one actionable line."""


@dataclass(frozen=True)
class Constraint:
    column: str
    op: str
    value: float | str

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ConstraintError(
                f"constraint {self.column}: operator {self.op!r} is not allowed; allowed: {', '.join(OPS)}"
            )
        if self.column in TEXT_COLUMNS and self.op not in ("==", "!="):
            raise ConstraintError(f"constraint {self.column}: text column takes == or !=, not {self.op!r}")

    def mask(self, points: pd.DataFrame) -> np.ndarray:
        """Rows that satisfy the constraint; a missing value (NaN) never satisfies it."""
        if self.column not in points.columns:
            raise ConstraintError(f"constraint {self}: points table has no column {self.column!r}")
        col = points[self.column]
        if isinstance(self.value, str):
            return OPS[self.op](col.astype(str).to_numpy(), self.value)
        v = col.to_numpy(dtype=float, na_value=np.nan)
        with np.errstate(invalid="ignore"):
            return OPS[self.op](v, float(self.value)) & np.isfinite(v)

    def __str__(self) -> str:
        v = self.value if isinstance(self.value, str) else f"{self.value:g}"
        return f"{self.column}{self.op}{v}"


def _value(column: str, raw: str, clause: str) -> float | str:
    raw = raw.strip().strip("'\"")
    if column in TEXT_COLUMNS:
        if not raw:
            raise ConstraintError(f"constraint {clause!r}: missing value after the operator")
        return raw
    text = raw[:-1] if raw.endswith("%") else raw
    try:
        v = float(text)
    except ValueError:
        raise ConstraintError(f"constraint {clause!r}: value {raw!r} is not a number (e.g. 40, 0.95, 95%)") from None
    return v / 100.0 if raw.endswith("%") else v


def parse_constraint(clause: str, columns: Iterable[str] = ALLOWED_COLUMNS) -> Constraint:
    allowed = tuple(columns)
    m = _CLAUSE.match(clause)
    if not m or not clause.strip():
        raise ConstraintError(f"constraint {clause!r}: expected 'column operator value', e.g. tpot_p99_ms<=40")
    col, op, val = m["col"], m["op"], m["val"]
    if col not in allowed:
        raise ConstraintError(f"constraint {clause.strip()!r}: unknown column {col!r}; allowed: {', '.join(allowed)}")
    if op is None:
        raise ConstraintError(f"constraint {clause.strip()!r}: missing operator; allowed: {', '.join(OPS)}")
    op = "==" if op == "=" else op
    if op not in OPS:
        raise ConstraintError(f"constraint {clause.strip()!r}: bad operator {op!r}; allowed: {', '.join(OPS)}")
    return Constraint(col, op, _value(col, val, clause.strip()))


def parse_constraints(
    text: str | Iterable[str | Constraint] | None, columns: Iterable[str] = ALLOWED_COLUMNS
) -> tuple[Constraint, ...]:
    """Parse a constraint string (or a list of clauses / Constraint objects)."""
    if text is None:
        return ()
    if isinstance(text, str):
        clauses = [c for c in re.split(r",|;|\band\b", text) if c.strip()]
    else:
        clauses = list(text)
    cols = tuple(columns)
    return tuple(c if isinstance(c, Constraint) else parse_constraint(c, cols) for c in clauses)


def constraints_from_mapping(d: Mapping[str, object], where: str = "constraints") -> tuple[Constraint, ...]:
    """The study file's form: `{column: [op, value]}`, e.g. `{tpot_p99_ms = ["<=", 40]}`."""
    out = []
    for col, spec in d.items():
        if col not in ALLOWED_COLUMNS:
            raise ConstraintError(f"{where}.{col}: unknown column; allowed: {', '.join(ALLOWED_COLUMNS)}")
        if not isinstance(spec, (list, tuple)) or len(spec) != 2:
            raise ConstraintError(f"{where}.{col}: expected [operator, value], e.g. [\"<=\", 40]; got {spec!r}")
        op, value = str(spec[0]), spec[1]
        op = "==" if op == "=" else op
        if op not in OPS:
            raise ConstraintError(f"{where}.{col}: bad operator {op!r}; allowed: {', '.join(OPS)}")
        out.append(Constraint(col, op, _value(col, str(value), f"{col}{op}{value}")))
    return tuple(out)


def satisfied(points: pd.DataFrame, constraints: Iterable[Constraint]) -> np.ndarray:
    m = np.ones(len(points), dtype=bool)
    for c in constraints:
        m &= c.mask(points)
    return m
