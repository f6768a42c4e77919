"""The atlas simulates llama.cpp's prefix cache as its slots (simulate.prefix_cache.settle_slots), the
other engines' as a pool of blocks; the held-out benchmark predicts its llama.cpp anchors with the same code."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pareto_atlas.simulate import des
from pareto_atlas.simulate.cost_model import coeffs
from pareto_atlas.simulate.kernels.layout import BURST_GAP_S, O_REQ
from pareto_atlas.simulate.memory import plan_memory
from pareto_atlas.simulate.params import default_params
from pareto_atlas.simulate.prefix_cache import (
    cached_tokens,
    hit_rate,
    measured_twin_cached,
    shared_load,
    slot_cached_tokens,
)
from pareto_atlas.simulate.space import Load, Space, Workload
from pareto_atlas.simulate.sweep import sweep
from pareto_atlas.spec.cards import HardwareCard, shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.spec.sharing import Sharing
from pareto_atlas.spec.study import study_from_dict

CPU = HardwareCard(name="this-cpu", kind="cpu", mem_bw_gbs=12.0, tflops={"fp32": 0.06}, mem_gib=23.0)
MODEL = shipped_models()["smollm2-135m"]
# two groups of requests, each with its own 288-token system prompt, alternating
TWO_GROUPS = Workload("two-groups", 384, 16, share=Sharing(prefix_tokens=288, groups=2))
N = 60


def _hits(engine: str, knobs: Knobs, hardware: tuple[HardwareCard, ...], load: Load) -> dict[str, float]:
    df = sweep(Space(MODEL, hardware, (knobs,), (TWO_GROUPS,), (load,), engine=engine), n_requests=N)
    return dict(zip(df.hardware, df.prefix_hit_rate))


def _pool() -> float:
    """The block pool's hit rate on the workload's requests, room unbounded (the model's KV is small)."""
    load = shared_load(TWO_GROUPS.share, (), 384, 16, N, 2)
    return hit_rate(cached_tokens(load, 1e12), load.prompt)


def test_one_slot_two_groups_llamacpp_reuses_nothing_a_block_pool_everything_shared():
    # llama.cpp's one slot always holds the other group's last sequence: no token reused; a GPU card of the
    # same space is served as vLLM serves it (simulate.schedulers.gpu_engine), with a pool of blocks
    k = Knobs(weights="F16", slots=1, prefix_cache=True)
    hits = _hits("llamacpp", k, (CPU, shipped_hardware()["L4"]), Load(concurrency=1))
    assert hits["this-cpu"] == 0.0
    assert hits["L4"] == pytest.approx(_pool()) and _pool() > 0.7
    # vLLM's CPU build keeps a pool of blocks
    vllm = _hits("vllm", Knobs(weights="BF16", slots=1, prefix_cache=True), (CPU,), Load(concurrency=1))
    assert vllm["this-cpu"] == pytest.approx(_pool())


def test_two_groups_on_two_slots_llamacpp_misses_when_only_the_other_groups_slot_is_idle():
    # two clients pausing between requests (the anchors' protocol): a request sometimes finds only the
    # other group's slot idle and misses, which a pool of blocks never does
    load = Load(concurrency=2, think="auto")
    llama = _hits("llamacpp", Knobs(weights="Q8_0", slots=2, prefix_cache=True), (CPU,), load)["this-cpu"]
    vllm = _hits("vllm", Knobs(weights="BF16", slots=2, prefix_cache=True), (CPU,), load)["this-cpu"]
    assert vllm == pytest.approx(_pool())
    assert 0.3 < llama < _pool() - 0.05
    # the cache off: nothing hits, whichever engine
    off = _hits("llamacpp", Knobs(weights="Q8_0", slots=2), (CPU,), load)["this-cpu"]
    assert off == 0.0


ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "benchmarks" / "prefix_heldout_study.toml"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_prefix_heldout", ROOT / "benchmarks/bench_prefix_heldout.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _by_request_before(res, conc, think):
    """by_request as the benchmark had it before it moved into simulate.prefix_cache (the reference)."""
    n = len(res.arrival)
    pause = np.zeros(n) if think is None else np.asarray(think, float)
    done = np.sort(res.finish_t)
    sent = np.array(
        [i * BURST_GAP_S + pause[i] if i < conc else done[i - conc] + BURST_GAP_S + pause[i] for i in range(n)]
    )
    where = np.empty(n, np.int64)
    where[np.argsort(sent, kind="stable")] = np.arange(n)
    return res.arrival[where], res.finish_t[where]


def _predict_before(row, study, hw, params):
    """predict_shared's closed-loop llama.cpp path as written before the move: the block pool's guess,
    then the slot model and the DES in turn, at most four passes."""
    wl = study.arm(row.arm).workload(study.workload)
    k, conc, warm = Knobs.from_row(row), int(row.concurrency), study.load.warmup
    P, O = int(row.prompt_tokens), int(row.output_tokens)
    think = None if row.think_s is None else np.asarray(row.think_s, float)
    n = len(think) if think is not None else int(row.n_requests)
    plan = plan_memory(MODEL, hw, k, P, O, params)
    cap = plan.kv_cap_tokens if plan.kv_cap_tokens > 0 else np.inf
    cached = measured_twin_cached(wl.sharing(), P, O, n, warm, max(conc, k.slots), cap, k.slots)
    arr = des.closed_loop(conc, n, P, O, think)
    c = coeffs(MODEL, hw, k, params)
    res = des.run(c, arr, k.batching, k.slots, k.chunk_tokens, cap, None, seed=0, cached=cached)
    load = shared_load(wl.sharing(), (), P, O, warm + n, max(conc, k.slots), block=1)
    for _ in range(4):
        start, end = _by_request_before(res, conc, think)
        again = slot_cached_tokens(load, start + c[O_REQ], end, k.slots, warm)
        if np.array_equal(again, cached):
            break
        cached = again
        res = des.run(c, arr, k.batching, k.slots, k.chunk_tokens, cap, None, seed=0, cached=cached)
    return res.summary["ttft_p50_ms"], res.summary["tpot_p50_ms"], hit_rate(cached, arr.prompt)


@pytest.mark.parametrize(
    "arm, think",
    [
        ("held-2groups-on", [0.0, 0.0] + [0.7 * ((i * 7) % 5) for i in range(14)]),  # the slot model moves the hits
        ("held-2groups-on", None),
        ("fit-on", [0.1] * 12),
    ],
)
def test_the_benchmarks_predictions_are_unchanged_by_the_shared_code(arm, think):
    bench = _bench()
    study = study_from_dict(tomllib.loads(STUDY.read_text()), str(STUDY), base=STUDY.parent)
    a = study.arm(arm)
    wl = a.workload(study.workload)
    row = pd.Series(
        {
            **a.knobs().to_dict(),
            "arm": arm,
            "prompt_tokens": wl.prompt_tokens,
            "output_tokens": wl.output_tokens,
            "concurrency": a.knobs().slots,
            "think_s": think,
            "n_requests": 16 if "2groups" in arm else 12,
        }
    )
    params = default_params(CPU)
    got = bench.predict_shared(row, study, MODEL, CPU, params)
    assert got == _predict_before(row, study, CPU, params)
    if think is not None and "2groups" in arm:  # the case that exercises the passes: not the pool's answer
        assert got[2] < 0.6


def _slot_cached_before(load, start, finish, slots, warmup=0, similarity=0.1):
    """slot_cached_tokens as first written (a slot's sequence compared token by token, one slot at a
    time): the reference its vectorized form must equal."""
    n = len(load.prompt)

    def common(a, b):
        k = 0
        for x, y in zip(a, b):
            if x != y:
                break
            k += 1
        return k

    seq = [()] * slots
    free_at, used_at = [-np.inf] * slots, [-np.inf] * slots
    t0 = float(np.min(start)) if n > warmup else 0.0
    times = [(t0 - (warmup - i), t0 - (warmup - i) + 0.5) for i in range(warmup)]
    times += list(zip(np.asarray(start, float).tolist(), np.asarray(finish, float).tolist()))
    out = np.zeros(n, np.int64)
    for i in sorted(range(n), key=lambda j: (times[j][0], j)):
        arrive, end = times[i]
        at = max(arrive, min(free_at))
        idle = [s for s in range(slots) if free_at[s] <= at]
        c = {s: common(seq[s], load.blocks[i]) * load.block for s in idle}
        best = max(idle, key=lambda s: (c[s], -s))
        if not seq[best] or c[best] <= similarity * load.prompt[i]:
            best = min(idle, key=lambda s: (used_at[s], s))
        out[i] = min(c[best], load.prompt[i] - 1)
        seq[best] = load.blocks[i]
        free_at[best] = max(end, at)
        used_at[best] = free_at[best]
    return out[warmup:]


@pytest.mark.parametrize("slots", [1, 2, 3, 8])
def test_slot_model_equals_its_first_token_by_token_form(slots):
    from pareto_atlas.simulate.prefix_cache import SharedLoad

    rng = np.random.default_rng(slots)
    for trial in range(30):
        n, warm, block = int(rng.integers(1, 25)), int(rng.integers(0, 3)), int(rng.choice([1, 16]))
        # sequences drawn from a few stems with random tails (ids not chained: a later match after a
        # mismatch must not count), some empty
        stems = [tuple(rng.integers(0, 4, 12).tolist()) for _ in range(3)]
        blocks = tuple(
            stems[rng.integers(0, 3)][: rng.integers(0, 13)] + tuple(rng.integers(0, 4, rng.integers(0, 6)).tolist())
            for _ in range(n)
        )
        prompt = np.array([max(1, len(b) * block - int(rng.integers(0, 3))) for b in blocks], np.int64)
        load = SharedLoad(prompt, np.ones(n, np.int64), blocks, block)
        start = np.sort(rng.uniform(0, 10, max(0, n - warm)))
        finish = start + rng.exponential(2.0, len(start))
        if n - warm < 1:
            continue
        got = slot_cached_tokens(load, start, finish, slots, warm)
        assert got.tolist() == _slot_cached_before(load, start, finish, slots, warm).tolist(), trial


def test_a_replayed_trace_on_llamacpp_reuses_by_slot_its_hash_blocks():
    # two sessions' rows alternating, each 3 blocks of 512 tokens, sessions differing from the first block:
    # one llama.cpp slot always holds the other session's last request (no reuse); a pool keeps both
    rows = tuple((i * 30.0, 1536, 4) for i in range(8))
    blocks = tuple((10 + i % 2, 20 + i % 2, 30 + i % 2) for i in range(8))
    wl = Workload("trace", 1536, 4, trace=rows, trace_blocks=blocks)
    k = Knobs(weights="F16", slots=1, prefix_cache=True)
    space = Space(MODEL, (CPU, shipped_hardware()["L4"]), (k,), (wl,), (Load(trace=True),), engine="llamacpp")
    df = sweep(space, n_requests=8)
    hits = dict(zip(df.hardware, df.prefix_hit_rate))
    assert hits["this-cpu"] == 0.0
    assert hits["L4"] == pytest.approx(6 * 1535 / (8 * 1536))  # all but each session's first, less the last token


def test_a_utilization_load_on_a_sharing_workload_is_a_share_of_the_capacity_its_cache_gives():
    # the capacity a utilization load is a share of is the closed loop of as many clients as slots that the
    # closed-loop points simulate: the workload's own requests (a conversation's prompts grow turn by turn)
    # with the prefix cache its knobs turn on (llama.cpp's slots). The batch kernel's flat prompts with no
    # cache put the cached configuration at a third of its capacity and the cache-off conversation past it.
    from pareto_atlas.simulate.params import CalibParams

    chat = Workload("chat", 256, 16, share=Sharing(prefix_tokens=64, turns=4))
    knobs = tuple(Knobs(weights="Q8_0", slots=2, prefix_cache=on) for on in (True, False))
    loads = (Load(utilization=0.8), Load(concurrency=2))
    space = Space(MODEL, (CPU,), knobs, (TWO_GROUPS, chat), loads, engine="llamacpp")
    df = sweep(space, {CPU.name: CalibParams(step_cv=0.0)}, n_requests=N)  # no jitter: the two loops coincide
    for _, g in df.groupby(["workload", "prefix_cache"]):
        at, closed = g[g.utilization == 0.8].iloc[0], g[g.concurrency == 2].iloc[0]
        assert at.rate_rps == pytest.approx(0.8 * closed.throughput_tok_s / 16, rel=1e-9)
    at = df[df.utilization == 0.8].set_index(["workload", "prefix_cache"])
    for wl in ("two-groups", "chat"):
        assert at.loc[(wl, True), "prefix_hit_rate"] > 0.5 and at.loc[(wl, False), "prefix_hit_rate"] == 0.0
        assert at.loc[(wl, True), "rate_rps"] > 1.5 * at.loc[(wl, False), "rate_rps"]  # prefills skipped
        assert at.loc[(wl, True), "ttft_p50_ms"] < at.loc[(wl, False), "ttft_p50_ms"]
