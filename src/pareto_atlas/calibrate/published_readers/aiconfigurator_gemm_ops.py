"""Reader of aiconfigurator's measured GEMM tables: ai-dynamo/aiconfigurator
`aic-core/src/aiconfigurator_core/systems/data/<card>/gemm/<engine>/<release>/gemm_perf.parquet`, one linear
layer (an m x k activation times a k x n weight, the engine's own Linear module with its quantization) timed
alone per (m, n, k) and GEMM format (`gemm_dtype`), on one card under one engine release.

What the file states, kept under its own column names and units: framework, version, device, op_name,
kernel_source, gemm_dtype, m, n, k, latency (milliseconds per call). Each row read gets the card and engine
as the product names them (hardware.toml, the engine's name) and its provenance
`published:aiconfigurator gemm_perf <card>/<engine>/<release> @<commit>`.

What is left out, and why (counted in `skipped`): formats the caller does not ask for, rows past a decode
step's few tokens (m over MAX_M: the tables' prefill sizes are compute-bound, which the cost model's FLOP
terms price), weights outside the projections of one GPU's share of the shipped dense models at TP 1-8
(n or k below 1,024 or above 16,384: the tables' 32- to 512-wide and 51,200- to 65,536-wide shapes), and rows
whose framework, version or device disagree with the path they were read from.
"""

from __future__ import annotations

from dataclasses import dataclass

from pareto_atlas.calibrate.published_readers import ReadResult
from pareto_atlas.calibrate.published_readers.aiconfigurator_moe_ops import CARDS, open_table, states_its_path

COLUMNS = ("framework", "version", "device", "op_name", "kernel_source", "gemm_dtype", "m", "n", "k", "latency")
# the shipped table's columns: the product's names for card and engine, the file's columns less those every
# row read holds alike (framework, device and op_name: the path's), provenance
KEPT = tuple(c for c in COLUMNS if c not in ("framework", "device", "op_name"))
HEADER = ("gpu", "engine", *KEPT, "source")
SHIPPED = "published_gemm_ops.csv"  # spec/
PATH = "aic-core/src/aiconfigurator_core/systems/data/{card}/gemm/{engine}/{release}/gemm_perf.parquet"
MAX_M = 16  # a decode step's tokens at the few clients where a call's fixed cost shows
M_READ = (1, 8, 16)  # the m read (every table holds these; the fixed cost is flat over 1-16: 2026-12-03-h100-tpot)
N_K = (1024, 16384)  # the weight shapes read, inclusive


class GemmOpsFileError(ValueError):
    """A gemm_perf file lacks a column or holds a bad value; the message names the file and the column."""


@dataclass(frozen=True)
class OpsFile:
    repo: str
    path: str  # PATH filled in
    commit: str  # 40 hex digits
    data: bytes  # the parquet file's bytes

    @property
    def where(self) -> tuple[str, str, str]:
        """(aiconfigurator's card folder, engine, release) from the path."""
        parts = self.path.split("/")
        if len(parts) < 5 or parts[-1] != "gemm_perf.parquet" or parts[-4] != "gemm":
            raise GemmOpsFileError(f"{self.path}: not a <card>/gemm/<engine>/<release>/gemm_perf.parquet path")
        return parts[-5], parts[-3], parts[-2]


def read(src: OpsFile, dtypes: set[str]) -> ReadResult:
    """The rows of `src` of the given formats at m in M_READ and n, k within N_K, the latency to 5
    significant digits (ms); one row per row of the file."""
    card, engine, release, df, prov = open_table(src, COLUMNS, GemmOpsFileError, "gemm_perf")
    res = ReadResult()
    lo, hi = N_K
    for r in df.itertuples(index=False):
        if not states_its_path(r, card, engine, release):
            res.skip("framework, version or device not the path's")
        elif r.op_name != "gemm":
            res.skip(f"op_name {r.op_name}")
        elif r.gemm_dtype not in dtypes:
            res.skip(f"gemm_dtype {r.gemm_dtype} not asked for")
        elif int(r.m) > MAX_M:
            res.skip(f"m over {MAX_M} (a prefill's compute-bound sizes)")
        elif int(r.m) not in M_READ:
            res.skip(f"m not one of {', '.join(map(str, M_READ))}")
        elif not (lo <= int(r.n) <= hi and lo <= int(r.k) <= hi):
            res.skip(f"n or k outside {lo}-{hi}")
        else:
            row = {c: str(getattr(r, c)) for c in KEPT} | {"latency": f"{float(r.latency):.5g}"}
            res.rows.append({"gpu": CARDS[card], "engine": engine, **row, "source": prov})
    return res


def row_error(r: dict[str, str]) -> str:
    """'' if a shipped row is well formed, else one line naming the field."""
    for c in HEADER:
        if c not in r or r[c] == "":
            return f"{c}: missing"
    for c in ("m", "n", "k"):
        try:
            if int(r[c]) < 1:
                return f"{c}: {r[c]!r} must be an integer >= 1"
        except ValueError:
            return f"{c}: {r[c]!r} must be an integer >= 1"
    try:
        if not float(r["latency"]) > 0:
            return f"latency: {r['latency']!r} must be > 0 ms"
    except ValueError:
        return f"latency: {r['latency']!r} must be a number of ms"
    if not r["source"].startswith("published:aiconfigurator gemm_perf "):
        return f"source: {r['source']!r} must read 'published:aiconfigurator gemm_perf <card>/<engine>/<release> @<commit>'"
    return ""
