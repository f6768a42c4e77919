"""A sweep that survives a restart: simulated shard by shard, each shard saved as it finishes, so a
simulate stage stopped by Ctrl-C, `kill -9` or a reboot recomputes only the shards it had not saved.

A sweep is keyed by everything its rows depend on (the space, the parameters per card, requests per
point, seed and the tool's version); shards are those of simulate.shards, whose concatenation is the
whole sweep row for row and bit for bit, so a resumed sweep equals one that never stopped.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import asdict
from typing import Callable

import pandas as pd

from pareto_atlas import __version__
from pareto_atlas.simulate.shards import Shard, concat, shards
from pareto_atlas.simulate.params import CalibParams
from pareto_atlas.simulate.space import Space
from pareto_atlas.store import Store
from pareto_atlas.store.db import dumps

SHARDS_PER_CARD = 4  # a shard is ~a quarter of one card's knobs: seconds of work lost at most


def sweep_key(study: str, space: Space, params: dict[str, CalibParams], n_requests: int, seed: int = 0) -> str:
    ident = [study, __version__, asdict(space), {h: p.to_dict() for h, p in sorted(params.items())}, n_requests, seed]
    return hashlib.sha256(dumps(ident).encode()).hexdigest()[:24]


def to_bytes(df: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


def from_bytes(blob: bytes) -> pd.DataFrame:
    return pd.read_parquet(io.BytesIO(blob))


def resumable_sweep(
    store: Store,
    study: str,
    space: Space,
    params: dict[str, CalibParams],
    n_requests: int,
    run: Callable[[Space, int], pd.DataFrame],
    seed: int = 0,
    on_shard: Callable[[int, int, bool], None] = lambda i, n, kept: None,
) -> pd.DataFrame:
    """The whole sweep of `space`: saved shards read back, the others simulated by `run(space, seed)`
    and saved one by one. `on_shard(i, n, kept)` after each (kept: read from the store)."""
    key = sweep_key(study, space, params, n_requests, seed)
    parts: list[Shard] = shards(space, SHARDS_PER_CARD * max(len(space.hardware), 1))
    if not parts:
        return run(space, seed)
    frames = []
    for i, sh in enumerate(parts):
        saved = store.sim_shard(key, i)
        if saved is not None:
            frames.append(from_bytes(saved))
            on_shard(i, len(parts), True)
            continue
        df = run(sh.space, seed + sh.seed_offset)
        store.put_sim_shard(key, study, i, len(parts), to_bytes(df))
        frames.append(df)
        on_shard(i, len(parts), False)
    store.prune_sim_shards(study, keep=key)  # an older sweep of this study will not be resumed
    return concat(frames)
