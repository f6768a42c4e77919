"""Prefix caching on a Mooncake conversation trace, simulated on a GPU card: the hit rate the block cache
predicts, TTFT with the cache on and off, and the simulator's speed in requests per second.

    python benchmarks/bench_prefix_cache.py                       # the shipped head (1,500 requests)
    python benchmarks/bench_prefix_cache.py --trace conversation_trace.jsonl --card H200 --model llama-3.1-8b

The trace's timestamps are replayed as they are (one engine; the Mooncake cluster spread them over many),
so the load is the trace's own; --speedup divides its gaps. Prompts beyond the model's context are dropped
and counted. Nothing here is a target: the figures are printed, not asserted.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pareto_atlas.simulate import des
from pareto_atlas.simulate.cost_model import coeffs
from pareto_atlas.simulate.memory import plan_memory
from pareto_atlas.simulate.params import default_params
from pareto_atlas.simulate.prefix_cache import SharedLoad, cache_tokens, cached_tokens, hit_rate
from pareto_atlas.spec.cards import shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.spec.trace import HASH_BLOCK_TOKENS, load_trace, trace_path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="mooncake_conversation_head")
    ap.add_argument("--card", default="H200")
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--weights", default="FP8")
    ap.add_argument("--slots", type=int, default=64)
    ap.add_argument("--speedup", type=float, default=1.0)
    a = ap.parse_args()
    rows = load_trace(trace_path(a.trace))
    hw, model = shipped_hardware()[a.card], shipped_models()[a.model]
    ctx = model.max_context if hasattr(model, "max_context") and model.max_context else 131072
    kept = [r for r in rows if r.prompt_tokens + r.output_tokens <= ctx]
    print(
        f"trace {a.trace}: {len(rows)} requests, {len(rows) - len(kept)} beyond {ctx} tokens dropped; "
        f"mean prompt {np.mean([r.prompt_tokens for r in kept]):.0f}, output {np.mean([r.output_tokens for r in kept]):.0f} "
        f"tokens; blocks of {HASH_BLOCK_TOKENS}"
    )
    t = np.array([r.arrival_s for r in kept]) / a.speedup
    p = np.array([r.prompt_tokens for r in kept], np.int64)
    o = np.array([r.output_tokens for r in kept], np.int64)
    load = SharedLoad(p, o, tuple(r.hash_ids for r in kept), HASH_BLOCK_TOKENS)
    params = default_params(hw, "vllm")
    print(
        f"{a.model} {a.weights} on one {a.card}, {a.slots} slots, continuous batching (uncalibrated defaults: "
        f"{params.provenance}); percentiles: linear interpolation"
    )
    for kv in ("f16", "fp8"):
        for on in (False, True):
            k = Knobs(weights=a.weights, kv=kv, slots=a.slots, prefix_cache=on)
            plan = plan_memory(model, hw, k, int(p.max()), int(o.max()), params)
            if not plan.feasible:
                print(f"  {k.label()}: infeasible ({plan.reason})")
                continue
            c = coeffs(model, hw, k, params)
            t0 = time.perf_counter()
            cached = None
            if on:
                cached = cached_tokens(load, cache_tokens(plan.kv_cap_tokens, a.slots, float(p.mean() + o.mean())))
            t1 = time.perf_counter()
            res = des.run(c, des.trace(t, p, o), "continuous", a.slots, 0, plan.kv_cap_tokens, {}, 0, cached=cached)
            t2 = time.perf_counter()
            s = res.summary
            hr = hit_rate(cached, p) if cached is not None else 0.0
            print(
                f"  {k.label():28s} hit rate {hr:6.1%}  TTFT p50 {s['ttft_p50_ms']:9.1f} ms  p99 "
                f"{s['ttft_p99_ms']:9.1f} ms  TPOT p50 {s['tpot_p50_ms']:6.1f} ms  "
                f"(KV room {plan.kv_cap_tokens:,.0f} tokens; cache {t1 - t0:.2f} s, DES {len(p) / (t2 - t1):,.0f} req/s, "
                f"both {len(p) / (t2 - t0):,.0f} req/s)"
            )


if __name__ == "__main__":
    main()
