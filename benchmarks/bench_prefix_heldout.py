"""Held-out error of the prefix cache's simulation: calibrate on one sharing pattern measured on llama.cpp
(its prompt cache off and on), predict patterns the fit never saw, measured the same way, and print
the error of TTFT p50 and TPOT p50 and the hit rate predicted beside the one the server reported.

    python benchmarks/bench_prefix_heldout.py          # measures benchmarks/prefix_heldout_study.toml (~3 min)
    python benchmarks/bench_prefix_heldout.py --no-measure   # re-scores the anchors already in the store

The study's "fit-" arms (a 384-token prompt, half of it a system prompt common to all, cache off and
on) are all the calibration sees (calibrate.fidelity.fit on their anchors, the fit the atlas runs,
with each anchor's measured hit rate). Every "held-" arm is then predicted as the atlas would simulate
it: its requests laid out by its sharing pattern (spec.sharing, the warm-up requests first, as they
were sent), the block cache (simulate.prefix_cache: the configuration's memory less a full running
batch, LRU) deciding which prompt tokens each request finds cached, and the event simulation replaying
the anchor's load (its clients' recorded think times). On llama.cpp (the study's engine) the cache is
its slots' own (simulate.prefix_cache.slot_cached_tokens: each slot reuses the last sequence it served,
to the token; a request takes the idle slot most similar to its prompt, else the least recently used),
so which tokens hit depends on when slots are idle: the slot model and the simulation run in turn until
they agree (simulate.prefix_cache.settle_slots, as the atlas simulates a llama.cpp point). Nothing
measured about a held-out anchor's speed or reuse enters its prediction; its hit rate is predicted, not
read. What its prompts were does: the leading tokens they share, as the server's tokenizer counted them
when the anchor was measured (metrics shared_prefix_tokens: the stated prefix's text and the
" Request <seed>-" that follows it in every request), replayed as the pattern's prefix
(spec.sharing.as_measured); an anchor stored before that count keeps the stated prefix, marked "*".

Goals (issue 33): median |error| of TTFT p50 and of TPOT p50 <= 10 % over the held-out anchors, and
each cached anchor's hit rate within 5 points. Anchors are kept in the store (resumable); the
measured figures are the project's campaign's (measure.campaign), under the exact token contract.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd

from pareto_atlas.calibrate.fidelity import fit
from pareto_atlas.calibrate.stage import attach_load
from pareto_atlas.measure.campaign import plan, run_campaign
from pareto_atlas.measure.hwprobe import THIS, this_machine
from pareto_atlas.measure.model_card import anchor_cards
from pareto_atlas.simulate import des
from pareto_atlas.simulate.cost_model import coeffs
from pareto_atlas.simulate.memory import plan_memory
from pareto_atlas.simulate.params import CalibParams
from pareto_atlas.simulate.prefix_cache import (
    SharedLoad,
    cache_tokens,
    cached_tokens,
    hit_rate,
    measured_twin_cached,
    settle_slots,
    shared_load,
)
from pareto_atlas.spec.sharing import Sharing, as_measured
from pareto_atlas.spec.trace import HASH_BLOCK_TOKENS, trace_rows
from pareto_atlas.spec.cards import HardwareCard, ModelCard
from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.spec.study import Study, study_from_dict
from pareto_atlas.store import Store
from pareto_atlas.store.points import measured_points

STUDY = Path(__file__).with_name("prefix_heldout_study.toml")
SOURCE = "mooncake_conversation"  # the shipped trace the slice is cut from
GOALS = {"ttft_p50_ms": 0.10, "tpot_p50_ms": 0.10}
HIT_GOAL = 0.05  # points of prompt tokens
FIT_PREFIX, HELD_PREFIX = "fit-", "held-"


def predict_shared(
    row: pd.Series, study: Study, model: ModelCard, hw: HardwareCard, params: CalibParams
) -> tuple[float, float, float]:
    """(TTFT p50 ms, TPOT p50 ms, hit rate) of one measured anchor as the simulator predicts it, its hit
    rate from the block cache over its sharing pattern's requests (warm-ups first), not the measured one."""
    arm = study.arm(str(row.arm))
    wl = arm.workload(study.workload)
    k = Knobs.from_row(row)
    P, O = int(row.prompt_tokens), int(row.output_tokens)
    share, _ = anchor_sharing(row, wl)
    conc, warm = int(row.concurrency), study.load.warmup
    think = row.get("think_s")
    think = np.asarray(think, float) if think is not None and len(think) else None
    n = len(think) if think is not None else int(row.n_requests)
    plan_ = plan_memory(model, hw, k, P, O, params)
    cap = plan_.kv_cap_tokens if plan_.kv_cap_tokens > 0 else np.inf
    cached = None
    if wl.trace:  # an open loop replayed at its measured sends, each request's blocks the trace row's
        sends = np.asarray(row.send_offsets, float)
        rows = wl.trace_rows()[: len(sends)]
        arr = des.trace(sends, np.asarray(row.req_prompt_tokens, np.int64), np.asarray(row.req_output_tokens, np.int64))
        if k.prefix_cache:  # the warm-ups (the first row, sent first) filled the cache
            sent = list(rows[:1]) * warm + list(rows)
            load = SharedLoad(
                np.array([r.prompt_tokens for r in sent], np.int64),
                np.array([r.output_tokens for r in sent], np.int64),
                tuple(r.hash_ids for r in sent),
                HASH_BLOCK_TOKENS,
            )
            room = cache_tokens(cap, k.slots, float(np.mean(load.prompt) + np.mean(load.output)))
            cached = cached_tokens(load, room)[warm:]
    else:
        if share is not None and k.prefix_cache:  # the warm-ups filled the cache; their times are not scored
            cached = measured_twin_cached(share, P, O, n, warm, max(conc, k.slots), cap, k.slots)
        arr = des.closed_loop(conc, n, P, O, think)
    c = coeffs(model, hw, k, params)
    res = des.run(c, arr, k.batching, k.slots, k.chunk_tokens, cap, None, seed=0, cached=cached)
    if cached is not None and study.engine.name == "llamacpp":
        # llama.cpp reuses its slots' own sequences, not a pool of blocks: which slot a request finds idle
        # is a matter of timing, so the slot model runs on the simulation's times, until they settle
        load = slot_load(wl, share, P, O, n, warm, max(conc, k.slots), row)
        cached, res = settle_slots(
            lambda hits: des.run(c, arr, k.batching, k.slots, k.chunk_tokens, cap, None, seed=0, cached=hits),
            res,
            cached,
            load,
            k.slots,
            c,
            conc,
            think,
            warm,
        )
    s = res.summary
    return s["ttft_p50_ms"], s["tpot_p50_ms"], hit_rate(cached, arr.prompt) if cached is not None else 0.0


def anchor_sharing(row: pd.Series, wl) -> tuple[Sharing | None, str]:
    """The sharing pattern an anchor's prompts had: the workload's, its prefix the tokens the server's
    tokenizer counted the prompts sharing where the anchor recorded them (spec.sharing.as_measured; an
    anchor stored before keeps the stated prefix, and the line says so)."""
    share = wl.sharing()
    if share is None or not share.prefix_tokens:
        return share, "no shared prefix stated"
    return as_measured(share, row.get("shared_prefix_tokens"), int(row.prompt_tokens))


def slot_load(wl, share, prompt: int, output: int, n: int, warm: int, width: int, row: pd.Series) -> SharedLoad:
    """An anchor's requests as sent, warm-ups first, in the blocks llama.cpp reuses: a sharing pattern's
    token by token (its reuse is token-exact), a trace's as its 512-token hash_ids."""
    if not wl.trace:
        return shared_load(share, (), prompt, output, warm + n, width, block=1)
    rows = wl.trace_rows()[: len(row.send_offsets)]
    sent = list(rows[:1]) * warm + list(rows)
    return SharedLoad(
        np.array([r.prompt_tokens for r in sent], np.int64),
        np.array([r.output_tokens for r in sent], np.int64),
        tuple(r.hash_ids for r in sent),
        HASH_BLOCK_TOKENS,
    )


def write_slice(path: Path, n: int, max_prompt: int, output_scale: int = 16) -> Path:
    """A slice of the Mooncake conversation trace at this machine's scale, as a trace file: its first n
    rows whose prompt fits max_prompt tokens (their 512-token blocks and arrival times unchanged; they
    share the trace's common first block and what else their sessions repeat), each answer 1/output_scale
    of its length (at least 4 tokens) so a 135M model on two cores replays it in about a minute."""
    rows = [r for r in trace_rows(SOURCE) if r.prompt_tokens <= max_prompt][:n]
    lines = [
        f"# {n} rows of {SOURCE} (kvcache-ai/Mooncake FAST25-release/traces/conversation_trace.jsonl @3b5a594, "
        f"Apache-2.0) with prompts <= {max_prompt} tokens; outputs / {output_scale}; written by {Path(__file__).name}"
    ]
    for r in rows:
        lines.append(
            json.dumps(
                {
                    "timestamp": round(r.arrival_s * 1e3),
                    "input_length": r.prompt_tokens,
                    "output_length": max(4, r.output_tokens // output_scale),
                    "hash_ids": list(r.hash_ids),
                }
            )
        )
    path.write_text("\n".join(lines) + "\n")
    return path.resolve()


def scored(df: pd.DataFrame, study: Study, hw: HardwareCard, params: CalibParams) -> pd.DataFrame:
    """Each anchor beside its prediction: measured and predicted TTFT/TPOT p50 and hit rate, errors."""
    cards = anchor_cards(study, df)
    out = []
    for (_, r), model in zip(df.iterrows(), cards):
        ttft, tpot, hit = predict_shared(r, study, model, hw, params)
        meas_hit = r.get("prefix_hit_rate")
        share, _ = anchor_sharing(r, study.arm(str(r.arm)).workload(study.workload))
        mark = "" if pd.notna(r.get("shared_prefix_tokens")) else "*"
        out.append(
            {
                "arm": r.arm,
                "workload": r.workload,
                # the shared prefix the prediction replays: counted by the server's tokenizer, or "*" stated
                "shared": "" if share is None else f"{share.prefix_tokens}{mark}",
                "cache": bool(r.prefix_cache),
                "hit meas": float(meas_hit) if meas_hit == meas_hit and meas_hit is not None else 0.0,
                "hit pred": hit,
                "ttft meas": r.ttft_p50_ms,
                "ttft pred": ttft,
                "tpot meas": r.tpot_p50_ms,
                "tpot pred": tpot,
                # other work on the machine during the anchor, in cores (measure.contention)
                "other cores": float(r.get("other_cpu_cores", float("nan"))),
            }
        )
    t = pd.DataFrame(out)
    t["ttft err"] = t["ttft pred"] / t["ttft meas"] - 1.0
    t["tpot err"] = t["tpot pred"] / t["tpot meas"] - 1.0
    t["hit err"] = t["hit pred"] - t["hit meas"]
    return t


def verdict_lines(held: pd.DataFrame) -> list[str]:
    """The held-out summary beside the goals."""
    lines = []
    for col, goal in (("ttft err", GOALS["ttft_p50_ms"]), ("tpot err", GOALS["tpot_p50_ms"])):
        med = float(np.median(held[col].abs()))
        lines.append(
            f"  {col.split()[0].upper()} p50: median |error| {med:5.1%} over {len(held)} held-out anchors "
            f"(max {held[col].abs().max():5.1%}); goal <= {goal:.0%}: {'met' if med <= goal else 'missed'}"
        )
    on = held[held.cache]
    worst = float(on["hit err"].abs().max()) if len(on) else float("nan")
    lines.append(
        f"  hit rate: predicted within {worst * 100:.1f} points of the server's report at worst over "
        f"{len(on)} cached anchors; goal <= {HIT_GOAL * 100:.0f} points: {'met' if worst <= HIT_GOAL else 'missed'}"
    )
    return lines


def progress(ev: str, info: dict) -> None:
    """A line per anchor measured (and per contended one measured again), with the other work beside it."""
    if ev in ("done", "remeasured"):
        m = info.get("metrics") or {}
        kept = f", kept the {info['kept']} try" if ev == "remeasured" else ""
        print(
            f"  {ev} {info['arm']}: {info.get('status', 'ok')}; other work {m.get('other_cpu_cores', float('nan')):.2f} "
            f"cores{kept}; load {os.getloadavg()[0]:.2f}; {time.strftime('%H:%M:%S', time.gmtime())} UTC",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--study", default=str(STUDY))
    ap.add_argument("--store", default="atlas-out/prefix-heldout/store.duckdb")
    ap.add_argument("--no-measure", action="store_true", help="score the anchors already in the store")
    ap.add_argument("--slice-rows", type=int, default=24, help="Mooncake rows replayed (0: none)")
    ap.add_argument("--slice-max-prompt", type=int, default=1536, help="the slice's longest prompt, tokens")
    ap.add_argument("--arms", default="", help="measure only these arms (comma-separated; the store resumes)")
    ap.add_argument(
        "--also-fit", default="", help="arms neither fit- nor held- that the fit sees too (comma-separated)"
    )
    a = ap.parse_args()
    Path(a.store).parent.mkdir(parents=True, exist_ok=True)
    raw = tomllib.loads(Path(a.study).read_text())
    if a.slice_rows:  # the Mooncake slice at this machine's scale, its cache off and on
        path = write_slice(Path(a.store).parent / "mooncake_slice.jsonl", a.slice_rows, a.slice_max_prompt)
        for on in (False, True):
            arm = {"name": f"held-mooncake-{'on' if on else 'off'}", "weights": "Q8_0", "trace": str(path)}
            raw["arms"].append({**arm, "prefix_cache": True} if on else arm)
    study = study_from_dict(raw, a.study, base=Path(a.study).parent)
    arms = [x for x in a.arms.split(",") if x]
    also = [x for x in a.also_fit.split(",") if x]
    if any(x.startswith(HELD_PREFIX) for x in also):
        raise SystemExit(f"--also-fit: {also}: a held-out arm never enters the fit")
    unknown = sorted(set(arms + also) - {arm.name for arm in study.arms})
    if unknown:
        raise SystemExit(
            f"--arms/--also-fit: {unknown[0]} is not an arm of {a.study}; arms: {', '.join(x.name for x in study.arms)}"
        )
    with Store(a.store) as store:
        hw = this_machine(study, store)
        if not a.no_measure:
            t0 = time.monotonic()
            print(f"measuring at {time.strftime('%H:%M:%S', time.gmtime())} UTC, load {os.getloadavg()[0]:.2f}")
            s = run_campaign(
                study,
                store,
                arms=arms or None,
                bandwidth_gbs=hw.mem_bw_gbs,
                on_progress=progress,
            )
            print(
                f"measured {s.measured}, kept {s.skipped}, failed {s.failed}, remeasured {s.remeasured} "
                f"({time.monotonic() - t0:.0f} s; until {time.strftime('%H:%M:%S', time.gmtime())} UTC, "
                f"load {os.getloadavg()[0]:.2f})"
            )
        ids = {p.anchor_id for p in plan(study)}
        df = measured_points(study, store)
        df = df[df.hardware.eq(THIS) & df.anchor_id.isin(ids)].reset_index(drop=True)
        df = attach_load(df, store)
    train = df[df.arm.str.startswith(FIT_PREFIX) | df.arm.isin(also)].reset_index(drop=True)
    held = df[df.arm.str.startswith(HELD_PREFIX)].reset_index(drop=True)
    if len(train) < 2 or not len(held):
        raise SystemExit(f"--store {a.store}: {len(train)} calibration and {len(held)} held-out anchors; measure first")
    cal = fit(train, anchor_cards(study, train), hw, engine=study.engine.name, loo=False, lomo=False)
    params = cal.params
    print(
        f"\n== Prefix cache held out: calibrated on {', '.join(train.arm)} ({train.workload.iloc[0]}, the only "
        f"sharing pattern the fit sees); {len(held)} anchors of patterns it never saw predicted with the block cache"
    )
    table = pd.concat(
        [scored(train, study, hw, params).assign(role="fit"), scored(held, study, hw, params).assign(role="held")]
    )
    fmt = {c: "{:.1f}".format for c in ("ttft meas", "ttft pred", "tpot meas", "tpot pred")}
    fmt.update({c: "{:+.1%}".format for c in ("ttft err", "tpot err")})
    fmt.update({c: "{:.1%}".format for c in ("hit meas", "hit pred")})
    fmt["hit err"] = lambda v: f"{v * 100:+.1f} pt"
    fmt["other cores"] = "{:.2f}".format
    with pd.option_context("display.width", 250, "display.max_columns", 20):
        print(table.drop(columns=["cache"]).to_string(index=False, formatters=fmt))
    print(
        "  error = predicted / measured - 1 (hit: predicted - measured, in points of prompt tokens); "
        "fit rows: the calibration's own residual (its measured hit rate is an input there, predicted here); "
        "shared: the prefix tokens replayed, as the server's tokenizer counted them at measure time "
        "(* the stated prefix: an anchor stored before that count was recorded)"
    )
    print("\n".join(verdict_lines(table[table.role == "held"])))


if __name__ == "__main__":
    main()
