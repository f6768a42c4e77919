"""The error bar a calibrated point carries, set on what the fit never saw: the BAR_QUANTILE quantile
of the held-out |relative errors| pooled over every held-out scheme (a source, a model or an engine
left out), latency and throughput apart, so it covers at least that share of the held-out figures by
construction; and the check that it carries: the bar set on one half of the rows, its coverage
counted on the other half, whose figures never set it.

The quantile is the empirical one that never under-covers (numpy's "inverted_cdf": the smallest
held-out |error| with at least BAR_QUANTILE of the figures at or below it), not an interpolation
between two figures that could leave the bar just short of its share.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pareto_atlas.calibrate.fidelity import LATENCY

BAR_QUANTILE = 0.9  # the share of held-out figures a carried bar covers (issue 31)
UNSEEN_BAR = 0.25  # the uncalibrated default's bar, where nothing was held out


@dataclass(frozen=True)
class HeldOutBar:
    lat: float  # relative: TTFT and TPOT (median and tail) together
    thr: float  # relative: throughput
    n_lat: int  # held-out latency figures it was set on
    n_thr: int
    # coverage of a bar set on one half of the rows, counted on the other half (each way; NaN: no split)
    split_coverage: tuple[float, float]

    def describe(self) -> str:
        a, b = self.split_coverage
        split = (
            "no split: too few row groups"
            if a != a
            else f"set on one half of the row groups, it covers {a:.0%} and {b:.0%} of the other half's"
        )
        return (
            f"p{100 * BAR_QUANTILE:.0f} of {self.n_lat} held-out latency and {self.n_thr} throughput figures "
            f"(every scheme pooled): ±{self.lat:.0%} latency, ±{self.thr:.0%} throughput; {split}"
        )


def quantile_bar(errors: np.ndarray, q: float = BAR_QUANTILE) -> float:
    """The smallest |error| that at least a share q of the finite figures do not exceed (NaN: none)."""
    v = np.abs(np.asarray(errors, float)).ravel()
    v = v[np.isfinite(v)]
    if not 0.0 < q <= 1.0:
        raise ValueError(f"quantile: {q} is not in (0, 1]")
    return float(np.quantile(v, q, method="inverted_cdf")) if len(v) else float("nan")


def _split(held: dict[str, np.ndarray], targets: tuple[str, ...], rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lat = [targets.index(t) for t in LATENCY if t in targets]
    thr = [targets.index("throughput_tok_s")] if "throughput_tok_s" in targets else []
    pick = lambda cols: np.concatenate([h[rows][:, cols].ravel() for h in held.values()]) if cols else np.array([])
    return pick(lat), pick(thr)


def coverage(errors: np.ndarray, bar: float) -> float:
    """Share of the finite held-out figures within ±bar (NaN: none)."""
    v = np.abs(np.asarray(errors, float)).ravel()
    v = v[np.isfinite(v)]
    return float((v <= bar).mean()) if len(v) else float("nan")


def carried_bar(held: dict[str, np.ndarray], targets: tuple[str, ...], groups: np.ndarray) -> HeldOutBar:
    """The bar from the held-out errors of each scheme (each (rows, targets) of predicted / measured - 1),
    and its check on a split of the rows by `groups` (a label per row, e.g. source and model: rows of
    one sweep stay on one side, so the check does not count a row's near twin): the groups alternate
    between the halves in order of first appearance."""
    n = len(groups)
    lat, thr = _split(held, targets, np.ones(n, bool))
    bar_lat = quantile_bar(lat) if np.isfinite(lat).any() else UNSEEN_BAR
    bar_thr = quantile_bar(thr) if np.isfinite(thr).any() else UNSEEN_BAR
    order = {g: i for i, g in enumerate(dict.fromkeys(groups))}
    half = np.array([order[g] % 2 == 0 for g in groups], bool)
    cov = (float("nan"), float("nan"))
    if len(order) >= 2:
        ways = []
        for a in (half, ~half):
            la, ta = _split(held, targets, a)
            lb, tb = _split(held, targets, ~a)
            if not (np.isfinite(la).any() and np.isfinite(lb).any()):
                ways.append(float("nan"))
                continue
            ql = quantile_bar(la)
            qt = quantile_bar(ta) if np.isfinite(ta).any() else UNSEEN_BAR
            inside = np.concatenate([np.abs(lb[np.isfinite(lb)]) <= ql, np.abs(tb[np.isfinite(tb)]) <= qt])
            ways.append(float(inside.mean()))
        cov = (ways[0], ways[1])
    return HeldOutBar(bar_lat, bar_thr, int(np.isfinite(lat).sum()), int(np.isfinite(thr).sum()), cov)
