"""Prefix caching on the whole Mooncake conversation trace, simulated on a GPU card: the hit rate the block
cache predicts, TTFT with the cache on and off, and the simulator's speed in requests per second.

    python benchmarks/bench_prefix_cache.py                       # the shipped trace (12,031 requests, 59 min)
    python benchmarks/bench_prefix_cache.py --trace mooncake_conversation_head --card H100-SXM --replicas 2

The trace is spec/traces/mooncake_conversation.jsonl.gz: kvcache-ai/Mooncake
FAST25-release/traces/conversation_trace.jsonl at commit 3b5a594 (Apache-2.0), rows unchanged. Its load came
from a cluster; here it is spread over --replicas engines of one card each, round robin (as the sweep
replays a trace on replicas: simulate.des_points), and one replica's share is simulated: each request
to it with the blocks of the requests before it on that replica only. Its timestamps are replayed as
they are (--speedup divides the gaps). Prompts beyond the model's context are dropped and counted.

The engine is vLLM under its default scheduler on the card (simulate.schedulers), calibrated on the
card's published anchors (calibrate.published: spec/published_anchors.csv) where it has them, else
the uncalibrated defaults (the line says which). The cache's room is what the configuration's memory
holds after the weights and a full running batch (simulate.prefix_cache.cache_tokens); the hit rate
of an unbounded cache on the same requests is printed beside it as the trace's ceiling. The speed
excludes the one-off compilation of the event loop (a warm-up run first). Nothing here is a target:
the figures are printed, not asserted.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pareto_atlas.simulate import des
from pareto_atlas.simulate.cost_model import coeffs
from pareto_atlas.simulate.memory import plan_memory
from pareto_atlas.simulate.params import CalibParams, default_params
from pareto_atlas.simulate.prefix_cache import SharedLoad, cache_tokens, cached_tokens, hit_rate
from pareto_atlas.simulate.schedulers import scheduler
from pareto_atlas.spec.cards import HardwareCard, shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.spec.trace import HASH_BLOCK_TOKENS, load_trace, trace_path


def card_params(hw: HardwareCard) -> tuple[CalibParams, str]:
    """The card's fit on its published anchors (from the fit cache when it is there), else the defaults."""
    from pareto_atlas.calibrate import published_cache
    from pareto_atlas.calibrate.published import calibrate_published, for_atlas
    from pareto_atlas.calibrate.published_cache import fit_key
    from pareto_atlas.calibrate.published_table import load_published

    shipped = load_published()
    if hw.name not in set(shipped.rows.gpu):
        return default_params(hw, "vllm"), "uncalibrated defaults (no published anchor on this card)"
    key = published_cache.cache_key(fit_key(shipped), [hw.name])
    cals = published_cache.load(key)
    if cals is None:
        cals = calibrate_published(shipped, [hw.name])
        published_cache.save(key, cals)
    cal = for_atlas(cals)[hw.name]
    return cal.params, f"fitted on {len(cal.anchors)} published anchors of {hw.name} ({cal.engine})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="mooncake_conversation")
    ap.add_argument("--card", default="H200")
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--weights", default="FP8")
    ap.add_argument("--replicas", type=int, default=4, help="engines the trace is spread over (round robin)")
    ap.add_argument("--slots", type=int, nargs="+", default=[16, 64], help="sequences one engine runs")
    ap.add_argument("--speedup", type=float, default=1.0)
    a = ap.parse_args()
    if a.replicas < 1 or a.speedup <= 0 or min(a.slots) < 1:
        raise SystemExit("--replicas and --slots: integers >= 1; --speedup: > 0")
    rows = load_trace(trace_path(a.trace))
    hw, model = shipped_hardware()[a.card], shipped_models()[a.model]
    ctx = getattr(model, "max_context", 0) or 131072
    fits = [r for r in rows if r.prompt_tokens + r.output_tokens <= ctx]
    kept = fits[:: a.replicas]
    span = rows[-1].arrival_s - rows[0].arrival_s
    print(
        f"trace {a.trace}: {len(rows)} requests over {span / 60:.1f} min, {len(rows) - len(fits)} beyond {ctx} "
        f"tokens dropped; mean prompt {np.mean([r.prompt_tokens for r in fits]):.0f}, output "
        f"{np.mean([r.output_tokens for r in fits]):.0f} tokens; blocks of {HASH_BLOCK_TOKENS}; one replica of "
        f"{a.replicas} (round robin): {len(kept)} requests, {len(kept) / span * a.speedup:.2f} req/s"
    )
    t = np.array([r.arrival_s for r in kept]) / a.speedup
    p = np.array([r.prompt_tokens for r in kept], np.int64)
    o = np.array([r.output_tokens for r in kept], np.int64)
    load = SharedLoad(p, o, tuple(r.hash_ids for r in kept), HASH_BLOCK_TOKENS)
    ceiling = hit_rate(cached_tokens(load, 1e15), p)
    params, basis = card_params(hw)
    sch = scheduler("vllm", hw)
    print(
        f"{a.model} {a.weights} on one {a.card} a replica, vLLM's default scheduler ({sch.label}); {basis}; "
        f"an unbounded cache would hit {ceiling:.1%} of these prompt tokens; percentiles: linear interpolation"
    )
    # the event loop compiles once per process: a warm-up run so the speed printed is the simulator's
    c0 = coeffs(model, hw, Knobs(weights=a.weights), params)
    des.run(c0, des.trace(t[:8], p[:8], o[:8]), sch.batching, 8, sch.chunk_tokens, np.inf, {}, 0, cached=p[:8] // 2)
    for slots in a.slots:
        for kv in ("f16", "fp8"):
            for on in (False, True):
                k = Knobs(weights=a.weights, kv=kv, slots=slots, prefix_cache=on)
                plan = plan_memory(model, hw, k, int(p.max()), int(o.max()), params)
                if not plan.feasible:
                    print(f"  {k.label()}: infeasible ({plan.reason})")
                    continue
                c = coeffs(model, hw, k, params)
                t0 = time.perf_counter()
                room = cache_tokens(plan.kv_cap_tokens, slots, float(p.mean() + o.mean())) if on else 0.0
                cached = cached_tokens(load, room) if on else None
                t1 = time.perf_counter()
                res = des.run(
                    c,
                    des.trace(t, p, o),
                    sch.batching,
                    slots,
                    sch.chunk_tokens,
                    plan.kv_cap_tokens,
                    {},
                    0,
                    cached=cached,
                )
                t2 = time.perf_counter()
                s = res.summary
                hr = hit_rate(cached, p) if cached is not None else 0.0
                print(
                    f"  {k.label():26s} hit rate {hr:6.1%}  TTFT p50 {s['ttft_p50_ms']:9.1f} ms  p99 "
                    f"{s['ttft_p99_ms']:9.1f} ms  TPOT p50 {s['tpot_p50_ms']:6.1f} ms  (KV {plan.kv_cap_tokens:,.0f} "
                    f"tokens, cache room {room:,.0f}; simulated at {len(p) / (t2 - t0):,.0f} req/s: cache "
                    f"{t1 - t0:.2f} s, events {t2 - t1:.2f} s)"
                )


if __name__ == "__main__":
    main()
