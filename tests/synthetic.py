"""Synthetic points tables that follow contract 1, for tests, benchmarks and report previews.

Shapes are plausible (quantization cuts latency and some quality, batching trades latency for
throughput, a naive FP8 KV cache keeps its speed and collapses to zero quality, as in the seed
paper), but nothing here is a measurement: every row says `provenance` honestly (a few marked
`measured` so that figures can show anchors) and the caller must never present them as real.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import pandas as pd

from pareto_atlas.spec.knobs import BITS_PER_KV, BITS_PER_WEIGHT, Knobs

KNOB_COLUMNS = (
    "weights",
    "kv",
    "kv_keep",
    "eviction",
    "spec",
    "spec_k",
    "spec_accept",
    "batching",
    "slots",
    "chunk_tokens",
    "sparse_budget",
)
POINT_COLUMNS = (
    "point_id",
    "label",
    "hardware",
    "workload",
    "concurrency",
    "rate_rps",
    *KNOB_COLUMNS,
    "optimizations",
    "n_opts",
    "provenance",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "tpot_p50_ms",
    "tpot_p99_ms",
    "e2e_p50_ms",
    "e2e_p99_ms",
    "throughput_tok_s",
    "n_devices",
    "throughput_per_device_tok_s",
    "goodput_rps",
    "mem_gb",
    "lat_rel_err",
    "thr_rel_err",
    "price_per_hour",
    "price_date",
    "cost_per_mtok",
    "quality",
    "quality_lo",
    "quality_hi",
    "quality_rel",
    "quality_rel_lo",
    "quality_rel_hi",
    "quality_provenance",
    "feasible",
    "infeasible_reason",
)
# Half-width of quality_rel's paired interval (arms answer the same items, so it is much tighter
# than two independent scores' intervals); the baseline's own quality is exactly 1.
PAIRED_HALF = 0.02

# (name, relative memory bandwidth, $/hour): toy cards, not the shipped hardware cards.
DEFAULT_HARDWARE = (("L4", 1.0, 0.39), ("A100-80G-PCIe", 6.4, 1.39), ("H100-PCIe", 6.7, 2.89))
BASE_QUALITY = 0.765
# Quality kept per weight type (toy numbers shaped like the seed's GSM8K arm).
WEIGHT_QUALITY = {
    "F16": 1.0,
    "FP8": 0.994,
    "Q8_0": 0.995,
    "Q5_0": 0.985,
    "Q4_K_M": 0.975,
    "Q4_0": 0.96,
    "AWQ4": 0.941,
    "Q3_K": 0.90,
    "Q2_K": 0.75,
}


def knob_grid() -> list[Knobs]:
    """A small configuration space: singles and stacks over the main knob families."""
    out = []
    for w in ("F16", "FP8", "Q8_0", "Q4_0", "AWQ4"):
        for kv in ("f16", "q8_0", "fp8"):
            for spec in ("none", "ngram"):
                for slots in (1, 8):
                    for sparse in (1.0, 0.5):
                        out.append(
                            Knobs(
                                weights=w,
                                kv=kv,
                                spec=spec,
                                spec_k=4 if spec != "none" else 0,
                                spec_accept=0.5 if spec != "none" else 0.0,
                                slots=slots,
                                sparse_budget=sparse,
                            )
                        )
    return out


def _pid(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:16]


def synthetic_points(
    n_configs: int | None = None,
    *,
    seed: int = 0,
    hardware: Sequence[tuple[str, float, float]] = DEFAULT_HARDWARE,
    workloads: Sequence[str] = ("chat-512-128",),
    concurrencies: Sequence[int] = (1,),
    measured_fraction: float = 0.1,
    lat_rel_err: float = 0.05,
    price_date: str = "2026-07",
) -> pd.DataFrame:
    """A contract-1 points table over `knob_grid()` (repeated with jitter up to `n_configs` knobs)."""
    rng = np.random.default_rng(seed)
    grid = knob_grid()
    reps = 1 if n_configs is None else max(1, -(-n_configs // len(grid)))
    knobs = (grid * reps)[: n_configs or len(grid)]
    kinfo = []
    for i, k in enumerate(knobs):
        opts = k.optimizations()
        kinfo.append((k, k.label() + (f"#{i // len(grid)}" if i >= len(grid) else ""), "+".join(opts), len(opts)))
    rows = []
    for hw, bw, price in hardware:
        for wl in workloads:
            for conc in concurrencies:
                jit = rng.normal(1.0, 0.03, size=len(kinfo))
                meas = rng.random(len(kinfo)) < measured_fraction
                for j, (k, label, opts, n_opts) in enumerate(kinfo):
                    wbytes = BITS_PER_WEIGHT[k.weights] / 16.0
                    kvbytes = BITS_PER_KV[k.kv] / 16.0
                    step = (0.8 * wbytes + 0.2 * kvbytes * k.sparse_budget) * 40.0 / bw * jit[j]
                    if k.spec != "none":
                        step *= 0.95  # n-gram speculation at near parity, as the seed measured
                    tpot50 = step * (1 + 0.15 * (k.slots - 1) / 7)
                    ttft50 = tpot50 * 12 * (1 + 0.5 * (k.slots - 1) / 7)
                    thr = 1000.0 / tpot50 * k.slots * conc**0.5
                    q = (
                        BASE_QUALITY
                        * WEIGHT_QUALITY[k.weights]
                        * {"f16": 1.0, "q8_0": 0.997, "q4_0": 0.97, "fp8": 0.0}[k.kv]
                    )
                    q *= 0.99 if k.sparse_budget < 1 else 1.0
                    half = 1.96 * np.sqrt(max(q * (1 - q), 1e-4) / 200)
                    is_meas = bool(meas[j])
                    err = 0.0 if is_meas else lat_rel_err
                    rows.append(
                        {
                            "point_id": _pid(k.key(), label, hw, wl, conc),
                            "label": label,
                            "hardware": hw,
                            "workload": wl,
                            "concurrency": conc,
                            "rate_rps": np.nan,
                            **k.to_dict(),
                            "optimizations": opts,
                            "n_opts": n_opts,
                            "provenance": "measured" if is_meas else "simulated",
                            "ttft_p50_ms": ttft50,
                            "ttft_p99_ms": ttft50 * 1.6,
                            "tpot_p50_ms": tpot50,
                            "tpot_p99_ms": tpot50 * 1.3,
                            "e2e_p50_ms": ttft50 + 127 * tpot50,
                            "e2e_p99_ms": 1.6 * ttft50 + 127 * 1.3 * tpot50,
                            "throughput_tok_s": thr,
                            "n_devices": 2 if k.batching == "disagg" else 1,
                            "throughput_per_device_tok_s": thr / (2 if k.batching == "disagg" else 1),
                            "goodput_rps": np.nan,
                            "mem_gb": 16.0 * wbytes + 2.0 * kvbytes * k.slots,
                            "lat_rel_err": err,
                            "thr_rel_err": err,
                            "price_per_hour": price,
                            "price_date": price_date,
                            "cost_per_mtok": price / (thr * 3600) * 1e6,
                            "quality": q,
                            "quality_lo": max(0.0, q - half) if q > 0 else 0.0,
                            "quality_hi": min(1.0, q + half),
                            "quality_rel": q / BASE_QUALITY,
                            "quality_rel_lo": q / BASE_QUALITY - (PAIRED_HALF if q != BASE_QUALITY else 0.0),
                            "quality_rel_hi": q / BASE_QUALITY + (PAIRED_HALF if q != BASE_QUALITY else 0.0),
                            "quality_provenance": "measured"
                            if k.spec == "none" and k.slots == 1
                            else "inherited:quality-arm",
                            "feasible": True,
                            "infeasible_reason": "",
                        }
                    )
    return pd.DataFrame(rows, columns=list(POINT_COLUMNS))


def random_points(n: int, *, seed: int = 0, hardware: Sequence[str] = ("L4", "A100-80G-PCIe")) -> pd.DataFrame:
    """A fast, vectorised contract-1 table of `n` random rows (benchmarks of 100k+ points)."""
    rng = np.random.default_rng(seed)
    grid = knob_grid()
    pick = rng.integers(0, len(grid), size=n)
    ks = [grid[i] for i in range(len(grid))]
    knob_df = pd.DataFrame([k.to_dict() for k in ks]).iloc[pick].reset_index(drop=True)
    labels = np.array([k.label() for k in ks], dtype=object)[pick]
    opts = [k.optimizations() for k in ks]
    hw = np.asarray(hardware, dtype=object)[rng.integers(0, len(hardware), size=n)]
    price = np.where(hw == hardware[0], 0.39, 1.39)
    tpot = rng.lognormal(np.log(20), 0.5, size=n)
    thr = rng.lognormal(np.log(500), 0.7, size=n)
    q = np.clip(rng.normal(0.74, 0.05, size=n), 0, 1)
    df = pd.DataFrame(
        {
            "point_id": [f"p{i:07d}" for i in range(n)],
            "label": labels,
            "hardware": hw,
            "workload": "chat-512-128",
            "concurrency": 1,
            "rate_rps": np.nan,
        }
    )
    df = pd.concat([df, knob_df], axis=1)
    df["optimizations"] = np.array(["+".join(o) for o in opts], dtype=object)[pick]
    df["n_opts"] = np.array([len(o) for o in opts])[pick]
    df["provenance"] = np.where(rng.random(n) < 0.01, "measured", "simulated")
    df["ttft_p50_ms"], df["ttft_p99_ms"] = tpot * 12, tpot * 20
    df["tpot_p50_ms"], df["tpot_p99_ms"] = tpot, tpot * 1.3
    df["e2e_p50_ms"], df["e2e_p99_ms"] = tpot * 140, tpot * 190
    df["throughput_tok_s"], df["goodput_rps"], df["mem_gb"] = thr, np.nan, 10.0
    df["n_devices"] = np.where(df["batching"] == "disagg", 2, 1)
    df["throughput_per_device_tok_s"] = thr / df["n_devices"]
    df["lat_rel_err"] = df["thr_rel_err"] = np.where(df["provenance"] == "measured", 0.0, 0.05)
    df["price_per_hour"], df["price_date"] = price, "2026-07"
    df["cost_per_mtok"] = price / (thr * 3600) * 1e6
    df["quality"], df["quality_lo"], df["quality_hi"] = q, np.clip(q - 0.03, 0, 1), np.clip(q + 0.03, 0, 1)
    df["quality_rel"] = q / BASE_QUALITY
    df["quality_rel_lo"], df["quality_rel_hi"] = df["quality_rel"] - PAIRED_HALF, df["quality_rel"] + PAIRED_HALF
    df["quality_provenance"], df["feasible"], df["infeasible_reason"] = "measured", True, ""
    return df[list(POINT_COLUMNS)]
