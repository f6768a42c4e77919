"""The measured side of the points table (contract 1 in docs/structures.md), read from the store:
one row per finished anchor, its quality joined by quality key and labelled by where it came from.
"""

from __future__ import annotations

import hashlib
import json
import math

import pandas as pd

from pareto_atlas.spec.cards import shipped_hardware
from pareto_atlas.spec.knobs import Knobs
from pareto_atlas.spec.study import Study
from pareto_atlas.store.compare import companion, engine_key, engine_label, quality_study
from pareto_atlas.store.db import Store
from pareto_atlas.store.quality import (
    KLD_COLUMNS,
    NO_KLD,
    QUALITY_COLUMNS,
    Quality,
    attach_quality,
    kld_row,
    kld_table,
    quality_for,
    quality_row,
    quality_table,
)

__all__ = ["all_points", "attach_quality", "cost_per_mtok", "measured_points", "point_id"]

NAN = float("nan")


def point_id(
    knobs: Knobs, hardware: str, workload: str, concurrency: int, rate: float | None, engine: str | None = None
) -> str:
    ident = json.dumps([knobs.to_dict(), hardware, workload, concurrency, rate, *engine_key(engine)], sort_keys=True)
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


def cost_per_mtok(price_per_hour: float, throughput_tok_s: float) -> float:
    """$ per million output tokens (docs/metrics.md): $/hour / (tokens/s x 3600) x 1e6."""
    if not throughput_tok_s or throughput_tok_s <= 0 or math.isnan(throughput_tok_s):
        return NAN
    return price_per_hour / (throughput_tok_s * 3600.0) * 1e6


def spec_measured(store: Store, anchor_id: str) -> tuple[float, float]:
    """(drafted tokens per generated token, acceptance per drafted token) from the server timings of
    the measured requests. llama.cpp reports draft_n / draft_n_accepted only when it drafted, so a
    missing key is 0 drafts; acceptance is NaN when nothing was drafted."""
    drafted = accepted = generated = 0
    for r in store.requests(anchor_id):
        if r.get("warmup") or not r.get("ok"):
            continue
        t = r.get("server_timings") or {}
        drafted += int(t.get("draft_n") or 0)
        accepted += int(t.get("draft_n_accepted") or 0)
        generated += int(r.get("completion_tokens") or 0)
    if generated == 0:
        return NAN, NAN
    return drafted / generated, (accepted / drafted if drafted else NAN)


def spec_from_counters(m: dict) -> tuple[float, float]:
    """The same from the server's own counters over the run (vLLM's /metrics; measure.engines.vllm_metrics)."""
    per_token, accept = m.get("spec_drafted_per_token"), m.get("spec_acceptance")
    return (NAN if per_token is None else float(per_token)), (NAN if accept is None else float(accept))


def measured_points(study: Study, store: Store) -> pd.DataFrame:
    """The study's anchors, and those of the study it compares with (`compare_with`), one row each."""
    own = _measured_rows(study, store)
    other = companion(study)
    if other is None:
        return own
    theirs = _measured_rows(other, store)
    frames = [f for f in (own, theirs) if len(f)]
    return pd.concat(frames, ignore_index=True, sort=False) if frames else own


def _measured_rows(study: Study, store: Store) -> pd.DataFrame:
    anchors = store.anchors(study.name)
    qs = quality_study(study, store)
    qt = quality_table(qs, store)
    kt = kld_table(qs, store)
    rows = []
    for _, a in anchors.iterrows():
        knobs = Knobs.from_dict(json.loads(a.knobs_json))
        m = json.loads(a.metrics_json)
        load = json.loads(a.load_json)
        wl = json.loads(a.workload_json)
        prov = json.loads(a.provenance_json or "{}")
        imported = prov.get("origin") == "imported"  # measure.imports: a peer's file, on the card it names
        card = shipped_hardware().get(a.hardware) if imported else None
        if imported and card is None:  # a peer's run on no card it named: kept as evidence, not a point
            continue
        model = a.get("model") or study.model.name
        # quality is scored on the study's [model]; another model's anchors (an arm's own model, an
        # imported run of another model) have none here
        q = (
            quality_row(quality_for(knobs, a.arm if qs is study else "", qs, qt)) + kld_row(knobs, kt)
            if model == study.model.name
            else quality_row(Quality.unmeasured(f"none: {'imported ' if imported else ''}anchor of {model}")) + NO_KLD
        )
        quality = dict(zip(QUALITY_COLUMNS + KLD_COLUMNS, q))
        price, price_date = _price(study, a.hardware)
        thr = m.get("throughput_tok_s", NAN)
        # an open loop has no clients (anchors stored before this said the arm's default of 1)
        conc = 0 if load.get("rate_rps") else load["concurrency"]
        drafted, accept = (
            (0.0, NAN)
            if knobs.spec == "none"
            else (spec_from_counters(m) if m.get("server_counters_source") else spec_measured(store, a.anchor_id))
        )
        pid = point_id(knobs, a.hardware, wl["name"], conc, load.get("rate_rps"), a.engine)
        if model != study.model.name:  # an arm's own model (ArmSpec.model): another point
            pid = hashlib.sha256(f"{pid}|{model}".encode()).hexdigest()[:16]
        rows.append(
            {
                # repeats of one configuration are separate measurements, each its own point
                "point_id": pid + (f"-r{a['repeat']}" if a["repeat"] else ""),
                "model": model,
                "arm": a.arm,
                "anchor_id": a.anchor_id,
                "repeat": a["repeat"],
                "campaign_id": a.campaign_id,
                "label": engine_label(knobs, a.engine),
                "engine": a.engine,
                "model_card": "imported" if imported else "measured here",
                "hardware": a.hardware,
                "workload": wl["name"],
                "prompt_tokens": wl["prompt_tokens"],
                "output_tokens": wl["output_tokens"],
                "concurrency": conc,
                "rate_rps": load.get("rate_rps") or NAN,
                "n_requests": load["requests"],
                **knobs.as_row(),
                "spec_drafted_per_token": drafted,
                "spec_accept_measured": accept,
                # the share of prompt tokens the server reported cached (measured; NaN where none reported)
                "prefix_hit_rate": NAN if m.get("prefix_hit_rate") is None else m["prefix_hit_rate"],
                # the leading tokens its prompts share as the server's tokenizer counted them (NaN: an anchor
                # stored before that was measured, or a server without /tokenize: spec.sharing.as_measured)
                "shared_prefix_tokens": NAN if m.get("shared_prefix_tokens") is None else m["shared_prefix_tokens"],
                "optimizations": "+".join(knobs.optimizations()),
                "n_opts": len(knobs.optimizations()),
                "provenance": "measured",
                "origin": prov["source"] if imported else "measured",
                "ttft_p50_ms": m["ttft"]["p50"],
                "ttft_p99_ms": m["ttft"]["p99"],
                "tpot_p50_ms": m["tpot"]["p50"],
                "tpot_p99_ms": m["tpot"]["p99"],
                "e2e_p50_ms": m["e2e"]["p50"],
                "e2e_p99_ms": m["e2e"]["p99"],
                "throughput_tok_s": thr,
                "goodput_rps": m.get("goodput_rps") or NAN,
                "mem_gb": (m.get("peak_rss_mb") or NAN) / 1024,
                "lat_rel_err": 0.0,
                "thr_rel_err": 0.0,
                "price_per_hour": price,
                "price_date": price_date,
                "cost_per_mtok": cost_per_mtok(price, thr),
                **quality,
                "quality_task": qs.quality.task,  # an anchor's shape is guarded by the study's task
                "quality_benchmark": qs.quality.task,
                "engine_version": a.engine_version,
                "feasible": True,
                "infeasible_reason": "",
                "weights_bpw": json.loads(a.provenance_json or "{}").get("weights_bpw", NAN),
                # other work on the machine during the run, in cores (measure.contention; NaN: not measured)
                "other_cpu_cores": m.get("other_cpu_cores", NAN),
                "contended": bool(m.get("contended", False)),
                # errored requests past measure.campaign.ERROR_SHARE_MAX: flagged, left out of calibration
                "error_share": m.get("error_share", NAN),
                "errored": bool(m.get("errored", False)),
                "error_line": m.get("error_line", ""),
            }
        )
    return pd.DataFrame(rows)


def _price(study: Study, hardware: str) -> tuple[float, str]:
    """$/hour of the card an anchor ran on, and its date: this machine's assumed rental price, or a
    GPU card's (the study's [prices] first, else the shipped card's)."""
    if hardware == "this-cpu" or not hardware:
        return study.cpu_price_per_hour, f"{study.price_date} (assumed CPU rental price)"
    from pareto_atlas.spec.cards import shipped_hardware

    card = shipped_hardware().get(hardware)
    if hardware in study.prices:
        return study.prices[hardware], f"{study.price_date} (study [prices])"
    return (card.price_per_hour, f"{card.price_date} ({card.price_source})") if card else (NAN, "")


def all_points(study: Study, store: Store) -> pd.DataFrame:
    """Measured anchors and the latest simulated run of the study, one points table."""
    measured = measured_points(study, store)
    if study.targets and len(measured) and "model" in measured:
        # an arm of another model that no target answers for (a size measured for the fit alone,
        # e.g. the default study's SmolLM2 anchors) is evidence for the calibration, not a point
        answered = {t.name for t in study.targets}
        measured = measured[measured.model.isin(answered) | measured.model_card.ne("measured here")]
    simulated = store.sim_points(study=study.name)
    if len(simulated):
        simulated = simulated.drop(columns=["sim_id"], errors="ignore")
    frames = [f for f in (measured, simulated) if len(f)]
    if not frames:
        return pd.DataFrame()
    return pd.concat(frames, ignore_index=True, sort=False)
