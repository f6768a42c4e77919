"""Machine-readable outputs: JSON, CSV and Parquet of the points, frontier and winners tables."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd
import pyarrow as pa

FORMATS = ("json", "csv", "parquet")


def _parquet_safe(df: pd.DataFrame) -> pd.DataFrame:
    """Object columns that mix types (e.g. None and str) become strings so Arrow can type them."""
    out = df.copy()
    for c in out.columns:
        if out[c].dtype == object:
            kinds = {type(v) for v in out[c].dropna()}
            if len(kinds) > 1 or (kinds and not kinds <= {str, bool, float, int}):
                out[c] = out[c].map(lambda v: None if v is None or (isinstance(v, float) and v != v) else str(v))
    return out


def export_table(df: pd.DataFrame, out_dir: Path, name: str, formats: Iterable[str] = FORMATS) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for fmt in formats:
        p = out_dir / f"{name}.{fmt}"
        if fmt == "json":
            df.to_json(p, orient="records", indent=1, double_precision=10)
        elif fmt == "csv":
            df.to_csv(p, index=False)
        elif fmt == "parquet":
            try:
                df.to_parquet(p, index=False)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
                _parquet_safe(df).to_parquet(p, index=False)
        else:
            raise ValueError(f"export format {fmt!r}: allowed: {', '.join(FORMATS)}")
        paths[fmt] = p
    return paths


def export_all(tables: Mapping[str, pd.DataFrame], out_dir: Path, formats: Iterable[str] = FORMATS) -> dict[str, Path]:
    """Every table in every format; keys are `<table>_<format>`."""
    out = {}
    for name, df in tables.items():
        for fmt, p in export_table(df, out_dir, name, tuple(formats)).items():
            out[f"{name}_{fmt}"] = p
    return out


def winners_markdown(cells: pd.DataFrame) -> str:
    """The regime-winner table as GitHub markdown (labels escaped for the table syntax)."""

    def esc(v: object) -> str:
        s = "" if v is None or (isinstance(v, float) and v != v) else str(v)
        return s.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("<", "&lt;").replace(">", "&gt;")

    head = (
        "| regime | model | workload | hardware | winner | load | provenance | objective | value [error] | quality_rel [95 %] "
        "| rests on | stack beats every single | note |"
    )
    lines = [head, "|" + "---|" * 13]
    for r in cells.itertuples(index=False):
        if r.point_id:
            val = (
                f"{r.value:.4g}"
                if r.provenance == "measured"
                else f"{r.value:.4g} [{r.value_lo:.4g}, {r.value_hi:.4g}]"
            )
            lo, hi = getattr(r, "quality_rel_lo", None), getattr(r, "quality_rel_hi", None)
            q = f"{r.quality_rel:.3f}" + (f" [{lo:.2f}, {hi:.2f}]" if lo is not None and lo == lo else "")
        else:
            val = q = ""
        note = r.note or ""
        dep = r.deployment if isinstance(getattr(r, "deployment", None), str) else ""  # NaN where no winner
        if isinstance(getattr(r, "projected_label", None), str) and r.projected_label:
            note += (
                f"{'; ' if note else ''}projected — measure to confirm: {r.projected_label} on "
                f"{r.projected_hardware} ({r.projected_value:.4g})"
                + (f"; {cmd}" if isinstance(cmd := getattr(r, "confirm_command", ""), str) and cmd else "")
            )
        lines.append(
            "| "
            + " | ".join(
                esc(x)
                for x in (
                    r.regime,
                    getattr(r, "model", "") or "",
                    r.workload,
                    r.hardware,
                    r.label + (f" ({dep})" if dep else ""),
                    getattr(r, "load", "") or "",
                    r.provenance,
                    f"{r.direction} {r.objective}",
                    val,
                    q,
                    getattr(r, "evidence", "") or "",
                    "yes" if r.stack_beats_singles else "",
                    note,
                )
            )
            + " |"
        )
    return "\n".join(lines) + "\n"
