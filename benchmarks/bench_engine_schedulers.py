"""Each engine's default scheduler against aiconfigurator's measured single-GPU Llama-3.1-8B rows (issue 31).

Every TP1, aggregated Llama-3.1-8B row of ai-dynamo/aiconfigurator's silicon_sample.csv (TRT-LLM on
H100-SXM, SGLang and vLLM on H200, 1K-4K prompts, 100-512 outputs, 8-352 clients), as the shipped
multi-GPU table holds them (spec/published_multigpu.csv, read by the product's reader
calibrate.published_table.load_multigpu), is simulated with the project's own published calibration
of the card (`pareto-atlas published`: the card fits on the shipped one-GPU table, which does not hold
these rows; the quantized formats' kernels also on the multi-GPU table's one-GPU rows, which do: the
vLLM H200 FP8 rows are in the FP8 fit, see published_fits), as a closed loop of the row's clients, under:
- `continuous` as it ran before issue 31 (one prefill a step);
- each engine's default scheduler as branch gpusched left it (TensorRT-LLM whole prompts, SGLang
  prefill steps without the decodes, vLLM mixed chunks; every KV cache 16-bit);
- that with each half of this branch's change alone, and with both: the KV dtype the reader reads
  for the row (published_readers.aiconfigurator: kv fp8 on an FP8 GEMM, as aiconfigurator deploys
  it), and the overlap schedulers TensorRT-LLM and SGLang run by default (simulate.schedulers); the
  last is what the product's GPU points run now;
- the row's own deployment as aiconfigurator's benchmark rules write it (deployment(): its sequence
  limit and token budget, TensorRT-LLM's overlap scheduler, sourced), on the row's KV dtype;
- that, with TensorRT-LLM's held slots (a count fitted on these rows, reported held out: with_held,
  held_out_slots). Nothing else is fitted on these rows;
- as the product's fit runs them now (as_run: calibrate.published_runs, each engine's default scheduler
  at the benchmark's deployment, read as the mean over ROUNDS rounds), on the rows' weights, on the
  fit before that change and on the fit refitted as run; then (AS RUN, the bar's figure) with the
  weights the deployment served (served_weights: SGLang's rows on the BF16 checkpoint ran BF16), that
  with these rows left out of the quantized formats' fit (published_fits: the only place the
  product's one-GPU fit sees them), and that with each engine on its own one-GPU card fit where the
  card has one (TensorRT-LLM on H100-SXM; calibrate.published fits one per engine, the atlas runs vLLM's),
  and that with TensorRT-LLM's held slots, each row on the count chosen without its group (held out),
  and that with these rows left out of the FP8 fit too (every fitted term held out).
Since 2026-12-02's engine-fits change the product runs each GPU point on its own engine's card fit
where the card has one (calibrate.published.for_engine), so the AS RUN line is that, and "every
engine on the vLLM fit (before)" is the product before it (the card's atlas fit for every engine).
The setups above AS RUN all run on the fit before the change ("engine defaults": every row under its
engine's default scheduler, read as medians), as they did when they were written.

    python benchmarks/bench_engine_schedulers.py [--rows] [--table more_rows.csv] [--kv-free]

The rows' figures do not say whether they are means or medians; the primary reading is the mean
over every request of a fresh closed loop (READINGS: how aiconfigurator's benchmark drives aiperf),
and the other readings are printed beside it.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from pareto_atlas.calibrate.published_table import UNSTATED_KV, load_multigpu
from pareto_atlas.simulate import des
from pareto_atlas.simulate.cost_model import coeffs
from pareto_atlas.simulate.memory import plan_memory
from pareto_atlas.simulate.params import CalibParams
from pareto_atlas.simulate.schedulers import Scheduler, scheduler
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
    kv: str = "f16"  # the KV dtype the table's reader reads for the row ("unstated": f16)
    checkpoint: str = ""  # the checkpoint the row names (model_published)


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
            "f16" if r.kv == UNSTATED_KV else r.kv,
            r.model_published,
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


FITS = ("engine defaults", "as run", "as run, these rows held out")


SERVED = "AS RUN: + SGLang's served BF16 weights"  # the product's run of these rows (published_runs, for_engine)
VLLM_FIT = "  AS RUN, every engine on the vLLM fit (before)"  # the product before 2026-12-02's engine-fits change
ENGINES = ("trtllm", "sglang", "vllm")
OWN = "  AS RUN, each engine's own card fit"
HELD = "  AS RUN, own card fit, held slots held out"
HELD_ALL = "  that, these rows out of the FP8 fit too"


def published_fits(
    cards: list[str],
) -> tuple[dict[str, dict[str, CalibParams]], dict[str, dict[tuple[str, str], CalibParams]], str]:
    """The cards' published fits three ways, and what they rest on: the one-GPU fit with every row
    under its engine's default scheduler, read as medians (before 2026-12-02's one-GPU as-run change:
    calibrate.published.RUN_AS_PUBLISHED off); as the product fits now (aiconfigurator's closed-loop
    rows as its benchmark ran them, calibrate.published_runs); and that with the rows compared here
    left out of the quantized formats' fit (the multi-GPU table's one-GPU rows fit the formats: the
    vLLM H200 FP8 rows are in the FP8 kernels' fit, and only there). The card fits proper rest on the
    one-GPU table, which holds no aiconfigurator row, so they are fitted once and shared. Per fit, the
    card's fit the atlas runs (for_atlas: vLLM's) and every (card, engine) fit the card has."""
    from pareto_atlas.calibrate import published as fit_module
    from pareto_atlas.calibrate.published import calibrate_published, for_atlas, for_engine
    from pareto_atlas.calibrate.published_formats import calibrate_formats
    from pareto_atlas.calibrate.published_table import PublishedTable, _sha, load_multigpu, load_published

    table, multi = load_published(), load_multigpu()
    if table.rows.source_id.astype(str).str.contains(SOURCE, case=False).any():
        raise ValueError(f"the one-GPU table holds rows of {SOURCE}: they would be in the card fits compared here")
    base = calibrate_published(table, cards)
    m = multi.rows
    mine = (
        m.source_id.str.contains(SOURCE, case=False)
        & (m.model == MODEL)
        & (m.n_gpus.astype(str) == "1")
        & m.gpu.isin(CARDS)
    )
    without = PublishedTable(m[~mine].reset_index(drop=True), multi.paths, _sha(m[~mine]))
    out, own = {}, {}
    for name, as_run, mt in zip(FITS, (False, True, True), (multi, multi, without)):
        rule, fit_module.RUN_AS_PUBLISHED = fit_module.RUN_AS_PUBLISHED, as_run
        try:
            cals = calibrate_formats(base, table, mt)
        finally:
            fit_module.RUN_AS_PUBLISHED = rule
        out[name] = {g: c.params for g, c in for_atlas(cals).items()}
        own[name] = {(c.hardware, c.engine): c.params for c in cals}
        # what the product's GPU points run (for_engine): per engine, per card
        own[name].update({(g, e): p for e in ENGINES for g, p in for_engine(cals, e).items()})
    said = (
        f"card fits on the one-GPU table's {len(table.rows)} rows (no {SOURCE} row); quantized formats also on the "
        f"multi-GPU table's one-GPU rows, the {int(mine.sum())} {SOURCE} {MODEL} rows among them but in the last fit"
    )
    return out, own, said


# How the measured figures are read. aiconfigurator's benchmark (its deployment generator's aiperf
# call: src/aiconfigurator/generator/config/backend_templates/benchmark/bench_run.sh.j2 and
# generator/sflow.py at ai-dynamo/aiconfigurator@095f58a5) sends `--warmup-request-count` requests,
# then ROUNDS x clients more at a fixed concurrency; aiperf runs its phases one after the other and
# waits for the warm-up's requests to return before the profiling phase sends its first ones
# (ai-dynamo/aiperf aiperf/timing/credit_issuing_strategy.py@32decb73, _execute_phases). The
# measured phase therefore starts from an idle engine with every client sending at once, as a fresh
# closed loop here does, and its figures are over every request of it. The rows do not say mean or
# median: the mean is the primary reading, the others are printed beside it.
ROUNDS = 20  # AICONFIGURATOR_BENCH_MULTI_ROUND's default (bench_run.sh.j2, sflow.py MULTI_ROUND)
READINGS = ("mean over every request", "median over every request", "mean after the first wave")


def deployment(row: Row) -> tuple[str, int, int]:
    """(batching, token budget a step, sequences) of the row's deployment as aiconfigurator's
    benchmark rules write it (ai-dynamo/aiconfigurator@095f58a5
    src/aiconfigurator/generator/rule_plugin/benchmark/{trtllm,vllm,sglang}.rule): the engine's
    sequence limit is the row's batch size, which is its client count; TensorRT-LLM's
    max_num_tokens and vLLM's max-num-batched-tokens are batch + prompt + 1500 (TensorRT-LLM's rounded
    up to its 32-token blocks), SGLang's max_prefill_tokens prompt + 1500 with enable_mixed_chunk on
    (its running decodes count against it: PrefillAdder's rem_input_tokens). TensorRT-LLM keeps
    enable_chunked_prefill off (backend_templates/trtllm/extra_engine_args.1.0.0rc3.yaml.j2), so a
    prompt runs whole ("whole"), and its overlap scheduler on (trtllm.rule: `agg
    disable_overlap_scheduler = false`). The rows do not name the rules they ran under; these are the
    ones aiconfigurator's own generator writes for a benchmark."""
    if row.engine == "trtllm":
        return "whole+overlap", -(-(row.clients + row.isl + 1500) // 32) * 32, row.clients
    if row.engine == "vllm":
        return "chunked", row.clients + row.isl + 1500, row.clients
    return "chunked", row.isl + 1500, row.clients


def simulate(
    row: Row, params: CalibParams, batching: str, chunk: int, max_seqs: int, kv: str = "f16"
) -> dict[str, tuple[float, float]]:
    """(TTFT ms, TPOT ms) of the row's closed loop (ROUNDS x clients requests from an idle engine)
    under each of READINGS."""
    m, hw = shipped_models()["llama-3.1-8b"], shipped_hardware()[row.card]
    k = Knobs(weights=row.weights, kv=kv, batching=batching, slots=max_seqs, chunk_tokens=chunk)
    plan = plan_memory(m, hw, k, row.isl, row.osl, params)
    c = coeffs(m, hw, k, params)
    n = ROUNDS * row.clients
    res = des.run(c, des.closed_loop(row.clients, n, row.isl, row.osl), batching, max_seqs, chunk, plan.kv_cap_tokens)
    tpot = (res.finish_t - res.first_t) / np.maximum(res.output - 1, 1)
    after = np.argsort(res.arrival, kind="stable")[row.clients :]
    out = {}
    for name, idx, stat in zip(READINGS, (slice(None), slice(None), after), (np.mean, np.median, np.mean)):
        out[name] = (1e3 * float(stat(res.ttft[idx])), 1e3 * float(stat(tpot[idx])))
    return out


def as_run(row: Row) -> tuple[str, int, int]:
    """(batching, token budget a step, sequences) of the row as the product's fit now runs it
    (calibrate.published_runs.aiconfigurator_run: the rules' deployment, each engine's default
    scheduler at it, SGLang's mixed chunks and overlap); read as the mean over ROUNDS rounds, READINGS[0]."""
    from pareto_atlas.calibrate.published_runs import ROUNDS as RUN_ROUNDS
    from pareto_atlas.calibrate.published_runs import aiconfigurator_run

    run = aiconfigurator_run(row.engine, row.clients, row.isl)
    assert run.rounds == RUN_ROUNDS == ROUNDS and run.reading == "mean", "the bench reads as published_runs runs"
    return run.batching, run.chunk_tokens, run.max_seqs


def served_weights(row: Row) -> Row:
    """The row with the weight format its deployment served (calibrate.published_runs.sglang_weights:
    SGLang's rows on the BF16 base checkpoint ran BF16, the generator passing no --quantization)."""
    import pandas as pd

    from pareto_atlas.calibrate.published_runs import sglang_weights

    w = sglang_weights(pd.Series({"engine": row.engine, "weights": row.weights, "model_published": row.checkpoint}))
    return replace(row, weights=w) if w else row


# TensorRT-LLM's rows wait as if the engine ran one request fewer than their clients: by Little's law
# the mean number of requests between send and first token, TTFT x clients / E2E, is >= 1.0 on every
# one of the 42 rows and 1.01 at 8 clients, 1,024/512, where prefill is a small share. No engine
# setting read here explains it (max_batch_size is the client count, the KV pool holds every
# request's whole output); it is fitted as a count of held slots, HELD_CHOICES, leaving each prompt
# length, output length and client count out in turn (held_out_slots), and printed apart from the
# sourced model. Not sourced (docs/results/2026-12-02-trt-slot.md): TensorRT-LLM's PyTorch executor
# admits max_batch_size x pp_size requests (PyExecutor.max_num_active_requests), and its CUDA-graph
# padding dummy never enters the active requests (nor is it made: the rows' graphs cover every batch
# size up to max_batch_size); TensorRT-LLM's later rows in the same file (1.1.0rc2.post2 to 1.3.0rc1,
# batch_size = clients) never wait so (benchmarks/bench_trt_held_slot.py --silicon), while SGLang's
# rows of the same H100 collection do: a trait of that collection's runs, not of the engine.
HELD_CHOICES = (0, 1, 2, 3)


def with_held(row: Row, held: int) -> tuple[str, int, int]:
    """The row's deployment with `held` of TensorRT-LLM's sequence slots held (other engines as they are)."""
    b, chunk, seqs = deployment(row)
    return b, chunk, max(seqs - held, 1) if row.engine == "trtllm" else seqs


def held_out_slots(rows: list[Row], params: dict[str, CalibParams], pick=None) -> tuple[int, list[str], dict[Row, int]]:
    """The held-slot count fitted on all TensorRT-LLM rows (in-sample), and one line per
    leave-one-group-out scheme: the count chosen without each group (by the median |TTFT error| of
    the rest) and the error on the group, pooled; and per row the count chosen without its group
    under the scheme whose pooled held-out error is the largest (what a held-out setup runs).
    pick(row): the params a row runs on (default: its card's in `params`)."""
    pick = pick or (lambda r: params[r.card])
    trt = [r for r in rows if r.engine == "trtllm"]
    err = {
        h: np.array([simulate(r, pick(r), *with_held(r, h), r.kv)[READINGS[0]][0] / r.ttft_ms - 1 for r in trt])
        for h in HELD_CHOICES
    }
    best = min(HELD_CHOICES, key=lambda h: np.median(np.abs(err[h])))
    lines = [f"in-sample (all {len(trt)} rows): {best} held, median |TTFT err| {np.median(np.abs(err[best])):.0%}"]
    worst, per_row = -1.0, {}
    for name, key in (("prompt length", "isl"), ("output length", "osl"), ("client count", "clients")):
        held_errs, picks, chosen = [], [], {}
        for g in sorted({getattr(r, key) for r in trt}):
            out = np.array([getattr(r, key) == g for r in trt])
            h = min(HELD_CHOICES, key=lambda h: np.median(np.abs(err[h][~out])))
            picks.append(f"{g}: {h}")
            held_errs += list(np.abs(err[h][out]))
            chosen.update({r: h for r, o in zip(trt, out) if o})
        lines.append(
            f"leave one {name} out: held-out median |TTFT err| {np.median(held_errs):.0%} "
            f"(held slots chosen without it: {', '.join(picks)})"
        )
        if np.median(held_errs) > worst:
            worst, per_row = float(np.median(held_errs)), chosen
    return best, lines, per_row


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
    ap.add_argument(
        "--kv-free",
        action="store_true",
        help="also run the engine defaults on fits whose KV read is fitted freely (before issue 31's rule; a fresh fit, slow)",
    )
    ap.add_argument(
        "--gemm-floor",
        choices=("on", "off"),
        help="a linear call's fixed cost (simulate.gemm_floor.MODE; default: the product's)",
    )
    a = ap.parse_args()
    if a.gemm_floor:
        from pareto_atlas.simulate import gemm_floor

        gemm_floor.MODE = a.gemm_floor
    rows = read_rows(a.table)
    cards = sorted({r.card for r in rows})
    t = time.perf_counter()
    fits, own, said = published_fits(cards)
    params, asrun, held_fp8 = (fits[k] for k in FITS)
    engine_fit = own["as run"]
    before = published_params(cards, kv_identified=0.0)[0] if a.kv_free else {}
    print(
        f"{len(rows)} rows of {SOURCE} (spec/published_multigpu.csv); published fits of {', '.join(sorted(params))}, "
        f"three ways ({', '.join(FITS)}; {time.perf_counter() - t:.0f} s): {said}. As run: "
        + "; ".join(f"{g}: {p.provenance}" for g, p in asrun.items())
    )
    held, held_lines, _ = held_out_slots(rows, params)
    print("\nTensorRT-LLM's held slots (fitted; not an engine setting):\n  " + "\n  ".join(held_lines))
    own_fit = lambda r: engine_fit.get((r.card, r.engine), asrun[r.card])  # noqa: E731
    own_out = lambda r: own[FITS[2]].get((r.card, r.engine), held_fp8[r.card])  # noqa: E731
    _, own_lines, own_held = held_out_slots(rows, params, own_fit)

    def held_run(r: Row) -> tuple[str, int, int]:  # TensorRT-LLM's rows on their held-out count, the rest as run
        return with_held(r, own_held.get(r, 0)) if r.engine == "trtllm" else as_run(r)

    print(
        "TensorRT-LLM's held slots on its own card fit (AS RUN), the count each row runs chosen without its "
        "group (the scheme with the largest held-out error):\n  " + "\n  ".join(own_lines)
    )
    f16 = "f16"

    def plain(s: Scheduler) -> str:  # the policy without the overlap scheduler (branch gpusched's)
        return s.batching

    runs = {
        "continuous (before issue 31)": lambda r, s: (params[r.card], "continuous", 0, s.max_seqs, f16),
        "engine defaults, gpusched (before)": lambda r, s: (params[r.card], plain(s), s.chunk_tokens, s.max_seqs, f16),
        "  + the row's KV dtype (reader)": lambda r, s: (params[r.card], plain(s), s.chunk_tokens, s.max_seqs, r.kv),
        "  + overlap schedulers": lambda r, s: (params[r.card], s.policy, s.chunk_tokens, s.max_seqs, f16),
        "engine defaults now (both)": lambda r, s: (params[r.card], s.policy, s.chunk_tokens, s.max_seqs, r.kv),
        "row's deployment (sourced)": lambda r, s: (params[r.card], *deployment(r), r.kv),
        f"deployment + {held} held TRT slot": lambda r, s: (params[r.card], *with_held(r, held), r.kv),
        "as run, rows' weights, fit before": lambda r, s: (params[r.card], *as_run(r), r.kv),
        "  as run, rows' weights, fit as run": lambda r, s: (asrun[r.card], *as_run(r), r.kv),
        VLLM_FIT: lambda r, s: (asrun[r.card], *as_run(r), r.kv),
        SERVED: lambda r, s: (engine_fit[(r.card, r.engine)], *as_run(r), r.kv),
        "  AS RUN, these rows out of the fit": lambda r, s: (held_fp8[r.card], *as_run(r), r.kv),
        OWN: lambda r, s: (own_fit(r), *as_run(r), r.kv),
        HELD: lambda r, s: (own_fit(r), *held_run(r), r.kv),
        HELD_ALL: lambda r, s: (own_out(r), *held_run(r), r.kv),
    }
    if a.kv_free:
        runs["engine defaults, KV read fitted freely"] = lambda r, s: (
            before[r.card],
            "chunked",
            s.chunk_tokens,
            s.max_seqs,
            f16,
        )
    now = "engine defaults now (both)"
    served = {
        SERVED,
        VLLM_FIT,
        "  AS RUN, these rows out of the fit",
        OWN,
        HELD,
        HELD_ALL,
    }  # the weights the deployment served
    err: dict[tuple[str, str], list[tuple[float, float]]] = {}
    readings: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        s = scheduler(r.engine, shipped_hardware()[r.card])
        for name, how in runs.items():
            p, b, chunk, seqs, kv = how(r, s)
            sims = simulate(served_weights(r) if name in served else r, p, b, chunk, seqs, kv)
            ttft, tpot = sims[READINGS[0]]
            e = (ttft / r.ttft_ms - 1.0, tpot / r.tpot_ms - 1.0)
            band = next(label for lo, hi, label in BANDS if lo <= r.clients <= hi)
            for key in ("all", r.engine, f"{r.engine} {r.card} {r.weights}", f"{r.engine} {band}"):
                err.setdefault((key, name), []).append(e)
            if name == now:
                for reading, (tt, tp) in sims.items():
                    readings.setdefault(reading, []).append((tt / r.ttft_ms - 1.0, tp / r.tpot_ms - 1.0))
            if a.rows:
                print(
                    f"  {r.engine:7s} {r.card:8s} {r.weights:4s} {r.isl:5d}/{r.osl:<4d} x{r.clients:<4d} {name[:30]:30s} "
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
    print(f"\n{now} over all rows, as other readings of the measured figures would have them:")
    for reading in READINGS[1:]:
        print(_line(reading, readings[reading]))
    print(
        "\nschedulers: "
        + "; ".join(
            f"{c}: {scheduler(e, shipped_hardware()[c]).label}" for c in cards for e in ("trtllm", "sglang", "vllm")
        )
    )
    print(
        "bar (issue 31): median |TTFT error| <= 25 % and |TPOT error| <= 15 % over all rows, each engine's default "
        "scheduler (as the benchmark deployed it: AS RUN)"
    )
    print(f"rows' KV dtype as the reader reads it: {sorted({(r.engine, r.weights, r.kv) for r in rows})}")
    for name in runs:
        e = np.array(err[("all", name)])
        tt, tp = np.median(np.abs(e[:, 0])), np.median(np.abs(e[:, 1]))
        print(
            f"  {name:44s} TTFT {tt:4.0%} {'met' if tt <= 0.25 else 'NOT met'}, TPOT {tp:4.0%} {'met' if tp <= 0.15 else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
