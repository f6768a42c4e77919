"""The claim-by-claim table: a published atlas's claims beside this study's answers, with a verdict
per claim (report.claim_checks), printed and written as paper_claims.md / .csv.

The published numbers are references only. They live in one file (report/paper_claims.toml), and
`load_references` here is the only code that reads it: the checks compare the references with
answers computed from the atlas alone (report.paper_answers), and
`ratio_lines` prints them beside the `published` stage's projections (calibrate.published_stage.paper_ratios).
No stage reads them.
"""

from __future__ import annotations

import tomllib
from dataclasses import asdict
from importlib import resources
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pareto_atlas.calibrate.published_stage import PAPER_MODEL, PAPER_OUTPUT, PAPER_PROMPT
from pareto_atlas.report import paper_answers as A
from pareto_atlas.report.claim_checks import AGREES, CANNOT, DIFFERS, ClaimRow, claim_rows

REFERENCES = "paper_claims.toml"


def load_references(name: str = REFERENCES) -> dict:
    """The published atlas's claims and numbers (references: printed, never computed on)."""
    return tomllib.loads(resources.files("pareto_atlas.report").joinpath(name).read_text(encoding="utf-8"))


def print_claims(rows: list[ClaimRow], refs: dict, console: Console) -> None:
    t = Table(
        title=f"The seed paper's claims, claim by claim ({refs['source']}; {refs['setup']})",
        title_justify="left",
        show_lines=True,
    )
    for col, kw in (
        ("claim", {"no_wrap": True}),
        ("the paper says", {"ratio": 3}),
        ("the product says", {"ratio": 4}),
        ("verdict", {"no_wrap": True}),
        ("evidence that moved it / what would settle it", {"ratio": 5}),
    ):
        t.add_column(col, overflow="fold", **kw)
    style = {AGREES: "green", DIFFERS: "yellow", CANNOT: "cyan"}
    for r in rows:
        # escaped: answers and commands hold TOML tables ([[arms]]), which are not rich markup
        t.add_row(
            escape(r.id), escape(r.claim), escape(r.answer), f"[{style[r.verdict]}]{r.verdict}[/]", escape(r.evidence)
        )
    console.print(t, highlight=False)
    n = pd.Series([r.verdict for r in rows]).value_counts()
    console.print(
        "  "
        + ", ".join(f"{v} {n.get(v, 0)}" for v in (AGREES, DIFFERS, CANNOT))
        + f" of {len(rows)}; the paper's numbers are references only (report/{REFERENCES})",
        highlight=False,
    )


def claims_markdown(rows: list[ClaimRow], refs: dict) -> str:
    esc = lambda s: str(s).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = [
        "# The seed paper's claims, claim by claim",
        "",
        f"{refs['source']}; {refs['setup']}.",
        "",
        "| claim | the paper says | the product says | verdict | evidence / what would settle it |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {r.id} | {esc(r.claim)} | {esc(r.answer)} | {r.verdict} | {esc(r.evidence)} |" for r in rows]
    return "\n".join(lines) + "\n"


def claim_table(study, answer, refs: dict) -> tuple[list[ClaimRow], object]:
    """The claims table of a study's answer (atlas.answer.Answer) against the references `refs`
    (load_references, read by a printer): its rows and the (model, workload) view they read."""
    from pareto_atlas.calibrate.stage import model_card

    target = study.targets[0] if study.targets else None
    model = target.name if target else study.model.name
    workload = target.workloads[0].name if target and target.workloads else study.workload.name
    view = A.atlas_view(answer.points, answer.regimes, model, workload, answer.study_ref, answer.allow_priors)
    rows = claim_rows(view, refs, {"model": model, "card": model_card(study).name, "task": study.quality.task})
    return rows, view


def page_claims(study, answer) -> list[dict]:
    """The claims table as the HTML atlas prints it: one dict per row (ClaimRow's fields)."""
    return [asdict(r) for r in claim_table(study, answer, load_references())[0]]


def claims_study(study, store, out: Path, console: Console) -> dict[str, Path]:
    """Print the claims table of a study's atlas (`claims = "paper"`) and write it under `out`."""
    import time

    from pareto_atlas.atlas.stage import study_answer

    t0 = time.monotonic()
    answer = study_answer(study, store)  # the atlas's own answer, its points derived once
    refs = load_references()
    rows, view = claim_table(study, answer, refs)
    print_claims(rows, refs, console)
    A.check_winner_evidence(view, console)
    paths = {"claims_md": Path(out) / "paper_claims.md", "claims_csv": Path(out) / "paper_claims.csv"}
    paths["claims_md"].write_text(claims_markdown(rows, refs), encoding="utf-8")
    pd.DataFrame([asdict(r) for r in rows]).to_csv(paths["claims_csv"], index=False)
    console.print(f"claims: {len(rows)} rows in {time.monotonic() - t0:.1f} s -> {paths['claims_md']}", highlight=False)
    return paths


def paper_ratio_refs() -> tuple[dict[str, float], tuple[float, float], tuple[float, float]]:
    """The seed paper's measured ratios (references only, load_references): AWQ4 per
    card (this product's card names), and the FP8 and n-gram ranges over its three GPUs."""
    refs = load_references()
    claims = {c["id"]: c for c in refs["claims"]}
    awq = {refs["cards"][k]: v for k, v in claims["tpot-ratios"]["awq"].items()}
    return awq, tuple(claims["tpot-ratios"]["fp8"]), tuple(claims["ngram-nothing"]["tpot_ratio"])


def ratio_lines(ratios: pd.DataFrame) -> list[str]:
    awq, fp8, ngram = paper_ratio_refs()
    out = [
        f"Seed paper vs projection: {PAPER_MODEL} {PAPER_PROMPT}/{PAPER_OUTPUT}, batch 1, TPOT p50 ratio vs F16 "
        "(paper: references only, never inputs)",
        f"{'card':15s} {'F16 TPOT':>9s} {'AWQ4':>6s} {'paper':>6s} {'FP8':>6s} {'paper':>10s} "
        f"{'n-gram':>7s} {'paper':>10s}  AWQ4 / FP8 kernels; calibration",
    ]
    for r in ratios.itertuples():
        ref = r.hardware in awq
        out.append(
            f"{r.hardware:15s} {r.f16_tpot_ms:7.2f}ms {r.awq4:6.2f} "
            f"{(f'{awq[r.hardware]:.2f}' if ref else '-'):>6s} {r.fp8:6.2f} "
            f"{(f'{fp8[0]:.2f}-{fp8[1]:.2f}' if ref else '-'):>10s} {r.ngram:7.2f} "
            f"{(f'{ngram[0]:.2f}-{ngram[1]:.2f}' if ref else '-'):>10s}  "
            f"{getattr(r, 'awq4_basis', '?')} / {getattr(r, 'fp8_basis', '?')}; {r.calibration}"
        )
    out.append(
        "kernels: fitted on the card's published rows of the format, generation: carried from a card of its "
        "generation, family: a format of its family's, derived: the roofline (no measurement: a projection)"
    )
    return out
