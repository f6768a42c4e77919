"""How long `pick` takes to re-plan over a large points table, against its 1 s target.

    python benchmarks/bench_pick.py [--n 100000] [--repeat 5]

The table is synthetic (tests/synthetic.py's random_points, a test fixture); the timing covers parsing
the constraints, re-costing with a new price, the quality guard, and ranking.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from pareto_atlas.atlas.frontier import frontier
from pareto_atlas.atlas.pick import pick

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the synthetic table is a test fixture
from synthetic import random_points  # noqa: E402

TARGET_S = 1.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000, help="points in the table")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    pts = random_points(args.n, seed=0)
    cases = {
        "constraint only": dict(constraints="tpot_p99_ms<=40, quality_rel>=0.95", objective="cost_per_mtok"),
        "price change": dict(
            constraints="tpot_p99_ms<=40, quality_rel>=0.95",
            objective="cost_per_mtok",
            prices={"A100-80G-PCIe": 2.085},
            price_date="2026-08",
        ),
        "throughput, text filter": dict(constraints="ttft_p99_ms<=400 and hardware!=L4", objective="throughput_tok_s"),
    }
    print(f"pick over {args.n:,} points, {args.repeat} runs per case (target < {TARGET_S:.1f} s)")
    worst = 0.0
    for name, kw in cases.items():
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            r = pick(pts, **kw)
            times.append(time.perf_counter() - t)
        best, med = min(times), statistics.median(times)
        worst = max(worst, med)
        w = r.winner
        print(
            f"  {name:<24} best {best * 1e3:7.1f} ms  median {med * 1e3:7.1f} ms  "
            f"[{'ok' if med < TARGET_S else 'OVER'} vs {TARGET_S:.0f} s]  winner {w['label'] if w else '-'}"
        )
    t = time.perf_counter()
    frontier(pts)
    print(f"  (for scale: the full 3-D frontier with error bars over the same table: {time.perf_counter() - t:.2f} s)")
    print(f"worst median {worst * 1e3:.1f} ms = {worst / TARGET_S:.1%} of the {TARGET_S:.0f} s target")


if __name__ == "__main__":
    main()
