"""Metrics derived from raw request records (definitions fixed in docs/metrics.md).

Latencies in milliseconds. Percentiles by linear interpolation between order statistics
(numpy method='linear'); the P99 interval is the distribution-free order-statistic interval
from the binomial distribution of the number of samples below the true P99.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy.stats import binom

from .contract import apply_contract
from .records import RequestRecord

PERCENTILE_METHOD = "linear interpolation between order statistics (numpy method='linear')"
CI_METHOD = "95% distribution-free order-statistic interval (binomial); NaN bound where n is too small"
SLO_KEYS = ("ttft_ms", "tpot_ms", "e2e_ms")


@dataclass(frozen=True)
class Dist:
    """Summary of one latency distribution, ms."""

    n: int
    mean: float
    p50: float
    p90: float
    p99: float
    p99_lo: float
    p99_hi: float

    @classmethod
    def of(cls, values_ms: Sequence[float]) -> "Dist":
        v = np.asarray(values_ms, dtype=float)
        if v.size == 0:
            nan = float("nan")
            return cls(0, nan, nan, nan, nan, nan, nan)
        p50, p90, p99 = np.percentile(v, [50, 90, 99], method="linear")
        lo, hi = quantile_ci(v, 0.99)
        return cls(int(v.size), float(v.mean()), float(p50), float(p90), float(p99), lo, hi)


def quantile_ci(values: Sequence[float], q: float, level: float = 0.95) -> tuple[float, float]:
    """Order-statistic CI for the q-quantile: the number of samples below it is Binomial(n, q),
    so [x_(l), x_(u)] covers it with probability >= level for ranks chosen from that law.
    A bound that would need a rank outside 1..n is NaN (e.g. the upper bound of P99 below
    n ~ 300): the data cannot bound it, and saying so beats reporting the maximum."""
    x = np.sort(np.asarray(values, dtype=float))
    n = x.size
    if n == 0:
        return float("nan"), float("nan")
    alpha = (1.0 - level) / 2.0
    lo_rank = int(binom.ppf(alpha, n, q))  # P(B <= lo_rank - 1) <= alpha, 1-based rank
    hi_rank = int(binom.ppf(1.0 - alpha, n, q)) + 1
    lo = float(x[lo_rank - 1]) if 1 <= lo_rank <= n else float("nan")
    hi = float(x[hi_rank - 1]) if 1 <= hi_rank <= n else float("nan")
    return lo, hi


@dataclass(frozen=True)
class Metrics:
    n_measured: int  # non-warm-up requests
    n_ok: int
    n_rejected: int  # completed but broke the token-count contract
    n_errors: int  # transport/HTTP/timeout failures
    reject_reasons: tuple[tuple[str, int], ...]
    error_reasons: tuple[tuple[str, int], ...]
    ttft: Dist
    tpot: Dist  # (E2E - TTFT)/(completion_tokens - 1); 1-token requests excluded
    itl: Dist  # pooled inter-chunk gaps
    e2e: Dist
    duration_s: float  # first send to last completion
    throughput_tok_s: float  # sum of completion tokens (ok requests) / duration
    request_rate_rps: float  # ok requests / duration
    goodput_rps: float | None  # requests meeting every SLO / duration (None without SLO)
    slo: dict | None
    # cross-check against llama.cpp's own timings (None when the server gives none)
    server_prompt_ms_p50: float | None
    ttft_minus_server_prompt_ms_p50: float | None  # the harness + HTTP + queueing overhead
    server_tpot_ms_p50: float | None  # predicted_per_token_ms
    tpot_minus_server_tpot_ms_p50: float | None
    spec_draft_n: int | None
    spec_draft_accepted: int | None
    spec_acceptance: float | None
    # share of the accepted requests' prompt tokens the server reports it served from its prefix
    # cache (measured, never assumed); None where no response reports cached tokens
    prefix_hit_rate: float | None = None
    percentile_method: str = PERCENTILE_METHOD
    ci_method: str = CI_METHOD

    def to_dict(self) -> dict:
        d = asdict(self)
        d["reject_reasons"] = dict(self.reject_reasons)
        d["error_reasons"] = dict(self.error_reasons)
        return d


def _meets(r: RequestRecord, slo: Mapping[str, float]) -> bool:
    if not r.ok:
        return False  # errors and rejected requests count as failures
    got = {"ttft_ms": r.ttft_s, "tpot_ms": r.tpot_s, "e2e_ms": r.e2e_s}
    for key, limit in slo.items():
        value = got[key]
        if value is None:
            if key == "tpot_ms":
                continue  # one-token requests have no TPOT: nothing to violate
            return False
        if value * 1e3 > limit:
            return False
    return True


def _median(values: list[float]) -> float | None:
    return float(np.median(values)) if values else None


def derive_metrics(
    records: Sequence[RequestRecord], P: int | None = None, N: int | None = None, slo: Mapping[str, float] | None = None
) -> Metrics:
    """Metrics of the measured (non-warm-up) records. When P/N are given every record is
    re-checked against the contract (so stored records are judged the same way again);
    None trusts the verdict recorded with the record (e.g. per-row lengths of a trace)."""
    if slo is not None:
        bad = sorted(set(slo) - set(SLO_KEYS))
        if bad:
            raise ValueError(f"slo: unknown key {bad[0]!r}; allowed: {', '.join(SLO_KEYS)}")
    recs = [r for r in records if not r.warmup]
    if P is not None or N is not None:
        recs = [apply_contract(r, P, N) if r.error is None else r for r in recs]
    ok = [r for r in recs if r.ok]
    errors = [r for r in recs if r.error is not None]
    rejected = [r for r in recs if r.error is None and not r.ok]

    ttft = [r.ttft_s * 1e3 for r in ok if r.ttft_s is not None]
    tpot = [r.tpot_s * 1e3 for r in ok if r.tpot_s is not None]
    itl = [g * 1e3 for r in ok for g in np.diff(r.chunk_ts)]
    e2e = [r.e2e_s * 1e3 for r in ok if r.e2e_s is not None]

    if recs:
        start = min(r.send_ts for r in recs)
        # last completion; with no accepted request, the last end of any (so rates read 0, not NaN)
        end = max((r.end_ts for r in (ok or recs) if r.end_ts is not None), default=start)
        duration = max(end - start, 0.0)
    else:
        duration = 0.0
    tokens = sum(r.completion_tokens or 0 for r in ok)
    per_s = (lambda x: x / duration) if duration > 0 else (lambda x: float("nan"))
    # goodput's window is every measured request's, failed ones included: a request that errored or
    # broke the contract is a failure inside the run, not outside it
    span = (max((r.end_ts for r in recs if r.end_ts is not None), default=start) - start) if recs else 0.0
    goodput = None if slo is None else (sum(_meets(r, slo) for r in recs) / span if span > 0 else float("nan"))

    timed = [r for r in ok if r.server_timings]
    prompt_ms = [r.server_timings["prompt_ms"] for r in timed if "prompt_ms" in r.server_timings]
    overhead = [
        r.ttft_s * 1e3 - r.server_timings["prompt_ms"]
        for r in timed
        if "prompt_ms" in r.server_timings and r.ttft_s is not None
    ]
    srv_tpot = [
        r.server_timings["predicted_per_token_ms"]
        for r in timed
        if r.server_timings.get("predicted_per_token_ms") is not None
    ]
    tpot_diff = [
        r.tpot_s * 1e3 - r.server_timings["predicted_per_token_ms"]
        for r in timed
        if r.tpot_s is not None and r.server_timings.get("predicted_per_token_ms") is not None
    ]
    drafted = [r.server_timings for r in timed if "draft_n" in r.server_timings]
    draft_n = sum(int(t["draft_n"]) for t in drafted) if drafted else None
    draft_ok = sum(int(t.get("draft_n_accepted", 0)) for t in drafted) if drafted else None

    return Metrics(
        n_measured=len(recs),
        n_ok=len(ok),
        n_rejected=len(rejected),
        n_errors=len(errors),
        reject_reasons=tuple(Counter(r.reject_reason or "?" for r in rejected).most_common()),
        error_reasons=tuple(Counter((r.error or "?")[:120] for r in errors).most_common()),
        ttft=Dist.of(ttft),
        tpot=Dist.of(tpot),
        itl=Dist.of(itl),
        e2e=Dist.of(e2e),
        duration_s=duration,
        throughput_tok_s=per_s(tokens),
        request_rate_rps=per_s(len(ok)),
        goodput_rps=goodput,
        slo=dict(slo) if slo is not None else None,
        server_prompt_ms_p50=_median(prompt_ms),
        ttft_minus_server_prompt_ms_p50=_median(overhead),
        server_tpot_ms_p50=_median(srv_tpot),
        tpot_minus_server_tpot_ms_p50=_median(tpot_diff),
        spec_draft_n=draft_n,
        spec_draft_accepted=draft_ok,
        spec_acceptance=(draft_ok / draft_n) if draft_n else None,
        prefix_hit_rate=_hit_rate(ok),
    )


def _hit_rate(ok: Sequence[RequestRecord]) -> float | None:
    reported = [r for r in ok if r.cached_tokens is not None and r.prompt_tokens]
    if not reported:
        return None
    return sum(r.cached_tokens for r in reported) / sum(r.prompt_tokens for r in reported)
