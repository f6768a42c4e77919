"""Metric definitions and the percentile method, as every output states them: the one source of
docs/metrics.md (tests/unit/test_docs.py holds the page to it)."""

from __future__ import annotations

from pareto_atlas.measure.metrics import PERCENTILE_METHOD  # noqa: F401 - re-exported for the report

METRIC_DEFINITIONS = {
    "TTFT": "monotonic time from sending the request to the first streamed event that carries at least one "
    "generated token (role-only, empty or usage-only chunks do not count).",
    "TPOT": "per request, (E2E - TTFT) / (completion_tokens - 1), completion_tokens from the server's usage; "
    "requests with one token are excluded. Never E2E / N.",
    "Throughput": "sum of completion tokens / (first send to last completion), whole run.",
    "Cost per million tokens": "$/hour / (output tokens per second x 3600) x 1e6, with the price and its date stated.",
    "quality_rel": "task score / the baseline configuration's score; 95 % interval from the score's interval.",
    "Quality guard": "on intervals, never on a point estimate alone: a point is in when the 95 % interval of its "
    "quality_rel lies at or above the floor, out when it lies below, and a boundary case when it "
    "straddles the floor (not admitted, always listed). Where the point has a measured KL divergence "
    "against the baseline, that axis votes too: out if either axis is clearly out, in if either is "
    "clearly in and neither is out.",
    "Frontier (raw)": "no other point is at least as good on every objective and strictly better on one.",
    "Frontier with error bars": "a point is dominated only when another beats it beyond both error bars on every "
    "objective where they differ; raw-dominated points that cannot be separated are 'tied'.",
    "Provenance": "measured = anchor run on a real engine (no model error); simulated = calibrated simulator, "
    "± its calibrated relative error; prior = literature effect size, not measured here.",
}
