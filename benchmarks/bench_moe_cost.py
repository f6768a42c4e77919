"""What the simulator predicts for a mixture of experts against a dense model: decode cost per token
against batch for Qwen3-30B-A3B (30.5B total, 3.3B active) and Qwen3-32B (dense, about the same
total) on one H100-SXM, from the shipped cards and vLLM's default calibration on that card (no
anchors, no GPU): the experts a step touches, the weight bytes it streams, and each step's time.

It rests on the routing prior (simulate.moe.ROUTING_SKEW, interval ROUTING_SKEW_INTERVAL): the
`touched` columns print the prior's interval too. These are predictions, not measurements; the
issue's CPU benchmark (a random-weight MoE under llama.cpp at 1, 2, 4 and 8 slots) is what would
test them.

    python benchmarks/bench_moe_cost.py [--hw H100-SXM] [--moe qwen3-30b-a3b] [--dense qwen3-32b] [--ctx 1024]
"""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from pareto_atlas.simulate import moe
from pareto_atlas.simulate.cost_model import coeffs
from pareto_atlas.simulate.kernels import step_time
from pareto_atlas.simulate.memory import plan_memory
from pareto_atlas.simulate.params import default_params
from pareto_atlas.spec.cards import shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hw", default="H100-SXM")
    ap.add_argument("--moe", default="qwen3-30b-a3b")
    ap.add_argument("--dense", default="qwen3-32b")
    ap.add_argument("--weights", default="F16")
    ap.add_argument("--ctx", type=float, default=1024.0, help="context tokens per sequence")
    a = ap.parse_args()
    hw, cards = shipped_hardware()[a.hw], shipped_models()
    m, d = cards[a.moe], cards[a.dense]
    params, knobs = default_params(hw, "vllm"), Knobs(weights=a.weights)
    cm, cd = coeffs(m, hw, knobs, params), coeffs(d, hw, knobs, params)
    fit = {c.name: plan_memory(c, hw, knobs, int(a.ctx), 0, params).max_seqs for c in (m, d)}
    lo, hi = moe.ROUTING_SKEW_INTERVAL
    con = Console()
    con.print(
        f"{a.moe} ({m.n_params / 1e9:.1f}B total, {m.active_params / 1e9:.2f}B active, {m.n_experts} experts, "
        f"{m.experts_per_token} per token) vs {a.dense} ({d.n_params / 1e9:.1f}B dense) on one {a.hw}, "
        f"{a.weights}, {a.ctx:g} tokens of context; routing skew prior {moe.ROUTING_SKEW} [{lo}, {hi}]; "
        f"sequences that fit: {fit[m.name]} vs {fit[d.name]}"
    )
    t = Table(
        "batch",
        "touched (prior)",
        "touched [interval]",
        "MoE GB/step",
        "dense GB/step",
        "MoE ms/step",
        "dense ms/step",
        "MoE us/tok",
        "dense us/tok",
        "MoE / dense",
    )
    for b in BATCHES:
        tm = step_time(cm, float(b), b * a.ctx, 0.0, 0.0, 0.0, float(b))
        td = step_time(cd, float(b), b * a.ctx, 0.0, 0.0, 0.0, float(b))
        over = [n for n, c in (("MoE", m), ("dense", d)) if b > fit[c.name]]
        flag = f" ({' and '.join(over)} over memory)" if over else ""
        t.add_row(
            f"{b}{flag}",
            f"{moe.experts_touched(b, m):.1f}",
            f"{moe.experts_touched(b, m, lo):.1f}-{moe.experts_touched(b, m, hi):.1f}",
            f"{moe.step_weight_bytes(m, a.weights, b) / 1e9:.2f}",
            f"{moe.step_weight_bytes(d, a.weights, b) / 1e9:.2f}",
            f"{tm * 1e3:.2f}",
            f"{td * 1e3:.2f}",
            f"{tm / b * 1e6:.0f}",
            f"{td / b * 1e6:.0f}",
            f"{tm / td:.2f}",
        )
    con.print(t)


if __name__ == "__main__":
    main()
