"""Sharding a sweep never changes it: the shards, swept with their seed offsets and concatenated in
order, are the whole sweep bit for bit (this is what lets `--ray` split a sweep across a cluster)."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from pareto_atlas.scale import InProcess, executor_for
from pareto_atlas.simulate.shards import shards, sweep_shard, sweep_sharded
from pareto_atlas.simulate.space import Load, Workload, default_space
from pareto_atlas.simulate.sweep import sweep
from pareto_atlas.spec.cards import shipped_hardware, shipped_models


@pytest.fixture(scope="module")
def space():
    hw = shipped_hardware()
    sp = default_space(
        shipped_models()["qwen2.5-0.5b"],
        [hw["L4"], hw["H100-SXM"]],
        [Workload("w", 128, 32), Workload("v", 512, 64)],
        [Load(concurrency=2), Load(rate_rps=3.0), Load(utilization=0.5), Load(utilization=0.8)],
    )
    return replace(sp, knobs=sp.knobs[::25])


@pytest.mark.parametrize("n_shards", [1, 3, 7, 1000])
def test_sharded_sweep_is_the_sweep(space, n_shards):
    whole = sweep(space, n_requests=20, seed=5)
    parts = shards(space, n_shards)
    assert sum(p.space.size() for p in parts) == space.size() == len(whole)
    again = sweep_sharded(space, None, 20, 5, n_shards, lambda ps: [sweep_shard(p, None, 20, 5) for p in ps])
    pd.testing.assert_frame_equal(whole, again, check_exact=True)


def test_default_executor_is_in_process_without_ray():
    assert isinstance(executor_for(None), InProcess)
