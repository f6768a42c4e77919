"""Disaggregated serving as pools (issue 31): prefill workers with their own vector, then decode engines."""

from __future__ import annotations

import importlib
from dataclasses import replace

import numpy as np
import pytest

from pareto_atlas.simulate import des
from pareto_atlas.simulate.cost_model import coeffs
from pareto_atlas.simulate.kernels import AT, FL, FL_H, FL_V, KVR, KVW, O_SEQ, O_STEP, W_T
from pareto_atlas.simulate.params import default_params
from pareto_atlas.simulate.space import Load, Space, Workload
from pareto_atlas.spec.cards import shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs

# the module (the package exports its function `sweep` under the same name)
sweep_mod = importlib.import_module("pareto_atlas.simulate.sweep")
M, HW = shipped_models()["qwen2.5-7b"], shipped_hardware()["H100-SXM"]


def _c(**kw):
    return coeffs(M, HW, Knobs(batching="disagg", slots=64, **kw), default_params(HW))


def _prefills_per_s(res: des.DesResult) -> float:
    # the prefill pool's rate: requests whose first token left it, per second of the run
    return len(res.first_t) / (res.first_t.max() - res.arrival.min())


def test_two_prefill_workers_prefill_twice_as_many_requests_per_second():
    # prefill-bound: long prompts, two output tokens, more clients than one worker can serve
    c = _c()
    one = des.run(c, des.closed_loop(64, 2000, 4096, 2), "disagg", 64, seed=1)
    two = des.run(c, des.closed_loop(64, 2000, 4096, 2), "disagg", 64, seed=1, prefill_workers=2)
    assert 1.9 < _prefills_per_s(two) / _prefills_per_s(one) < 2.1
    # and the pair is exactly one worker
    pair = des.run(c, des.closed_loop(64, 2000, 4096, 2), "disagg", 64, seed=1, prefill_workers=1, prefill_c=c)
    assert np.array_equal(pair.first_t, one.first_t) and np.array_equal(pair.finish_t, one.finish_t)


def test_prefill_workers_run_their_own_vector_and_decode_the_engines():
    c = _c()
    fast = c.copy()
    for i in (W_T, KVR, KVW, FL, FL_V, FL_H, AT, O_STEP, O_SEQ):
        fast[i] *= 0.5  # a prefill worker twice as fast (e.g. more GPUs)
    base = des.run(c, des.closed_loop(1, 20, 2048, 64), "disagg", 8)
    quick = des.run(c, des.closed_loop(1, 20, 2048, 64), "disagg", 8, prefill_c=fast)
    assert np.median(quick.ttft) < 0.6 * np.median(base.ttft)
    assert np.median(quick.tpot) == pytest.approx(np.median(base.tpot), rel=0.02)


def test_pool_errors_are_one_line():
    c, a = _c(), des.closed_loop(2, 10, 128, 8)
    with pytest.raises(ValueError, match="prefill_workers: 0 must be >= 1"):
        des.run(c, a, "disagg", 4, prefill_workers=0)
    with pytest.raises(ValueError, match="prefill_workers: 2 needs batching='disagg'"):
        des.run(c, a, "continuous", 4, prefill_workers=2)
    with pytest.raises(ValueError, match="prefill_c: 3 coefficients"):
        des.run(c, a, "disagg", 4, prefill_c=np.ones(3))


def test_sweep_runs_the_pools_the_knobs_name():
    c = _c()
    k = Knobs(batching="disagg", prefill_workers=2, decode_workers=3)
    c_pf, n_pf, n_dw = sweep_mod.pools(M, HW, k, default_params(HW), 0.0, c)
    assert (n_pf, n_dw) == (2, 3) and np.array_equal(c_pf, c)  # prefill_tp 0: the decode worker's tp
    assert sweep_mod.pools(M, HW, Knobs(), default_params(HW), 0.0, c)[1:] == (1, 1)
    for wl, more in (
        (Workload("prefill-bound", 4096, 2), {"prefill_workers": 2}),
        (Workload("decode-bound", 512, 256), {"decode_workers": 2}),
    ):
        space = Space(M, (HW,), (Knobs(batching="disagg", slots=8),), (wl,), (Load(concurrency=64),))
        one = sweep_mod.sweep(space, n_requests=600)
        two = sweep_mod.sweep(replace(space, knobs=(Knobs(batching="disagg", slots=8, **more),)), n_requests=600)
        ratio = two.throughput_tok_s.iloc[0] / one.throughput_tok_s.iloc[0]
        assert 1.8 < ratio < 2.1, (wl.name, ratio)
        assert two.gpus.iloc[0] == 3 and one.gpus.iloc[0] == 2
    # a utilization load on a decode pool: the rate is a share of the pool's own capacity
    space = Space(M, (HW,), (Knobs(batching="disagg", slots=8),), (Workload("d", 512, 256),), (Load(utilization=0.5),))
    half_one = sweep_mod.sweep(space, n_requests=300).rate_rps.iloc[0]
    pool = replace(space, knobs=(Knobs(batching="disagg", slots=8, decode_workers=2),))
    half_two = sweep_mod.sweep(pool, n_requests=300).rate_rps.iloc[0]
    assert 1.8 < half_two / half_one < 2.1


def test_two_decode_engines_serve_twice_the_decode_bound_load():
    # decode-bound: 32 clients, 8 sequences an engine; the prefill pool idles most of the time
    c = _c()
    a = lambda: des.closed_loop(32, 800, 512, 256)  # noqa: E731
    one = des.run(c, a(), "disagg", 8, kv_cap_tokens=1e6, seed=3)
    two = des.run(c, a(), "disagg", 8, kv_cap_tokens=1e6, seed=3, decode_workers=2)
    assert 1.9 < two.summary["throughput_tok_s"] / one.summary["throughput_tok_s"] < 2.1
    assert (two.finish_t >= two.first_t).all() and (two.first_t > two.arrival).all()


def test_the_pool_loop_with_one_decode_engine_is_the_engine_loop():
    # kernels.pool steps one at a time; without jitter or speculation it walks the steps loop.run_kernel does
    from pareto_atlas.simulate.kernels import CV
    from pareto_atlas.simulate.kernels.pool import run_pool_kernel

    c = _c()
    c[CV] = 0.0
    for conc in (1, 8, 32):
        a = des.closed_loop(conc, 400, 512, 128)
        ref = des.run(c, a, "disagg", 8, kv_cap_tokens=1e6, seed=3)
        arrival, first, finish = np.zeros(400), np.empty(400), np.empty(400)
        steps, _, _ = run_pool_kernel(
            c, arrival, a.prompt.copy(), a.output.copy(), 8, conc, 1e6, 3, first, finish, np.empty(0), c, 1, 1
        )
        assert steps == ref.steps
        assert np.median(first - arrival) == pytest.approx(np.median(ref.ttft), rel=1e-9)
        assert np.median(finish - arrival) == pytest.approx(np.median(ref.e2e), rel=1e-6)


def test_decode_pool_errors_are_one_line():
    c, a = _c(), des.closed_loop(2, 10, 128, 8)
    with pytest.raises(ValueError, match="decode_workers: 0 must be >= 1"):
        des.run(c, a, "disagg", 4, decode_workers=0)
    with pytest.raises(ValueError, match="decode_workers: 2 must be >= 1, and 1 unless batching='disagg'"):
        des.run(c, a, "chunked", 4, decode_workers=2)
