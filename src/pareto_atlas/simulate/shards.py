"""Split a sweep into shards whose concatenation is the whole sweep, row for row and bit for bit.

`sweep` seeds the simulation of row j with `seed + j`, j counting (hardware, knobs) pairs in the
space's order (hardware outer, knobs inner) times workloads times loads. A shard is therefore one
hardware card and a contiguous run of the knobs compatible with it: its rows are a contiguous block
of the whole sweep, and sweeping it with `seed + (rows before it)` gives every row its own seed.
`sweep_on` runs a sweep on an executor (scale): sharded across a cluster, in one pass here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Iterable

import pandas as pd

from pareto_atlas.scale.local import Executor
from pareto_atlas.simulate.params import CalibParams
from pareto_atlas.simulate.space import Space, compatible
from pareto_atlas.simulate.sweep import sweep


@dataclass(frozen=True)
class Shard:
    space: Space  # one hardware card, knobs all compatible with it
    seed_offset: int  # rows of the whole sweep before this shard's first row


def shards(space: Space, n_shards: int) -> list[Shard]:
    """About `n_shards` shards (at least one per hardware card that runs anything), in sweep order."""
    per_pair = len(space.workloads) * len(space.loads)
    groups = [(h, [k for k in space.knobs if not compatible(k, h, space.engine, space.model)]) for h in space.hardware]
    groups = [(h, ks) for h, ks in groups if ks]
    total = sum(len(ks) for _, ks in groups)
    size = max(1, math.ceil(total / max(n_shards, 1)))
    out, offset = [], 0
    for h, ks in groups:
        for i in range(0, len(ks), size):
            chunk = tuple(ks[i : i + size])
            out.append(Shard(replace(space, hardware=(h,), knobs=chunk), offset))
            offset += len(chunk) * per_pair
    return out


def sweep_shard(shard: Shard, params: dict[str, CalibParams] | None, n_requests: int, seed: int) -> pd.DataFrame:
    return sweep(shard.space, params, n_requests=n_requests, seed=seed + shard.seed_offset)


def concat(parts: Iterable[pd.DataFrame]) -> pd.DataFrame:
    return pd.concat(list(parts), ignore_index=True)


def sweep_sharded(
    space: Space,
    params: dict[str, CalibParams] | None,
    n_requests: int,
    seed: int,
    n_shards: int,
    run: Callable[[list[Shard]], list[pd.DataFrame]],
) -> pd.DataFrame:
    """The whole sweep through `run` (shards -> their frames, in order), identical to `sweep(space, ...)`."""
    parts = shards(space, n_shards)
    if not parts:  # nothing compatible: let sweep produce its empty frame with every column
        return sweep(space, params, n_requests=n_requests, seed=seed)
    return concat(run(parts))


def _sweep_part(params: dict[str, CalibParams] | None, n_requests: int, seed: int, shard: Shard) -> pd.DataFrame:
    return sweep_shard(shard, params, n_requests, seed)  # the executor's order: what every shard shares, then the shard


def sweep_on(
    executor: Executor | None, space: Space, params: dict[str, CalibParams] | None, n_requests: int, seed: int = 0
) -> pd.DataFrame:
    """The sweep of `space` where `executor` runs work: here, one pass (None or in-process); on a cluster,
    one shard per CPU of it (enough to keep every node busy, few enough that each shard's compiled pass is
    long next to the cost of a task), equal to the one pass row for row."""
    if executor is None or executor.here:
        return sweep(space, params, n_requests=n_requests, seed=seed)
    return sweep_sharded(
        space,
        params,
        n_requests,
        seed,
        executor.width(),
        lambda parts: executor.map(_sweep_part, parts, shared=(params, n_requests, seed), name="sweep_shard"),
    )
