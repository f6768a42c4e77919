"""The `report` stage: every table, figure and the HTML atlas, re-rendered from the store."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from rich.console import Console

from pareto_atlas import __version__
from pareto_atlas.atlas.stage import study_answer
from pareto_atlas.report.build import write_report
from pareto_atlas.quality.tasks import task
from pareto_atlas.spec.study import Study
from pareto_atlas.store import Store


def fidelity_table(study: Study, store: Store) -> pd.DataFrame | None:
    """Measured vs simulated at the anchors, from the latest calibration's fidelity record."""
    cal = store.calibrations(study.name)
    if cal.empty:
        return None
    rows = []
    for _, c in cal.iterrows():
        fid = json.loads(c.fidelity_json or "{}")
        for r in fid.get("anchors", []):
            rows.append({**r, "hardware": c.hardware})
    return pd.DataFrame(rows) if rows else None


def report_study(study: Study, store: Store, out: Path, console: Console) -> dict[str, Path]:
    answer = study_answer(study, store)  # the same answer `atlas` prints and `pick` asks
    meta = {
        "title": f"pareto-atlas: {study.name}",
        "study": study.name,
        "description": study.description,
        "model": study.model.name,
        "engine": study.engine.name,
        "tool_version": __version__,
        "workload": f"{study.workload.prompt_tokens} prompt / {study.workload.output_tokens} output tokens",
        "quality": task(study.quality.task).headline(study.quality)  # quality.tasks: the task's own words
        + f", floor {study.quality.floor:.0%} of arm '{study.baseline.name}' (95 % interval, paired)"
        + (f", KL divergence <= {study.quality.kld_max:g} nats/token where measured" if study.quality.kld_max else ""),
        "price_source": f"GPU prices: spec/hardware.toml (seed paper, {study.price_date}) with study overrides; "
        f"this CPU: ${study.cpu_price_per_hour}/h (assumed)",
    }
    from pareto_atlas.store.quality import arm_quality_table

    evidence = arm_quality_table(study, store)
    claims = None
    if study.claims:
        from pareto_atlas.report.claims import page_claims

        claims = page_claims(study, answer)
    paths = write_report(
        answer,
        out,
        fidelity=fidelity_table(study, store),
        meta=meta,
        claims=claims,
        quality_table=evidence if len(evidence) else None,
    )
    from pareto_atlas.quality.campaign import agreement_table

    agree = agreement_table(study, store)
    if len(agree):
        paths["agreement_csv"] = out / "quality_agreement.csv"
        agree.to_csv(paths["agreement_csv"], index=False)
    if len(evidence):
        paths["quality_evidence_csv"] = out / "quality_evidence.csv"
        evidence.to_csv(paths["quality_evidence_csv"], index=False)
    paths["store"] = store.path
    console.print(f"[bold]report[/]: {len(paths)} files in {out}")
    return paths
