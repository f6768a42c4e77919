"""Measurement campaigns: every arm of a study, each launched on the engine, driven under the
exact token-count contract, and saved with its raw records and full provenance.

Resumable by construction: an anchor's id is a hash of what it measures, an anchor that
finished is never measured again, and each anchor is written in one transaction. An engine
that fails to start, crashes or hangs marks its anchor failed with the reason; the campaign
goes on.
"""

from __future__ import annotations

import json
import math
import os
import time
import uuid
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from pareto_atlas import __version__
from pareto_atlas.measure.consent import Consent, authorize
from pareto_atlas.measure.anchor_requests import anchor_prompts, anchor_shared_prefix, request_extra, request_lengths
from pareto_atlas.measure.hostinfo import endpoint_description, host_description
from pareto_atlas.spec.study import ArmSpec, Study
from pareto_atlas.store import Store
from pareto_atlas.store.db import dumps, now

from pareto_atlas.scale.local import Executor  # where jobs run: knows no campaign, so it sits below them
from pareto_atlas.measure.anchor_plan import AnchorPlan, workload_ident, plan, launch_for, served_model
from pareto_atlas.measure.anchor_plan import (
    FIRST_ARM_KNOBS as FIRST_ARM_KNOBS,
    anchor_id as anchor_id,
)  # re-exported: importable from here as before

# An anchor more of whose measured requests than this share errored (HTTP 5xx, timeouts, dropped
# streams) is flagged: its percentiles come from the survivors, so calibration leaves it out.
ERROR_SHARE_MAX = 0.05


@dataclass
class CampaignSummary:
    measured: int = 0
    skipped: int = 0
    failed: int = 0
    remeasured: int = 0  # contended anchors measured a second time (measure.contention)
    failures: list = None

    def __post_init__(self):
        self.failures = self.failures or []


Progress = Callable[[str, dict], None]


def anchor_row(study: Study, p: AnchorPlan) -> dict:
    """An anchor's store row before it is measured: what it measures, where, and failed until it is ok."""
    arm, wl, load = p.arm, p.arm.workload(study.workload), study.load
    # an open loop (Poisson, trace) has no clients: concurrency 0, as in the points table
    conc = 0 if arm.rate_rps or wl.trace else arm.concurrency
    return {
        "anchor_id": p.anchor_id,
        "study": study.name,
        "arm": arm.name,
        "repeat": p.repeat,
        "knobs_json": dumps(arm.knobs().to_dict()),
        "workload_json": dumps(workload_ident(wl)),
        "load_json": dumps(
            {
                **load.model_dump(),
                "requests": arm.n_requests(load, wl),
                "concurrency": conc,
                "rate_rps": arm.rate_rps,
                "think_ms": load.think_ms if load.think_for(arm) else 0,
            }
        ),
        "model": study.model_for(arm).name,
        "engine": study.engine.name,
        "hardware": study.hardware_of(arm),
        "hardware_json": dumps({"card": study.hardware_of(arm), **host_description()}),
        "started_at": now(),
        "status": "failed",
        "reason": None,
    }


def check_host(study: Study, arm: ArmSpec) -> None:
    """An engine started here on a GPU card needs this host to have a GPU: a CPU measured under a
    GPU's name would be the worst kind of wrong figure. (An endpoint runs wherever it runs.)"""
    from pareto_atlas.spec.cards import shipped_hardware

    hw = study.hardware_of(arm)
    card = shipped_hardware().get(hw)
    if study.engine.name != "openai" and card is not None and card.kind == "gpu" and not host_description()["gpus"]:
        raise RuntimeError(
            f"hardware {hw}: this host ({host_description()['hostname']}) reports no GPU (nvidia-smi); "
            f"measure it on a node of that type (--ray, a node started with resource hw:{hw})"
        )


def error_verdict(metrics: dict) -> dict:
    """The anchor's errored requests as part of its verdict: their share, a line saying how many and
    why (`2 of 4 errored (HTTP 500)`), and the flag past ERROR_SHARE_MAX."""
    n, bad = metrics.get("n_measured", 0), metrics.get("n_errors", 0)
    if not n or not bad:
        return {"error_share": 0.0, "errored": False}
    why = [
        r.split(":", 1)[0] if r.startswith(("HTTP ", "stream error")) else r[:60]
        for r in dict(metrics.get("error_reasons") or {})
    ]
    share = bad / n
    return {
        "error_share": share,
        "errored": share > ERROR_SHARE_MAX,
        "error_line": f"{bad} of {n} errored ({', '.join(dict.fromkeys(why)) or '?'})"
        + (f"; above {ERROR_SHARE_MAX:.0%}: flagged, left out of calibration" if share > ERROR_SHARE_MAX else ""),
    }


def finish_row(row: dict, t0: float) -> dict:
    """Close an anchor's row: finish time, and the tool version and wall time in its provenance."""
    row["finished_at"] = now()
    row["metrics_json"] = row.get("metrics_json") or dumps({})
    row.setdefault("provenance_json", dumps({"tool_version": __version__}))
    row["provenance_json"] = dumps(
        {**json.loads(row["provenance_json"]), "tool_version": __version__, "wall_s": round(time.monotonic() - t0, 2)}
    )
    return row


def measure_anchor(
    study: Study, p: AnchorPlan, on_progress: Progress, bandwidth_gbs: float | None = None
) -> tuple[dict, list[dict]]:
    """Measure one anchor; returns the store row and raw records. Never raises for engine trouble."""
    from pareto_atlas.measure import engines
    from pareto_atlas.measure.contention import ContentionMeter
    from pareto_atlas.measure.loadgen import run_load_sync
    from pareto_atlas.measure.memory import PeakMemorySampler, decode_bandwidth
    from pareto_atlas.measure.metrics import derive_metrics

    arm, wl, load = p.arm, p.arm.workload(study.workload), study.load
    rows = wl.trace_rows()[: arm.n_requests(load, wl)] if wl.trace else None
    P, N = request_lengths(wl, rows, load.warmup)
    row = anchor_row(study, p)
    records: list = []
    t0 = time.monotonic()
    step_devices = 1  # devices whose memory one decode step reads at once
    if study.hardware_of(arm) != "this-cpu":  # decode is held against the card's bandwidth, not this CPU's
        from pareto_atlas.spec.cards import shipped_hardware

        card = shipped_hardware()[study.hardware_of(arm)]
        bandwidth_gbs = card.mem_bw_gbs
        # a TP group's GPUs each read their share of a step (a CPU's ranks share one memory)
        step_devices = arm.knobs().tp if card.kind == "gpu" else 1
    try:
        load0 = os.getloadavg()[0]
        check_host(study, arm)
        model_path, sha, model_bytes, bpw = served_model(study, arm)
        row.update(model_file=str(model_path), model_sha256=sha)
        engine = engines.get_engine(study.engine.name)
        on_progress("starting", {"arm": arm.name})
        with engine.start(launch_for(study, arm, str(model_path))) as running:
            row.update(
                engine_version=running.version, provenance_json=dumps({**running.describe(), "weights_bpw": bpw})
            )
            if study.engine.name == "openai":  # the machine is the endpoint's: say what it says of itself
                row["hardware_json"] = dumps(
                    {
                        "card": study.hardware_of(arm),
                        "client": host_description(),
                        "endpoint": endpoint_description(running.base_url, running.headers()),
                    }
                )
            n = load.warmup + arm.n_requests(load, wl)
            sent = (list(rows[:1]) * load.warmup + list(rows)) if rows else []  # as request_lengths sends them
            blocks = [r.hash_ids for r in sent] if sent and sent[0].hash_ids else None
            prompts = anchor_prompts(running, wl, P, None if rows else n, int(p.anchor_id[:8], 16), blocks)
            shared = anchor_shared_prefix(running, wl, prompts)  # counted by the server's tokenizer, not assumed
            done = [0]
            # the server's own counters (vLLM's /metrics) from the end of the warm-up to the end of the run
            counters = [running.counters() if load.warmup == 0 else None]

            def tick(rec) -> None:
                done[0] += 1
                if done[0] == load.warmup:  # warm-ups run one at a time, before any measured request
                    counters[0] = running.counters()
                on_progress("request", {"arm": arm.name, "done": done[0], "total": n})

            # Every repeat replays the same load (Poisson schedule, think times: seed 0), so the spread
            # between repeats is the engine's own, not a different draw of the load.
            with PeakMemorySampler(running.pid) as mem, ContentionMeter(running.pid) as other:
                recs = run_load_sync(
                    running.base_url,
                    prompts,
                    N,
                    concurrency=None if arm.rate_rps or rows else arm.concurrency,
                    rate_rps=arm.rate_rps,
                    trace=rows,
                    warmup=load.warmup,
                    api=wl.api,
                    timeout_s=load.timeout_s,
                    prompt_tokens=P,
                    on_record=tick,
                    seed=0,
                    think=load.think_for(arm),
                    model=running.model,
                    headers=running.headers(),
                    extra_body=request_extra(running.extra_body, study.engine.name, arm.knobs()),
                )
            after = running.counters()
            records = [r.to_dict() for r in recs]
            # a trace's per-request lengths were checked as each record came (None trusts that verdict)
            metrics = derive_metrics(recs, *((None, None) if rows else (P, N))).to_dict()
            metrics.update(running.run_summary(counters[0], after, metrics))
            metrics.update(error_verdict(metrics))
            metrics.update(shared)
            metrics["peak_rss_mb"] = mem.peak_rss_bytes / 2**20
            metrics["peak_gpu_mb"] = mem.peak_gpu_bytes / 2**20 if mem.peak_gpu_bytes else None
            metrics["model_bytes"] = model_bytes
            metrics["engine_startup_s"] = running.describe().get("startup_s")  # None where not timed
            # the machine's 1-minute load average before the engine started and after the run: the
            # engine's own threads count in it, anything well above them is another job competing
            metrics["host_load_1m"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
            if other.result is not None:  # other work on the machine during the run (measure.contention)
                metrics.update(other.result.to_dict())
                metrics["contention_line"] = other.result.line()
            tpot_ms = (metrics.get("tpot") or {}).get("p50")
            if bandwidth_gbs and tpot_ms and tpot_ms == tpot_ms and arm.concurrency == 1:
                from pareto_atlas.measure.model_card import decode_read_share

                # one sequence's step reads the experts its token runs, not all the model stores
                read = metrics["model_bytes"] * decode_read_share(study.model_for(arm))
                bw = decode_bandwidth(read, tpot_ms / 1e3, bandwidth_gbs, devices=step_devices)
                metrics["decode_bw_fraction"], metrics["decode_bw_line"] = bw.fraction, bw.line()
            row["metrics_json"] = dumps(metrics)
            if metrics.get("n_ok", 0) == 0:
                reasons = metrics.get("error_reasons") or metrics.get("reject_reasons") or {}
                row["reason"] = f"no request met the contract ({list(dict(reasons).items())[:2]})"
            else:
                row["status"] = "ok"
    except Exception as e:  # noqa: BLE001 - a failed anchor records why and the campaign goes on
        row["reason"] = (str(e).strip().splitlines() or [type(e).__name__])[0][:500]
    return finish_row(row, t0), records


def measure_here(
    study: Study,
    pending: Iterable[tuple[int, AnchorPlan]],
    n: int,
    on_progress: Progress,
    bandwidth_gbs: float | None,
    measure_fn: Callable = measure_anchor,
) -> Iterator[tuple[int, AnchorPlan, dict, list[dict]]]:
    """Measure each pending anchor in this process, in order; `pending` is consumed lazily so each
    result is written before the next anchor's status is looked up."""
    for i, p in pending:
        on_progress("anchor", {"arm": p.arm.name, "i": i, "n": n})
        row, records = measure_fn(study, p, on_progress, bandwidth_gbs)
        yield i, p, row, records


def _quiet(ev: str, info: dict) -> None:
    pass  # progress inside a remote task has no console; the driver reports each result as it lands


def _measure_job(fn: Callable, study: Study, bandwidth_gbs: float | None, job: tuple[int, AnchorPlan]):
    return fn(study, job[1], _quiet, bandwidth_gbs)


def measure_on(
    executor: Executor,
    study: Study,
    pending: Iterable[tuple[int, AnchorPlan]],
    n: int,
    on_progress: Progress,
    bandwidth_gbs: float | None,
    measure_fn: Callable = measure_anchor,
) -> Iterator[tuple[int, AnchorPlan, dict, list[dict]]]:
    """Measure each pending anchor where `executor` runs jobs, each on its arm's hardware card; an anchor
    whose worker or node was lost comes back as a failed row saying why. A remote anchor's row records
    where it ran (`hardware_json` "ray": its node and the resources it held)."""
    if executor.here:
        yield from measure_here(study, pending, n, on_progress, bandwidth_gbs, measure_fn)
        return
    t0 = time.monotonic()

    def lost(job: tuple[int, AnchorPlan], why: str) -> tuple[dict, list[dict]]:
        row = anchor_row(study, job[1])
        row.update(hardware_json=dumps({}), reason=why)  # the driver's host is not where it ran
        return finish_row(row, t0), []

    for (i, p), (row, records), where in executor.run(
        _measure_job,
        pending,
        shared=(measure_fn, study, bandwidth_gbs),
        hardware_of=lambda job: study.hardware_of(job[1].arm),
        lost=lost,
        name="measure_anchor",
    ):
        if where:
            row["hardware_json"] = dumps({**json.loads(row.get("hardware_json") or "{}"), "ray": where})
        on_progress("anchor", {"arm": p.arm.name, "i": i, "n": n})
        yield i, p, row, records


def run_campaign(
    study: Study,
    store: Store,
    *,
    arms: list[str] | None = None,
    on_progress: Progress = lambda ev, info: None,
    bandwidth_gbs: float | None = None,
    executor: Executor | None = None,
    plans: list[AnchorPlan] | None = None,
    measure_fn: Callable = measure_anchor,
    consent: Consent | None = None,
) -> CampaignSummary:
    """Measure every planned anchor not yet in the store. `bandwidth_gbs`: this machine's memory
    bandwidth, to say how close decode came to it. `executor`: where anchors run (default: here,
    one after another); results come back here and only this process writes the store. `plans`:
    these anchors in this order instead of `plan(study, arms)` (e.g. a reference interleaved).
    `measure_fn`: what measures one anchor (measure_anchor; tests substitute one that dies).
    `consent`: what the user allowed the study (default: their config file alone); checked before
    anything starts, here, so remote workers only run what passed (measure.consent)."""
    for line in authorize(study, consent if consent is not None else Consent.from_user()):
        on_progress("consent", {"line": line})
    summary = CampaignSummary()
    campaign = uuid.uuid4().hex[:12]
    plans = plans if plans is not None else plan(study, arms)

    def pending():
        # lazy: in-process, each anchor is written before the next one's status is looked up
        for i, p in enumerate(plans):
            if store.anchor_status(p.anchor_id) == "ok":
                summary.skipped += 1
                on_progress("skip", {"arm": p.arm.name, "i": i, "n": len(plans)})
                continue
            yield i, p

    def run(study, pending, n, on_progress, bandwidth_gbs):
        if executor is None:
            return measure_here(study, pending, n, on_progress, bandwidth_gbs, measure_fn)
        return measure_on(executor, study, pending, n, on_progress, bandwidth_gbs, measure_fn)

    contended: list[tuple[int, AnchorPlan, float]] = []
    for i, p, row, records in run(study, pending(), len(plans), on_progress, bandwidth_gbs):
        row["campaign_id"] = campaign
        store.put_anchor(row, records)
        metrics = json.loads(row["metrics_json"])
        if row["status"] == "ok":
            summary.measured += 1
            if metrics.get("contended"):
                contended.append((i, p, metrics["other_cpu_cores"]))
        else:
            summary.failed += 1
            summary.failures.append((p.arm.name, row["reason"]))
        # whether the anchor is about reuse (its cache on, or a workload that shares): its hit rate is printed
        prefix = bool(getattr(p.arm, "prefix_cache", False)) or p.arm.workload(study.workload).shares()
        on_progress(
            "done",
            {"arm": p.arm.name, "status": row["status"], "reason": row["reason"], "metrics": metrics, "prefix": prefix},
        )
    # Anchors that ran beside other work (measure.contention): once more at the end, when that work
    # has likely finished; the less contended try is kept (the other is replaced, not averaged in).
    again = [(i, p) for i, p, _ in contended]
    before = {p.anchor_id: cores for _, p, cores in contended}
    for i, p, row, records in run(study, iter(again), len(plans), on_progress, bandwidth_gbs):
        metrics = json.loads(row["metrics_json"])
        better = row["status"] == "ok" and metrics.get("other_cpu_cores", math.inf) < before[p.anchor_id]
        if better:
            row["campaign_id"] = campaign
            store.put_anchor(row, records)
        summary.remeasured += 1
        on_progress(
            "remeasured",
            {
                "arm": p.arm.name,
                "kept": "new" if better else "first",
                "before": before[p.anchor_id],
                "after": metrics.get("other_cpu_cores"),
                "metrics": metrics,
                "status": row["status"],
                "reason": row["reason"],
            },
        )
    return summary
