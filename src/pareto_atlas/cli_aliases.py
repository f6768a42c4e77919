"""The command names of earlier releases, kept for one release: hidden from --help, each says its new
name in one line on stderr, then does exactly what it did (same arguments, same options, the same
stage underneath)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from pareto_atlas.cli_run import (
    ALLOW_AGG,
    ALLOW_UNV,
    BUILTINS,
    OUT,
    STORE,
    allowed_contracts,
    run_check,
    run_evict,
    run_import,
    run_kld,
    run_published,
    run_published_quality,
    study_name,
)

# old name -> the command that replaces it (what the notice prints)
RENAMED = {
    "kld": "pareto-atlas quality STUDY --kind kld",
    "evict": "pareto-atlas quality STUDY --kind evict",
    "import": "pareto-atlas calibrate STUDY --import FILE ...",
    "published": "pareto-atlas calibrate STUDY --published",
    "published-quality": "pareto-atlas quality --kind published",
    "doctor": "pareto-atlas check",
}
STUDY_ARG = typer.Argument(
    None, show_default=False, help=f"Study TOML path, or a built-in: {BUILTINS} (default: default)."
)
STUDY_OPT = typer.Option(None, "--study", "-s", help="The same as the argument.")
STUDY = typer.Option("default", "--study", "-s", help=f"Study TOML path, or a built-in: {BUILTINS}.")


def _renamed(old: str) -> None:
    print(f"pareto-atlas {old} is now: {RENAMED[old]}", file=sys.stderr)


def evict(
    study: Optional[str] = STUDY_ARG,
    study_opt: Optional[str] = STUDY_OPT,
    policies: Optional[str] = typer.Option(None, help="Comma-separated: streamingllm, h2o, snapkv, pyramidkv, topk."),
    keeps: Optional[str] = typer.Option(None, help="Comma-separated KV keep ratios in (0, 1)."),
    task: Optional[str] = typer.Option(None, help="retrieval, ruler or gsm8k."),
    n: Optional[int] = typer.Option(None, help="GSM8K items, or retrieval items per length and depth."),
    store: Optional[Path] = STORE,
    out: Optional[Path] = OUT,
) -> None:
    """Now `quality --kind evict`."""
    _renamed("evict")
    run_evict(study_name(study, study_opt), out, store, policies, keeps, task, n)


def kld(
    study: Optional[str] = STUDY_ARG,
    study_opt: Optional[str] = STUDY_OPT,
    arm: list[str] = typer.Option(None, "--arm", help="Only these arms (repeatable); the baseline always runs."),
    tokens: Optional[int] = typer.Option(None, help="Tokens scored per configuration."),
    keep_base: bool = typer.Option(False, help="Keep the baseline's logits file afterwards."),
    store: Optional[Path] = STORE,
    out: Optional[Path] = OUT,
) -> None:
    """Now `quality --kind kld`."""
    _renamed("kld")
    run_kld(study_name(study, study_opt), out, store, arm, tokens, keep_base)


def import_(
    files: list[Path] = typer.Argument(..., help="Result files (told by shape, not name)."),
    study: str = STUDY,
    out: Optional[Path] = OUT,
    hardware: Optional[str] = typer.Option(None, "--hardware", help="The GPU card the runs used."),
    model: Optional[str] = typer.Option(None, "--model", help="The model card."),
    engine: Optional[str] = typer.Option(None, "--engine", help="The serving engine."),
    knobs: Optional[str] = typer.Option(None, "--knobs", help='The configuration served.'),
    output_tokens: Optional[int] = typer.Option(None, "--output-tokens", help="The output length asked for."),
    allow_aggregate: bool = ALLOW_AGG,
    allow_unverified: bool = ALLOW_UNV,
) -> None:
    """Now `calibrate --import FILE ...`."""
    _renamed("import")
    run_import(
        study,
        out,
        files,
        hardware,
        model,
        engine,
        knobs,
        output_tokens,
        allowed_contracts(allow_aggregate, allow_unverified),
    )


def published(
    study: str = STUDY,
    out: Optional[Path] = OUT,
    table: list[Path] = typer.Option(None, "--table", help="Another published-anchor CSV (repeatable)."),
    engine: list[str] = typer.Option(None, "--engine", help="Only anchors from this engine (repeatable)."),
    hardware: list[str] = typer.Option(None, "--hardware", help="Only this GPU card (repeatable)."),
) -> None:
    """Now `calibrate --published`."""
    _renamed("published")
    run_published(study, out, table, engine, hardware)


def published_quality(
    table: list[Path] = typer.Option(None, "--table", help="Another published-quality CSV."),
    model: Optional[str] = typer.Option(None, help="Also list this model card's scores."),
    task: str = typer.Option("gsm8k", help="The task the quality guard prefers."),
) -> None:
    """Now `quality --kind published`."""
    _renamed("published-quality")
    run_published_quality(table, model, task)


def doctor(
    study: str = STUDY,
    out: Optional[Path] = OUT,
    store: Optional[Path] = typer.Option(None, help="Store file (default: the study's <out>/store.duckdb)."),
) -> None:
    """Now `check`."""
    _renamed("doctor")
    run_check(study, out, store)


# what cli.py registers, hidden, under each old name
ALIASES = {
    "evict": evict,
    "kld": kld,
    "import": import_,
    "published": published,
    "published-quality": published_quality,
    "doctor": doctor,
}
