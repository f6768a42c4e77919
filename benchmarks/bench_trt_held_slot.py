"""How many requests wait for their first token in aiconfigurator's closed-loop rows, by Little's law,
per engine, engine version, card and model: the check behind bench_engine_schedulers' TensorRT-LLM
"held slot" (HELD_CHOICES), which is fitted, not sourced (docs/results/2026-12-02-trt-slot.md).

A closed loop of `clients` clients with no think time sends a client's next request when its last one
ends, so each client's rate is 1 / E2E and, by Little's law, the mean number of requests between send
and first token is L = TTFT x clients / E2E, with E2E = TTFT + (output - 1) x TPOT (the rows' TPOT is
per output token after the first). An engine that admits every client at once and prefills a prompt
in a step or two keeps L well under 1 at a few clients and long outputs; L >= 1 there means about one
request always waits, as if the engine ran one request fewer than its clients.

Rows: the shipped multi-GPU table's aggregated concurrency rows of aiconfigurator
(spec/published_multigpu.csv), at <= LOW clients. --silicon PATH reads aiconfigurator's own
silicon_sample.csv instead (e.g. `git show 0b077da5e:aic-core/src/aiconfigurator_core/systems/silicon_sample.csv`
from ai-dynamo/aiconfigurator), whose TensorRT-LLM rows carry their backend_version and batch_size
(the deployment's max batch size) for every model, not only those the table reads; only rows whose
batch_size is their client count are kept.

--harness prints, per collection of the shipped tables (dense and MoE) and model, the harness wait the
product fits (calibrate.published_harness: floor of L's low quantile over the collection's rows of the
other models) beside what the model's own rows alone would give (in-sample, not used).

    python benchmarks/bench_trt_held_slot.py [--silicon silicon_sample.csv] [--low 16] [--harness]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

LOW = 16  # clients at most: where a held slot, not the prefill queue, would dominate the wait
WAITS = 0.9  # L at or above it: about one request always waiting


def littles_l(ttft_ms: pd.Series, tpot_ms: pd.Series, output: pd.Series, clients: pd.Series) -> pd.Series:
    """Mean requests between send and first token of a closed loop without think time."""
    e2e = ttft_ms + (output - 1) * tpot_ms
    return ttft_ms * clients / e2e


def table_rows() -> pd.DataFrame:
    """The shipped multi-GPU table's aggregated closed-loop rows of aiconfigurator, with L."""
    from pareto_atlas.calibrate.published_runs import AICONFIGURATOR
    from pareto_atlas.calibrate.published_table import load_multigpu

    m = load_multigpu().rows
    r = m[(m.source_id == AICONFIGURATOR) & (m.load == "concurrency") & (m.prefill_workers.astype(int) == 0)].copy()
    r["clients"] = r.load_value.astype(float)
    r["L"] = littles_l(r.ttft_ms.astype(float), r.tpot_ms.astype(float), r.output_tokens.astype(float), r.clients)
    return r.rename(columns={"engine_version": "version"})


def silicon_rows(path: Path) -> pd.DataFrame:
    """aiconfigurator's silicon_sample.csv aggregated rows whose batch_size is their client count, with L."""
    d = pd.read_csv(path)
    need = {"backend", "backend_version", "mode", "batch_size", "silicon_data_source", "silicon_ttft_ms", "osl"}
    if missing := need - set(d.columns):
        raise ValueError(f"--silicon: {path} lacks column(s) {sorted(missing)}")
    d["clients"] = d.silicon_data_source.str.extract(r"silicon_concurrency=(\d+)", expand=False).astype(float)
    d = d[(d["mode"] == "agg") & (d.batch_size == d.clients)].copy()
    d["L"] = littles_l(d.silicon_ttft_ms, d.silicon_tpot_ms, d.osl.astype(float), d.clients)
    return d.assign(
        engine=d.backend,
        version=d.backend_version.fillna("unstated"),
        gpu=d.system,
        model=d.model_path.str.split("/").str[-1],
        tp=d.tp_size,
    )


def harness_table() -> None:
    """Per collection and model: the fitted (leave-one-model-out) harness wait and the in-sample one."""
    from pareto_atlas.calibrate import published_harness as ph

    rows = ph.collection_rows()
    low = rows[rows.load_value.astype(float) <= ph.LOW]
    print(
        f"\nharness wait per collection and model (calibrate.published_harness): floor of L's p{100 * ph.QUANTILE:.0f} "
        f"at <= {ph.LOW} clients; fitted = on the collection's other models (what the product runs), own = the "
        "model's rows of one engine version alone (one source file: in-sample, not used)"
    )
    for (coll, model, engine, version), part in low.groupby(["collection", "model", "engine", "engine_version"]):
        w = ph.fit_wait(coll, model)
        q = part.L.quantile(ph.QUANTILE)
        print(
            f"  {coll[-28:]:>28} {model:<16} {engine} {version:<12} {len(part):>4} rows: own p{100 * ph.QUANTILE:.0f} {q:5.2f} "
            f"-> {int(q)}; fitted {w.count} ({w.rows} rows of other models, p{100 * ph.QUANTILE:.0f} {w.quantile_l:.2f})"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--silicon", type=Path, help="aiconfigurator's silicon_sample.csv (else the shipped table)")
    ap.add_argument("--low", type=int, default=LOW, help=f"clients at most (default {LOW})")
    ap.add_argument(
        "--harness", action="store_true", help="also print the product's fitted harness wait per collection"
    )
    a = ap.parse_args()
    rows = silicon_rows(a.silicon) if a.silicon else table_rows()
    low = rows[rows.clients <= a.low]
    what = f"{a.silicon} (batch_size = clients)" if a.silicon else "spec/published_multigpu.csv"
    print(f"L = TTFT x clients / E2E at <= {a.low} clients, aggregated rows of {what}; share of rows with L >= {WAITS}")
    g = low.groupby(["engine", "version", "gpu", "model", "tp"]).L
    out = g.agg(["count", "min", "median", "max"]).assign(waits=g.apply(lambda s: (s >= WAITS).mean()))
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        print(out.round(2).to_string())
    trt = low[low.engine == "trtllm"]
    for rc3, part in trt.groupby(trt.version == "1.0.0rc3"):
        name = "TensorRT-LLM 1.0.0rc3" if rc3 else "TensorRT-LLM, every other version"
        print(
            f"{name}: {len(part)} rows, median L {part.L.median():.2f}, "
            f"L >= {WAITS} on {(part.L >= WAITS).mean():.0%}, max {part.L.max():.2f}"
        )
    if a.harness:
        harness_table()


if __name__ == "__main__":
    main()
