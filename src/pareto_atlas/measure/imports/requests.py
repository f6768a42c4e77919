"""Per-request data of an imported file as the project's raw records (measure.records), and the
figures derived from them with the project's own definitions (measure.metrics): where a file
has per-request times, TTFT and TPOT are recomputed, never taken from the tool's aggregates."""

from __future__ import annotations

import numpy as np

from pareto_atlas.measure.imports.result import ImportedAnchor, ImportFileError, Original
from pareto_atlas.measure.metrics import PERCENTILE_METHOD, derive_metrics
from pareto_atlas.measure.records import RequestRecord

DERIVED = "recomputed here from the file's per-request times"


def from_arrays(
    path: str,
    ttfts_s: list[float],
    gaps_s: list[list[float]] | None,
    input_lens: list[float],
    output_lens: list[float],
    errors: list[str] | None = None,
    starts_s: list[float] | None = None,
    e2e_s: list[float] | None = None,
) -> list[dict]:
    """RequestRecord dicts from per-request arrays (seconds). A request's end is its last streamed
    chunk (TTFT + its gaps) unless the file gives its end-to-end latency."""
    n = len(ttfts_s)
    for name, arr in (
        ("itls", gaps_s),
        ("input_lens", input_lens),
        ("output_lens", output_lens),
        ("errors", errors),
        ("start_times", starts_s),
        ("latencies", e2e_s),
    ):
        if arr is not None and len(arr) != n:
            raise ImportFileError(f"{path}: field {name!r}: {len(arr)} entries, but {n} TTFTs")
    out = []
    for i in range(n):
        t0 = float(starts_s[i]) if starts_s else 0.0
        err = (errors[i] if errors else "") or None
        if err is not None and not isinstance(err, str):
            err = str(err)
        gaps = list(gaps_s[i]) if gaps_s else []
        first = t0 + ttfts_s[i]
        chunks = tuple(np.cumsum([first] + gaps).tolist()) if err is None else ()
        end = t0 + e2e_s[i] if e2e_s else (chunks[-1] if chunks else first)
        rec = RequestRecord(
            idx=i,
            warmup=False,
            send_ts=t0,
            chunk_ts=chunks,
            first_token_ts=first if err is None else None,
            end_ts=end,
            prompt_tokens=int(input_lens[i]),
            completion_tokens=int(output_lens[i]),
            ok=err is None and output_lens[i] > 0,
            error=(err or "")[:200] or None,
            reject_reason=None if err is not None or output_lens[i] > 0 else "no output token",
        )
        out.append(rec.to_dict())
    return out


def put_derived(anchor: ImportedAnchor, records: list[dict], with_chunks: bool = True) -> None:
    """TTFT, TPOT, per-chunk gaps and E2E of the ok records, in the project's definitions."""
    m = derive_metrics([RequestRecord.from_dict(r) for r in records])
    for metric, dist in (
        ("ttft", m.ttft),
        ("tpot", m.tpot),
        ("itl_chunk", m.itl if with_chunks else None),
        ("e2e", m.e2e),
    ):
        if dist is None or dist.n == 0:
            continue
        for stat, v in (("mean", dist.mean), ("p50", dist.p50), ("p90", dist.p90), ("p99", dist.p99)):
            anchor.put(metric, stat, v, Original(f"{metric} ({DERIVED})", "ms", stat, PERCENTILE_METHOD))


def output_contract(
    path: str, field_name: str, out_lens: list[float], requested: list[float] | float | None, source: str
) -> tuple[str, str]:
    """(level, note) of per-request output lengths against the requested ones; outputs shorter or
    longer than asked reject the file, naming how many and the worst."""
    if requested is None:
        return "unverified", (
            f"per-request output lengths are in the file ({source}) but not the lengths asked "
            "for, so the exact token-count contract cannot be checked: contract unverified"
        )
    want = [float(requested)] * len(out_lens) if isinstance(requested, (int, float)) else list(requested)
    bad = [(i, o, w) for i, (o, w) in enumerate(zip(out_lens, want)) if o != w]
    if bad:
        i, o, w = min(bad, key=lambda b: b[1] - b[2])
        raise ImportFileError(
            f"{path}: field {field_name!r}: {len(bad)} of {len(out_lens)} requests generated "
            f"other than the tokens asked for (request {i}: {o:g} of {w:g}); outputs that stop "
            "early break the token-count contract"
        )
    return "verified", f"every request's output length ({source}) equals the length asked for"
