"""A fitted harness term of a published collection: requests that wait before an engine seat in the rows
of one collection of aiconfigurator's, whatever the engine, fitted on the collection's rows of other
models (leave-one-model-out) and used only where a published row is simulated as it was run
(calibrate.published_runs.row_run). Never in the atlas's own predictions for a user's deployment.
**Not sourced** in any engine (docs/results/2026-12-02-trt-slot.md, 2026-12-02-harness-wait.md).

Why a term of the collection: in a closed loop of `clients` clients without think time, the mean
number of requests between send and first token is, by Little's law, L = TTFT x clients / E2E with
E2E = TTFT + (output - 1) x TPOT (benchmarks/bench_trt_held_slot.py). An engine that admits every
client keeps L well under 1 at a few clients and long outputs. A queue of `h` requests that never
empties (h of the clients' requests always wait for a seat) puts L >= h on every row. Rows of one
collection (aiconfigurator's `source_file` .../aic-auto-gap-analysis/data/h100_sxm/{trtllm/1.0.0rc3,
sglang/0.5.1.post1, ...}) reach L >= 1 at 8 clients where the same engines' other rows stay far under
it; its harness is not published.

Held seats or a client-side queue: the two are the same in the rows. With `clients` clients and
`clients - h` requests in flight, h requests wait in order whether the engine holds h of its seats or
the client sends through `clients - h` connections and starts the clock when the request is queued;
the engine runs the same batches in the same order, and a row records only TTFT, TPOT and throughput,
not where the wait was. It is simulated as the first: the run's sequence limit less h (Run.max_seqs).

The count: for a row of model M in collection C, the floor of the QUANTILE-quantile of L over C's
aggregated closed-loop rows at <= LOW clients of every model but M (both shipped tables: dense and
MoE), at least MIN_ROWS of them; else 0. A held count h forces L >= h on every row; the low quantile,
not the minimum, so that a few rows do not decide. Fitted on measured figures only, not on any
simulation, so the fit of the cards that reads these rows does not feed back into it.

The collection of a row is its recorded source_file (the row's notes, as the reader keeps it:
published_readers.aiconfigurator) less its `<engine>/<engine_version>/<file>` tail where the path has
one; a file without that tail is a collection of its own. Rows with no source_file have none: 0.

PARETO_ATLAS_HARNESS_WAIT=0 switches the term off (every count 0), for a before/after on one commit.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

LOW = 16  # clients at most: where a queue that never empties, not the prefill queue, dominates L
QUANTILE = 0.1  # the low quantile of L whose floor is the count
MIN_ROWS = 6  # rows of other models at <= LOW clients the count needs; fewer: 0
ENV = "PARETO_ATLAS_HARNESS_WAIT"  # "0": the term off
_SOURCE_FILE = re.compile(r"source_file=([^;]+)")


@dataclass(frozen=True)
class HarnessWait:
    """The fitted count of requests always queued in a collection's rows, for rows of `model`."""

    collection: str
    model: str  # the model held out: the count is fitted without its rows
    count: int
    rows: int  # rows it rests on (other models', aggregated closed loop, <= LOW clients)
    quantile_l: float  # L's QUANTILE-quantile over them (nan: too few rows)

    def provenance(self) -> str:
        if self.rows < MIN_ROWS:
            return f"harness wait 0: {self.rows} rows of other models in {self.collection} (< {MIN_ROWS})"
        return (
            f"harness wait {self.count} (fitted, not sourced: floor of L's p{100 * QUANTILE:.0f} {self.quantile_l:.2f} "
            f"over {self.rows} rows of {self.collection} at <= {LOW} clients, {self.model} left out)"
        )


def source_file(row: pd.Series) -> str:
    """The source_file a row's notes record (aiconfigurator's silicon_data_source), "" where none."""
    m = _SOURCE_FILE.search(str(row.get("notes", "")))
    return m.group(1).strip() if m else ""


def collection_of(path: str, engine: str, version: str) -> str:
    """The collection of a source_file: `path` less an `<engine>/<version>/<file>` tail naming the row's
    own engine and version; the file itself where it has no such tail; "" where there is no path."""
    parts = path.split("/")
    if len(parts) > 3 and parts[-3] == engine and parts[-2] == version:
        return "/".join(parts[:-3])
    return path


def collection(row: pd.Series) -> str:
    """The collection a row was measured in (collection_of its recorded source_file)."""
    return collection_of(source_file(row), str(row.get("engine", "")), str(row.get("engine_version", "")))


def littles_l(rows: pd.DataFrame) -> pd.Series:
    """Mean requests between send and first token of each closed-loop row (no think time)."""
    ttft, tpot = rows.ttft_ms.astype(float), rows.tpot_ms.astype(float)
    clients, out = rows.load_value.astype(float), rows.output_tokens.astype(float)
    return ttft * clients / (ttft + (out - 1) * tpot)


@lru_cache(maxsize=1)
def collection_rows() -> pd.DataFrame:
    """The shipped tables' aggregated closed-loop rows that record a source_file, with their collection
    and L (both tables: calibrate.published_table.load_multigpu and published_moe_table.load_moe)."""
    from pareto_atlas.calibrate.published_moe_table import load_moe
    from pareto_atlas.calibrate.published_table import load_multigpu

    frames = []
    for t in (load_multigpu().rows, load_moe().rows):
        r = t[
            (t.load == "concurrency") & (t.prefill_workers.astype(str) == "0") & (t.ttft_ms != "") & (t.tpot_ms != "")
        ]
        frames.append(
            r[["source_id", "engine", "engine_version", "gpu", "model", "tp", "notes", "load_value"]].assign(
                ttft_ms=r.ttft_ms, tpot_ms=r.tpot_ms, output_tokens=r.output_tokens
            )
        )
    rows = pd.concat(frames, ignore_index=True)
    rows["collection"] = [collection(r) for _, r in rows.iterrows()]
    rows = rows[rows.collection != ""].reset_index(drop=True)
    rows["L"] = littles_l(rows)
    return rows


@lru_cache(maxsize=256)
def fit_wait(coll: str, model: str) -> HarnessWait:
    """The count for rows of `model` in collection `coll`, fitted on the collection's other models' rows."""
    rows = collection_rows()
    on = rows[(rows.collection == coll) & (rows.model != model) & (rows.load_value.astype(float) <= LOW)]
    if len(on) < MIN_ROWS:
        return HarnessWait(coll, model, 0, len(on), float("nan"))
    q = float(np.quantile(on.L.to_numpy(float), QUANTILE))
    return HarnessWait(coll, model, int(np.floor(q)), len(on), q)


def enabled() -> bool:
    return os.environ.get(ENV, "1") != "0"


def cache_part() -> str:
    """The switch as a part of the fit cache's keys: a fit made with the term off is never read back on."""
    return "" if enabled() else "|harness-off"


def harness_wait(row: pd.Series) -> HarnessWait | None:
    """The fitted harness wait of a published row's collection (None: no collection, or the term off)."""
    return wait_of(collection(row), str(row.get("model", "")))


def wait_of(coll: str, model: str) -> HarnessWait | None:
    """harness_wait of a row of `model` in collection `coll` (None: no collection, or the term off)."""
    if not coll or not enabled():
        return None
    return fit_wait(coll, model)
