"""Each engine's default scheduler against aiconfigurator's measured single-GPU Llama-3.1-8B rows (issue 31).

Every TP1, aggregated Llama-3.1-8B row of ai-dynamo/aiconfigurator's silicon_sample.csv (TRT-LLM on
H100-SXM, SGLang and vLLM on H200, 1K-4K prompts, 100-512 outputs, 8-352 clients), as the shipped
multi-GPU table holds them (spec/published_multigpu.csv, read by the product's reader
calibrate.published_table.load_multigpu), is simulated with the project's own published calibration
of the card (`pareto-atlas published`: fitted on the shipped one-GPU table, which does not hold these
rows; any aiconfigurator row it came to hold is left out of the fit), as a closed loop of the row's
clients, twice: with `continuous` as it ran before issue 31 (one prefill a step) and with the engine's
default scheduler (simulate.schedulers). Nothing is fitted on these rows.

    python benchmarks/bench_engine_schedulers.py [--table more_rows.csv]

The rows' figures do not say whether they are means or medians; they are compared with the
simulation's means over the requests after the first wave (a closed loop's start sends every client
at once, which a benchmark's warm-up absorbs), and the other readings are printed beside the median
error.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pareto_atlas.calibrate.published_table import load_multigpu
from pareto_atlas.simulate import des
from pareto_atlas.simulate.cost_model import coeffs
from pareto_atlas.simulate.memory import plan_memory
from pareto_atlas.simulate.params import CalibParams
from pareto_atlas.simulate.schedulers import scheduler
from pareto_atlas.spec.cards import shipped_hardware, shipped_models
from pareto_atlas.spec.knobs import Knobs

SOURCE = "aiconfigurator"  # the rows compared: this source's (source_id contains it)
MODEL = "llama-3.1-8b"
CARDS = ("H100-SXM", "H200")


@dataclass(frozen=True)
class Row:
    engine: str
    version: str
    card: str
    weights: str
    isl: int
    osl: int
    clients: int
    ttft_ms: float
    tpot_ms: float


def read_rows(tables: list[Path] | None = None) -> list[Row]:
    """The TP1, aggregated, closed-loop Llama-3.1-8B rows of aiconfigurator's source in the shipped
    multi-GPU table (and `tables`), through the product's reader (one per configuration: a repeated
    row keeps its first)."""
    rows = load_multigpu(tables).rows
    keep = rows[
        rows.source_id.str.contains(SOURCE, case=False)
        & (rows.model == MODEL)
        & (rows.n_gpus == "1")
        & (rows.load == "concurrency")
        & rows.gpu.isin(CARDS)
        & (rows.ttft_ms != "")
        & (rows.tpot_ms != "")
    ]
    out, seen = [], set()
    for _, r in keep.iterrows():
        row = Row(
            r.engine,
            r.engine_version,
            r.gpu,
            r.weights,
            int(r.prompt_tokens),
            int(r.output_tokens),
            int(r.load_value),
            float(r.ttft_ms),
            float(r.tpot_ms),
        )
        key = (row.engine, row.version, row.card, row.weights, row.isl, row.osl, row.clients)
        if key not in seen:
            seen.add(key)
            out.append(row)
    if not out:
        raise ValueError(f"no TP1 aggregated {MODEL} rows of {SOURCE} on {', '.join(CARDS)} in the multi-GPU table")
    return out


def published_params(cards: list[str], kv_identified: float | None = None) -> tuple[dict[str, CalibParams], int]:
    """The cards' published fits as `simulate` takes them (from the fit cache when it holds them),
    fitted without any row of aiconfigurator's (should the shipped table come to hold some, they are
    left out, so the rows compared here stay held out); and how many rows were left out.
    kv_identified: the fit's KV_IDENTIFIED rule set to this share instead (0: the KV read efficiency
    fitted wherever two contexts exist, as before issue 31's rule), fitted here, never cached."""
    from pareto_atlas.calibrate import published as fit_module
    from pareto_atlas.calibrate import published_cache
    from pareto_atlas.calibrate.published import for_atlas
    from pareto_atlas.calibrate.published_formats import calibrate_published_formats
    from pareto_atlas.calibrate.published_table import PublishedTable, _sha, load_published

    table = load_published()
    theirs = table.rows.source_id.astype(str).str.contains("aiconfigurator", case=False) | table.rows.source.astype(
        str
    ).str.contains("aiconfigurator", case=False)
    shipped = (
        table
        if not theirs.any()
        else PublishedTable(table.rows[~theirs].reset_index(drop=True), table.paths, _sha(table.rows[~theirs]))
    )
    if kv_identified is not None:
        rule, fit_module.KV_IDENTIFIED = fit_module.KV_IDENTIFIED, kv_identified
        try:
            cals = calibrate_published_formats(shipped, cards)
        finally:
            fit_module.KV_IDENTIFIED = rule
        return {g: c.params for g, c in for_atlas(cals).items()}, int(theirs.sum())
    cals = published_cache.fitted(shipped, cards)
    return {g: c.params for g, c in for_atlas(cals).items()}, int(theirs.sum())


# How the measured figures are read (they do not say): the primary reading first, the others beside it
READINGS = ("mean after the first wave", "median after the first wave", "mean over every request")


def simulate(row: Row, params: CalibParams, batching: str, chunk: int, max_seqs: int) -> dict[str, tuple[float, float]]:
    """(TTFT ms, TPOT ms) of the row's closed loop under each of READINGS."""
    m, hw = shipped_models()["llama-3.1-8b"], shipped_hardware()[row.card]
    k = Knobs(weights=row.weights, batching=batching, slots=max_seqs, chunk_tokens=chunk)
    plan = plan_memory(m, hw, k, row.isl, row.osl, params)
    c = coeffs(m, hw, k, params)
    n = max(8 * row.clients, 400)
    res = des.run(c, des.closed_loop(row.clients, n, row.isl, row.osl), batching, max_seqs, chunk, plan.kv_cap_tokens)
    tpot = (res.finish_t - res.first_t) / np.maximum(res.output - 1, 1)
    after = np.argsort(res.arrival, kind="stable")[row.clients :]
    out = {}
    for name, idx, stat in zip(READINGS, (after, after, slice(None)), (np.mean, np.median, np.mean)):
        out[name] = (1e3 * float(stat(res.ttft[idx])), 1e3 * float(stat(tpot[idx])))
    return out


BANDS = ((1, 32, "8-32 clients"), (33, 128, "33-128 clients"), (129, 1 << 30, "over 128 clients"))


def _line(label: str, es: list[tuple[float, float]]) -> str:
    e = np.array(es)
    return (
        f"  {label:44s} {len(es):4d} rows  median |TTFT err| {np.median(np.abs(e[:, 0])):5.0%} "
        f"(median {np.median(e[:, 0]):+5.0%})  |TPOT err| {np.median(np.abs(e[:, 1])):5.0%} "
        f"(median {np.median(e[:, 1]):+5.0%})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--table",
        action="append",
        type=Path,
        help="another multi-GPU table in the format of spec/published_multigpu.csv (repeatable)",
    )
    ap.add_argument("--rows", action="store_true", help="print every row")
    a = ap.parse_args()
    rows = read_rows(a.table)
    cards = sorted({r.card for r in rows})
    t = time.perf_counter()
    params, left_out = published_params(cards)
    before, _ = published_params(cards, kv_identified=0.0)
    print(
        f"{len(rows)} rows of {SOURCE} (spec/published_multigpu.csv); published fits of {', '.join(sorted(params))} "
        f"({time.perf_counter() - t:.0f} s; {left_out} aiconfigurator rows of the shipped table left out of them): "
        + "; ".join(f"{g}: {p.provenance}" for g, p in params.items())
    )
    runs = {
        "continuous (before issue 31)": lambda r, s: (params[r.card], "continuous", 0),
        "default, KV read fitted freely (before)": lambda r, s: (before[r.card], s.batching, s.chunk_tokens),
        "default (now)": lambda r, s: (params[r.card], s.batching, s.chunk_tokens),
    }
    err: dict[tuple[str, str], list[tuple[float, float]]] = {}
    readings: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        s = scheduler(r.engine, shipped_hardware()[r.card])
        for name, how in runs.items():
            p, b, chunk = how(r, s)
            sims = simulate(r, p, b, chunk, s.max_seqs)
            ttft, tpot = sims[READINGS[0]]
            e = (ttft / r.ttft_ms - 1.0, tpot / r.tpot_ms - 1.0)
            band = next(label for lo, hi, label in BANDS if lo <= r.clients <= hi)
            for key in ("all", r.engine, f"{r.engine} {r.card} {r.weights}", f"{r.engine} {band}"):
                err.setdefault((key, name), []).append(e)
            if name == "default (now)":
                for reading, (tt, tp) in sims.items():
                    readings.setdefault(reading, []).append((tt / r.ttft_ms - 1.0, tp / r.tpot_ms - 1.0))
            if a.rows:
                print(
                    f"  {r.engine:7s} {r.card:8s} {r.weights:4s} {r.isl:5d}/{r.osl:<4d} x{r.clients:<4d} {name[:24]:24s} "
                    f"TTFT {ttft:8.1f} vs {r.ttft_ms:8.1f} ms ({e[0]:+7.0%})  TPOT {tpot:6.2f} vs {r.tpot_ms:6.2f} "
                    f"ms ({e[1]:+5.0%})"
                )
    print(f"\nsimulated {READINGS[0]} against the measured figure, per scheduler and fit:")
    keys = list(dict.fromkeys(k for k, _ in err))
    for name in runs:
        print(f"{name}:")
        for key in keys:
            if (key, name) in err:
                print(_line(key, err[(key, name)]))
    print("\nthe engine defaults now over all rows, as other readings of the measured figures would have them:")
    for reading in READINGS[1:]:
        print(_line(reading, readings[reading]))
    print(
        "\nschedulers: "
        + "; ".join(
            f"{c}: {scheduler(e, shipped_hardware()[c]).label}" for c in cards for e in ("trtllm", "sglang", "vllm")
        )
    )
    print("bar (issue 31): median |TTFT error| <= 25 % and |TPOT error| <= 15 % over all rows, engine defaults")


if __name__ == "__main__":
    main()
