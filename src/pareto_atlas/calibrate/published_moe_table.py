"""The published mixture-of-experts table (spec/published_moe.csv): rows of the published table's
columns (calibrate.published_table: COLUMNS, PARALLEL) plus each row's expert layout, `ep` (expert
parallel degree) and `attn_dp` (attention data-parallel groups), validated row by row.

A worker's GPUs here are tp x attn_dp x pp (Knobs.gpus_per_worker), so n_gpus = tp x attn_dp x pp x
replicas; everything else is checked as the dense table checks it (published_table.row_error), and
the layout as a simulated point's is (simulate.parallel.check_moe_layout). Written by
scripts/read_published.py --moe.
"""

from __future__ import annotations

import csv
import hashlib
import io
from importlib import resources
from pathlib import Path

import pandas as pd

from pareto_atlas.calibrate.published_table import (
    COLUMNS,
    MAX_PARALLEL,
    PARALLEL,
    PARALLEL_DEFAULT,
    PublishedTable,
    PublishedTableError,
    _sha,
    anchor_row,
    row_error,
)
from pareto_atlas.simulate.parallel import check_moe_layout
from pareto_atlas.spec.bounds import show
from pareto_atlas.spec.cards import shipped_models

SHIPPED_MOE = "published_moe.csv"
MOE_PARALLEL = ("ep", "attn_dp")
HEADER = list(COLUMNS[:-1]) + list(PARALLEL) + list(MOE_PARALLEL) + ["notes"]


def moe_row_error(r: dict[str, str]) -> str:
    """Why this MoE row is invalid ("" when valid): the first broken field and what it allows."""
    v = {}
    for f in MOE_PARALLEL:
        raw = (r.get(f) or "").strip() or "1"
        try:
            v[f] = int(raw)
        except ValueError:
            return f"field {f!r}: {show(raw)} is not an integer"
        if not 1 <= v[f] <= MAX_PARALLEL:
            return f"field {f!r}: {show(raw)} must be >= 1 and <= {MAX_PARALLEL}"
    moe = sorted(n for n, m in shipped_models().items() if m.is_moe)
    if r.get("model") not in moe:
        return f"field 'model': {show(r.get('model', ''))} is not a mixture-of-experts card; allowed: {', '.join(moe)}"
    try:
        n = int((r.get("n_gpus") or "1").strip())
    except ValueError:
        return f"field 'n_gpus': {show(r.get('n_gpus', ''))} is not an integer"
    if n % v["attn_dp"]:
        return f"field 'n_gpus': {n} is not tp x attn_dp x pp x replicas (attn_dp {v['attn_dp']} does not divide it)"
    # the dense checks see one attention-DP group: n_gpus / attn_dp = tp x pp x replicas
    if err := row_error({**r, "n_gpus": str(n // v["attn_dp"])}):
        return err.replace("tp * pp * replicas", "tp * attn_dp * pp * replicas / attn_dp")
    tp = int(r.get("tp") or 1)
    if (tp * v["attn_dp"]) % v["ep"]:
        return f"field 'ep': {v['ep']} does not divide tp x attn_dp = {tp * v['attn_dp']}"
    if err := check_moe_layout(shipped_models()[r["model"]], tp, v["ep"], v["attn_dp"]):
        return err.replace("knobs.", "field ")
    return ""


def read_moe_table(path: Path | str | None = None) -> list[dict[str, str]]:
    """The rows of one MoE table (the shipped one when path is None), each with its `origin`."""
    if path is None:
        text, name = resources.files("pareto_atlas.spec").joinpath(SHIPPED_MOE).read_text(), f"spec/{SHIPPED_MOE}"
    else:
        if not Path(path).is_file():
            raise FileNotFoundError(f"published MoE table {path}: no such file")
        text, name = Path(path).read_text(), str(path)
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in HEADER if c not in (reader.fieldnames or [])]
    if missing:
        raise PublishedTableError(f"{name}:1: missing columns {', '.join(missing)}; columns: {', '.join(HEADER)}")
    rows = []
    try:
        for r in reader:
            r = {k: (v or "").strip() for k, v in r.items() if isinstance(k, str) and isinstance(v, (str, type(None)))}
            if err := moe_row_error(r):
                raise PublishedTableError(f"{name}:{reader.line_num}: {err}")
            rows.append(
                {
                    **{c: r.get(c, "") for c in COLUMNS},
                    **{c: r.get(c, "") or PARALLEL_DEFAULT[c] for c in PARALLEL},
                    **{c: r.get(c, "") or "1" for c in MOE_PARALLEL},
                    "origin": f"{name}:{reader.line_num}",
                }
            )
    except csv.Error as e:
        raise PublishedTableError(f"{name}:{reader.line_num}: not a CSV table ({e})") from None
    return rows


def load_moe(paths: list[Path | str] | None = None, shipped: bool = True) -> PublishedTable:
    """The shipped MoE table (unless shipped=False) and the user's, validated, as one table."""
    sources = ([None] if shipped else []) + list(paths or [])
    rows = [r for p in sources for r in read_moe_table(p)]
    if not rows:
        raise PublishedTableError("no published MoE rows: the tables given are empty")
    df = pd.DataFrame(rows)
    sha = _sha(df)  # over the dense columns; the layout's own below
    sha = hashlib.sha256((sha + df[list(MOE_PARALLEL)].to_csv(index=False)).encode()).hexdigest()
    return PublishedTable(df, tuple("spec/" + SHIPPED_MOE if p is None else str(p) for p in sources), sha)


def moe_anchor_row(r: pd.Series, max_seqs: int | None = None, policy: tuple[str, int, int] | None = None) -> dict:
    """published_table.anchor_row with the row's expert layout in its knobs."""
    out = anchor_row(r, max_seqs, policy)
    for f in MOE_PARALLEL:
        if int(r[f]) != 1:
            out[f] = int(r[f])
    return out
