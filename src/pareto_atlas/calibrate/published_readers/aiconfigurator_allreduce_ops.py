"""Reader of aiconfigurator's measured all-reduce tables: ai-dynamo/aiconfigurator
`aic-core/src/aiconfigurator_core/systems/data/<card>/comm/<engine>/<release>/custom_allreduce_perf.parquet`,
the engine's own all-reduce within a node (vLLM's custom all-reduce, TensorRT-LLM's AllReduce) timed alone per
message size and GPU count, on one card under one engine release.

What the file states, kept under its own column names and units: framework, version, device, op_name,
kernel_source, allreduce_dtype, num_gpus, message_size (as the table states it), latency (milliseconds per
call). Each row read gets the card and engine as the product names them and its provenance
`published:aiconfigurator custom_allreduce_perf <card>/<engine>/<release> @<commit>`.

What is left out, and why (counted in `skipped`): messages over MAX_MESSAGE (a decode step's activations,
a few tokens x hidden: where a call's latency, not the link's bandwidth, sets its time; the bandwidth is
published_link's link_eff), vLLM's eager kernel (vLLM serves decode steps under CUDA graphs:
`kernel_source` vLLM_custom_graph is read), and rows whose framework, version or device disagree with the
path they were read from (H100 and H200's SGLang folders hold TensorRT-LLM's measurements; H200's vLLM
0.14.0 folder states another release).
"""

from __future__ import annotations

from dataclasses import dataclass

from pareto_atlas.calibrate.published_readers import ReadResult
from pareto_atlas.calibrate.published_readers.aiconfigurator_moe_ops import CARDS, open_table, states_its_path

COLUMNS = (
    "framework",
    "version",
    "device",
    "op_name",
    "kernel_source",
    "allreduce_dtype",
    "num_gpus",
    "message_size",
    "latency",
)
KEPT = tuple(c for c in COLUMNS if c not in ("framework", "device", "op_name"))
HEADER = ("gpu", "engine", *KEPT, "source")
SHIPPED = "published_allreduce_ops.csv"  # spec/
PATH = "aic-core/src/aiconfigurator_core/systems/data/{card}/comm/{engine}/{release}/custom_allreduce_perf.parquet"
MAX_MESSAGE = 65536  # message_size, as the tables state it
EAGER = ("vLLM_custom_eager",)


class AllreduceOpsFileError(ValueError):
    """A custom_allreduce_perf file lacks a column or holds a bad value; the message names the file and column."""


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
        if len(parts) < 5 or parts[-1] != "custom_allreduce_perf.parquet" or parts[-4] != "comm":
            raise AllreduceOpsFileError(
                f"{self.path}: not a <card>/comm/<engine>/<release>/custom_allreduce_perf.parquet path"
            )
        return parts[-5], parts[-3], parts[-2]


def read(src: OpsFile) -> ReadResult:
    """The rows of `src` at messages up to MAX_MESSAGE, the graph kernel where the table has two, the
    latency to 5 significant digits (ms); one row per row of the file."""
    card, engine, release, df, prov = open_table(src, COLUMNS, AllreduceOpsFileError, "custom_allreduce_perf")
    res = ReadResult()
    for r in df.itertuples(index=False):
        if not states_its_path(r, card, engine, release):
            res.skip("framework, version or device not the path's")
        elif r.op_name != "all_reduce":
            res.skip(f"op_name {r.op_name}")
        elif r.kernel_source in EAGER:
            res.skip("eager kernel (decode runs under CUDA graphs)")
        elif int(r.message_size) > MAX_MESSAGE:
            res.skip(f"message_size over {MAX_MESSAGE}")
        else:
            row = {c: str(getattr(r, c)) for c in KEPT} | {"latency": f"{float(r.latency):.5g}"}
            res.rows.append({"gpu": CARDS[card], "engine": engine, **row, "source": prov})
    return res


def row_error(r: dict[str, str]) -> str:
    """'' if a shipped row is well formed, else one line naming the field."""
    for c in HEADER:
        if c not in r or r[c] == "":
            return f"{c}: missing"
    for c, low in (("num_gpus", 2), ("message_size", 1)):
        try:
            if int(r[c]) < low:
                return f"{c}: {r[c]!r} must be an integer >= {low}"
        except ValueError:
            return f"{c}: {r[c]!r} must be an integer >= {low}"
    try:
        if not float(r["latency"]) > 0:
            return f"latency: {r['latency']!r} must be > 0 ms"
    except ValueError:
        return f"latency: {r['latency']!r} must be a number of ms"
    if not r["source"].startswith("published:aiconfigurator custom_allreduce_perf "):
        return (
            f"source: {r['source']!r} must read "
            "'published:aiconfigurator custom_allreduce_perf <card>/<engine>/<release> @<commit>'"
        )
    return ""
