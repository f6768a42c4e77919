"""Reader of aiconfigurator's measured MoE operator tables: ai-dynamo/aiconfigurator
`aic-core/src/aiconfigurator_core/systems/data/<card>/moe/<engine>/<release>/moe_perf.parquet`, one MoE
layer (router output to combined result, one GPU's share) timed alone per token count, shape, weight
format (`moe_dtype`), MoE-TP / EP split and routing distribution, on one card under one engine release.

What the file states, kept under its own column names and units: framework, version, device, op_name,
kernel_source, moe_dtype, num_tokens, hidden_size, inter_size, topk, num_experts, moe_tp_size,
moe_ep_size, distribution, latency (milliseconds per layer). Each row read gets the card and engine as
the product names them (hardware.toml, the engine's name) and its provenance
`published:aiconfigurator moe_perf <card>/<engine>/<release> @<commit>`.

What is left out, and why (counted in `skipped`): shapes no shipped MoE card has (the product prices only
its cards), formats the caller does not ask for, routing distributions other than `balanced` (the cost
model carries its own routing skew), splits over more GPUs than a node holds (moe_tp x moe_ep > 8), and
rows whose framework, version or device disagree with the path they were read from.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from pareto_atlas.calibrate.published_readers import ReadResult

COLUMNS = (
    "framework",
    "version",
    "device",
    "op_name",
    "kernel_source",
    "moe_dtype",
    "num_tokens",
    "hidden_size",
    "inter_size",
    "topk",
    "num_experts",
    "moe_tp_size",
    "moe_ep_size",
    "distribution",
    "latency",
)
# the shipped table's columns: the product's names for card and engine, the file's columns less those every
# row read holds alike (framework, device and op_name: the path's; distribution: balanced), provenance
KEPT = tuple(c for c in COLUMNS if c not in ("framework", "device", "op_name", "distribution"))
HEADER = ("gpu", "engine", *KEPT, "source")
SHIPPED = "published_moe_ops.csv"  # spec/
PATH = "aic-core/src/aiconfigurator_core/systems/data/{card}/moe/{engine}/{release}/moe_perf.parquet"
MAX_GPUS = 8  # one node
# aiconfigurator's card folders -> hardware cards (spec/hardware.toml), and its device strings
CARDS = {"h100_sxm": "H100-SXM", "h200_sxm": "H200", "b200_sxm": "B200"}
DEVICES = {"h100_sxm": "NVIDIA H100", "h200_sxm": "NVIDIA H200", "b200_sxm": "NVIDIA B200"}
FRAMEWORKS = {"trtllm": "TRTLLM", "vllm": "VLLM", "sglang": "SGLANG"}


class MoeOpsFileError(ValueError):
    """A moe_perf file lacks a column or holds a bad value; the message names the file and the column."""


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
        if len(parts) < 5 or parts[-1] != "moe_perf.parquet" or parts[-4] != "moe":
            raise MoeOpsFileError(f"{self.path}: not a <card>/moe/<engine>/<release>/moe_perf.parquet path")
        return parts[-5], parts[-3], parts[-2]


def open_table(src, columns: tuple[str, ...], error: type[ValueError], kind: str):
    """(card folder, engine, release, the table, the rows' provenance) of an aiconfigurator operator file
    `src` (an OpsFile of this module or of its gemm and all-reduce siblings), or `error` naming the file and
    what is wrong: a card folder not in CARDS, an unreadable parquet file, a column of `columns` missing,
    a latency that is not a positive number. `kind`: the table's name in the provenance."""
    import pandas as pd

    card, engine, release = src.where
    if card not in CARDS:
        raise error(f"{src.path}: card folder {card!r} is not one of {', '.join(CARDS)}")
    try:
        df = pd.read_parquet(io.BytesIO(src.data))
    except Exception as e:  # pyarrow's many error types
        raise error(f"{src.path}: not a readable parquet file ({type(e).__name__})") from None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise error(f"{src.path}: no column {missing[0]!r}")
    lat = pd.to_numeric(df["latency"], errors="coerce")
    if not (lat > 0).all():
        raise error(f"{src.path}: column 'latency' holds a value that is not a positive number (ms)")
    return card, engine, release, df, f"published:aiconfigurator {kind} {card}/{engine}/{release} @{src.commit[:12]}"


def states_its_path(r, card: str, engine: str, release: str) -> bool:
    """Whether a row's framework, version and device are those of the path it was read from."""
    return (
        str(r.framework).upper() == FRAMEWORKS.get(engine)
        and r.version == release
        and str(r.device).startswith(DEVICES[card])
    )


def read(src: OpsFile, shapes: set[tuple[int, int, int, int]], dtypes: set[str], max_tokens: int = 4096) -> ReadResult:
    """The rows of `src` of the given shapes ((hidden_size, inter_size, num_experts, topk)) and formats,
    balanced routing, on one node, at most `max_tokens` tokens (decode steps and chunked prefill), the
    latency to 5 significant digits (ms); one row per row of the file."""
    card, engine, release, df, prov = open_table(src, COLUMNS, MoeOpsFileError, "moe_perf")
    res = ReadResult()
    for r in df.itertuples(index=False):
        shape = (int(r.hidden_size), int(r.inter_size), int(r.num_experts), int(r.topk))
        if not states_its_path(r, card, engine, release):
            res.skip("framework, version or device not the path's")
        elif r.op_name != "moe":
            res.skip(f"op_name {r.op_name}")
        elif shape not in shapes:
            res.skip("a shape no shipped MoE card has")
        elif r.moe_dtype not in dtypes:
            res.skip(f"moe_dtype {r.moe_dtype} not asked for")
        elif r.distribution != "balanced":
            res.skip("routing distribution other than balanced")
        elif int(r.moe_tp_size) * int(r.moe_ep_size) > MAX_GPUS:
            res.skip("moe_tp_size x moe_ep_size over one node")
        elif int(r.num_tokens) > max_tokens:
            res.skip(f"num_tokens over {max_tokens}")
        else:
            row = {c: str(getattr(r, c)) for c in KEPT} | {"latency": f"{float(r.latency):.5g}"}
            res.rows.append({"gpu": CARDS[card], "engine": engine, **row, "source": prov})
    return res


def row_error(r: dict[str, str]) -> str:
    """'' if a shipped row is well formed, else one line naming the field."""
    for c in HEADER:
        if c not in r or r[c] == "":
            return f"{c}: missing"
    for c in ("num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size"):
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
    if not r["source"].startswith("published:aiconfigurator moe_perf "):
        return (
            f"source: {r['source']!r} must read 'published:aiconfigurator moe_perf <card>/<engine>/<release> @<commit>'"
        )
    return ""
