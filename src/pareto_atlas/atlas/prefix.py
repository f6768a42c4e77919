"""What prefix caching is worth for the user's traffic: per (model, hardware, workload, load) that shares
prefixes, the best configuration without the cache and with it, and whether the cache changes which
configuration wins (e.g. more slots or a quantized KV cache becoming worth it because more prefixes
stay cached).

Read from the points table (simulate.sweep: prefix_cache, prefix_hit_rate): the figures rest on the
simulated block cache (simulate.prefix_cache) and carry the points' own error bars.
"""

from __future__ import annotations

import numpy as np
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


def _base(label: str) -> str:
    """A configuration's knobs beside the cache."""
    return str(label).replace("+pcache", "")


def regime_moves(answer) -> pd.DataFrame:
    """Per (regime, model, workload) that shares prefixes, on the best card: the winner with the cache
    allowed (the atlas's own) beside the winner of the same points without it, and whether the cache
    moved it: its other knobs, card or load differ, not only +pcache added. Empty where no workload shares."""
    from pareto_atlas.atlas.winners import ALL, winner_cells

    pts = answer.points
    if "prefix_hit_rate" not in pts or "prefix_cache" not in pts or not pts.prefix_hit_rate.notna().any():
        return pd.DataFrame()
    shared = pts[pts.workload.isin(set(pts.workload[pts.prefix_hit_rate.notna()]))]
    # only configurations simulated both ways (a thinned grid may hold one of a pair): with and without
    # then differ by the cache alone, not by which knobs the thinning kept
    twin = [c for c in ("model", "hardware", "workload", "concurrency", "rate_rps", "utilization") if c in shared]
    key = pd.Series(
        list(zip(*(shared[c].map(str) for c in twin), shared.label.map(_base))), index=shared.index, dtype=object
    )
    on = shared.prefix_cache.fillna(False).astype(bool)
    shared = shared[key.isin(set(key[on])) & key.isin(set(key[~on]))]
    off = shared[~shared.prefix_cache.fillna(False).astype(bool)]
    kw = {"allow_priors": answer.allow_priors, "study_ref": answer.study_ref}
    keys = ["regime", "model", "workload"]
    cols = keys + ["label", "win_hardware", "load", "value", "objective", "point_id"]

    def best(p: pd.DataFrame) -> pd.DataFrame:  # as Answer.best_cells over these points
        p = p.reset_index(drop=True)
        c = winner_cells(p, answer.regimes, per_hardware=False, **kw)
        hw = dict(zip(p.point_id, p.hardware))
        c = c.assign(win_hardware=c.point_id.map(hw).fillna(""))
        return c[c.hardware == ALL][cols] if len(c) else pd.DataFrame(columns=cols)

    both = best(shared).merge(best(off), on=keys + ["objective"], how="left", suffixes=("", "_off"))
    both = both[both.label.notna() & (both.label != "")]
    hit = dict(zip(pts.point_id, pts.prefix_hit_rate))
    both["hit_rate"] = both.point_id.map(hit)
    both["cached"] = both.label.astype(str).str.contains(r"\+pcache", regex=True)
    # a different winner at the same figure is a tie broken otherwise (a quality regime: the cache is exact)
    same_value = np.isclose(both.value.astype(float), both.value_off.astype(float), rtol=1e-9, atol=0.0)
    both["moved"] = (
        both.label_off.notna()
        & ~same_value
        & (
            (both.label.map(_base) != both.label_off.map(_base))
            | (both.win_hardware != both.win_hardware_off)
            | (both.load != both.load_off)
        )
    )
    # what the cache's figures rest on: an anchor of this study measured it, or the block cache alone
    measured = pts.prefix_cache.fillna(False).astype(bool) & pts.provenance.eq("measured")
    both["cache_measured"] = bool(measured.any())
    return both.reset_index(drop=True)


def move_lines(moves: pd.DataFrame, limit: int = 16) -> list[str]:
    """The regime winners with and without the cache in words, and a count of those it moved; one line
    saying no workload shares where none does."""
    if not len(moves):
        return [
            "prefix caching: no workload of this atlas states what its requests share (a `share` preset or a "
            "trace with hash_ids); nothing to weigh the cache on"
        ]
    basis = (
        "an anchor of this study measured the cache"
        if moves.cache_measured.any()
        else "projected: no anchor of this study measured a prefix cache; the hits are the simulated block "
        "cache's (benchmarks/bench_prefix_heldout.py prints its held-out error on llama.cpp)"
    )
    lines = [f"prefix caching, regime winners on the best card with the cache allowed vs without ({basis}):"]
    for r in moves.head(limit).itertuples():
        if r.label_off != r.label_off:
            lines.append(f"  {r.regime} · {r.model} · {r.workload}: {r.label} wins only with the cache")
            continue
        fig = f"{r.objective} {r.value:.4g} vs {r.value_off:.4g}"
        what = (
            f"moves from {r.label_off} ({r.win_hardware_off}, {r.load_off})"
            if r.moved
            else ("the same configuration, cache on" if r.cached else "the same winner, the cache does not pay")
        )
        hit = f", hit rate {r.hit_rate:.0%}" if r.cached and r.hit_rate == r.hit_rate else ""
        lines.append(
            f"  {r.regime} · {r.model} · {r.workload}: {r.label} ({r.win_hardware}, {r.load}{hit}); {fig}: {what}"
        )
    n = int(moves.moved.sum())
    gains = moves.value / moves.value_off
    lines.append(
        f"  the cache moved {n} of {len(moves)} regime winners (other knobs, card or load)"
        + (
            ""
            if n
            else f"; with/without objective ratio x{np.nanmin(gains):.2f}..x{np.nanmax(gains):.2f}: where it wins "
            "it wins as the same configuration with the cache on"
        )
    )
    return lines
