"""What prefix caching is worth for the user's traffic: per (model, hardware, workload, load) that shares
prefixes, the best configuration without the cache and with it, and whether the cache changes which
configuration wins (e.g. more slots or a quantized KV cache becoming worth it because more prefixes
stay cached).

Read from the points table (simulate.sweep: prefix_cache, prefix_hit_rate): the figures rest on the
simulated block cache (simulate.prefix_cache) and carry the points' own error bars.
"""

from __future__ import annotations

import pandas as pd

# (column, better) the winners are picked on: the most output tokens per second per device, the lowest TTFT
CRITERIA = (("throughput_per_device_tok_s", "max"), ("ttft_p50_ms", "min"))
GROUP = ("model", "hardware", "workload", "concurrency", "rate_rps", "utilization")


def _best(df: pd.DataFrame, col: str, better: str) -> pd.Series | None:
    d = df[df[col].notna()]
    if not len(d):
        return None
    return d.loc[d[col].idxmax() if better == "max" else d[col].idxmin()]


def caching_worth(points: pd.DataFrame) -> pd.DataFrame:
    """One row per group of points whose workload shares (a prefix_hit_rate) and criterion: the best
    configuration without the cache and with it allowed, their figures, the winner's hit rate and
    whether the winner's other knobs differ (the cache moved the winner, not only its speed)."""
    if "prefix_hit_rate" not in points or not points.prefix_hit_rate.notna().any():
        return pd.DataFrame()
    pts = points[points.prefix_hit_rate.notna() & points.feasible.astype(bool)]
    keys = [c for c in GROUP if c in pts]
    out = []
    for group, g in pts.groupby(keys, dropna=False, sort=True):
        off = g[~g.prefix_cache.astype(bool)]
        for col, better in CRITERIA:
            if col not in g:
                continue
            b_off, b_any = _best(off, col, better), _best(g, col, better)
            if b_off is None or b_any is None:
                continue
            base = lambda r: str(r["label"]).replace("+pcache", "")  # noqa: E731 - the knobs beside the cache
            out.append(
                {
                    **dict(zip(keys, group if isinstance(group, tuple) else (group,))),
                    "criterion": col,
                    "best_without": b_off["label"],
                    "value_without": b_off[col],
                    "best_with": b_any["label"],
                    "value_with": b_any[col],
                    "hit_rate": b_any["prefix_hit_rate"],
                    "gain": b_any[col] / b_off[col] if b_off[col] else float("nan"),
                    "winner_moved": base(b_any) != base(b_off),
                }
            )
    return pd.DataFrame(out)


def worth_lines(table: pd.DataFrame, limit: int = 12) -> list[str]:
    """The table in words: what the cache is worth and where it moves the winner; a line saying it
    never did when it did not."""
    if not len(table):
        return ["prefix caching: no workload of this atlas states what its requests share"]
    lines = []
    for r in table.head(limit).itertuples():
        moved = f"; the winner moves from {r.best_without}" if r.winner_moved else "; same configuration"
        load = (
            f", {int(r.concurrency)} clients"
            if getattr(r, "concurrency", 0) == getattr(r, "concurrency", 0) and getattr(r, "concurrency", 0) > 0
            else f", {getattr(r, 'rate_rps', float('nan')):.3g} req/s"
        )
        lines.append(
            f"{r.model} {r.hardware} {r.workload}{load}: best {r.criterion} {r.value_with:.4g} with the cache "
            f"({r.best_with}, hit rate {r.hit_rate:.0%}) vs {r.value_without:.4g} without "
            f"(with/without x{r.gain:.2f}){moved}"
        )
    if not table.winner_moved.any():
        lines.append(
            f"prefix caching moved no winner in {len(table)} (group, criterion) pairs; its with/without ratio "
            f"ranged x{table.gain.min():.2f}..x{table.gain.max():.2f}"
        )
    return lines
