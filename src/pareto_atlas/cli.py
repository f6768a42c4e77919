"""The command line: one verb per job, all against the same store, each naming its study the same
way (a positional STUDY, or --study / -s).

`pareto-atlas build` runs the whole pipeline on a study (the built-in default when none is given);
every other verb runs one stage and can be repeated without re-measuring. The names of earlier
releases (kld, evict, import, published, published-quality, doctor) still work, hidden: each says
its new name on stderr and does what it did (cli_aliases). docs/cli.md is generated from this app
(scripts/gen_cli_docs.py).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from pareto_atlas import cli_aliases, cli_run, stages
from pareto_atlas.cli_run import (
    ALLOW_AGG,
    ALLOW_UNV,
    ARMS,
    HOSTS,
    KEYS,
    OUT,
    PROGRAMS,
    RAY,
    STORE,
    STUDY,
    STUDY_OPT,
    allowed_contracts,
    consent_of,
    console,
    guarded,
    open_context,
    refuse_unread,
    run_check,
    run_evict,
    run_import,
    run_kld,
    run_published,
    run_published_quality,
    run_quality_tasks,
    study_name,
)
from pareto_atlas.cli_options import (
    QUALITY_KINDS,
    QUALITY_OPTIONS,
    CALIBRATE_OPTIONS,
    QUALITY_KIND,
    QUALITY_N,
    QUALITY_TASK,
    QUALITY_MAX_TOKENS,
    QUALITY_TOKENS,
    QUALITY_POLICIES,
    QUALITY_KEEPS,
    QUALITY_TABLE,
    CALIBRATE_PUBLISHED,
    CALIBRATE_IMPORT,
    CALIBRATE_HARDWARE,
    CALIBRATE_ENGINE,
    CALIBRATE_MODEL,
    CALIBRATE_KNOBS,
    CALIBRATE_OUTPUT_TOKENS,
    CALIBRATE_TABLE,
    CALIBRATE_MULTI_GPU,
    PICK_CONSTRAINT,
    PICK_ALLOW_PRIORS,
    PICK_MODEL,
)

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Which inference optimization stack to deploy: anchors on a real engine, a calibrated "
    "simulator, and the cost-quality-latency Pareto atlas.",
)


@app.command()
def build(
    study: Optional[str] = STUDY,
    study_opt: Optional[str] = STUDY_OPT,
    out: Optional[Path] = OUT,
    skip_quality: bool = typer.Option(False, help="Measure speed only."),
    ray: Optional[str] = RAY,
    endpoint_host: list[str] = HOSTS,
    allow_key_env: list[str] = KEYS,
    allow_program: list[str] = PROGRAMS,
) -> None:
    """Run the whole pipeline: measure, quality, calibrate, simulate, atlas, report (a study without
    arms: simulate, atlas and report on published evidence; `paper` then prints its claims table)."""
    name = study_name(study, study_opt)

    def go():
        with open_context(name, out, ray, consent=consent_of(endpoint_host, allow_key_env, allow_program)) as ctx:
            stages.build(ctx, with_quality=not skip_quality)

    guarded(go)


@app.command()
def measure(
    study: Optional[str] = STUDY,
    study_opt: Optional[str] = STUDY_OPT,
    out: Optional[Path] = OUT,
    arm: list[str] = typer.Option(None, "--arm", help="Only these arms (repeatable)."),
    ray: Optional[str] = RAY,
    endpoint_host: list[str] = HOSTS,
    allow_key_env: list[str] = KEYS,
    allow_program: list[str] = PROGRAMS,
) -> None:
    """Measure the study's anchors on the engine (finished anchors are never re-measured)."""
    name = study_name(study, study_opt)

    def go():
        with open_context(name, out, ray, consent=consent_of(endpoint_host, allow_key_env, allow_program)) as ctx:
            stages.measure(ctx, arms=arm or None)

    guarded(go)


@app.command()
def quality(
    study: Optional[str] = STUDY,
    study_opt: Optional[str] = STUDY_OPT,
    out: Optional[Path] = OUT,
    kind: str = QUALITY_KIND,
    arm: list[str] = ARMS,
    n: Optional[str] = QUALITY_N,
    task: Optional[str] = QUALITY_TASK,
    max_tokens: Optional[int] = QUALITY_MAX_TOKENS,
    ray: Optional[str] = RAY,
    endpoint_host: list[str] = HOSTS,
    allow_key_env: list[str] = KEYS,
    allow_program: list[str] = PROGRAMS,
    tokens: Optional[int] = QUALITY_TOKENS,
    keep_base: bool = typer.Option(False, help="kld: keep the baseline's logits file (~300 kB a token)."),
    policies: Optional[str] = QUALITY_POLICIES,
    keeps: Optional[str] = QUALITY_KEEPS,
    store: Optional[Path] = STORE,
    table: list[Path] = QUALITY_TABLE,
    model: Optional[str] = typer.Option(None, help="published: also list this model card's scores, e.g. qwen2.5-7b."),
) -> None:
    """Quality evidence, by kind: the study's tasks scored through the engine (GSM8K, needle retrieval,
    HumanEval in a sandbox, IFEval, RULER), KL divergence against the baseline, KV eviction, or the
    published scores of deployed checkpoints; saved items and configurations are kept on a rerun."""
    if kind not in QUALITY_KINDS:
        raise typer.BadParameter(f"{kind!r}; allowed: {', '.join(QUALITY_KINDS)}", param_hint="--kind")
    refuse_unread("--kind", kind, locals(), QUALITY_OPTIONS)
    name = study_name(study, study_opt)
    if kind == "published" and (study or study_opt):
        raise typer.BadParameter(
            f"{name!r}: --kind published reads no study (the shipped table and --table)", param_hint="study"
        )
    if kind == "task":
        run_quality_tasks(
            name, out, arm, n, task, max_tokens, ray, consent_of(endpoint_host, allow_key_env, allow_program)
        )
    elif kind == "kld":
        run_kld(name, out, store, arm, tokens, keep_base)
    elif kind == "evict":
        if n is not None and not n.isdigit():
            raise typer.BadParameter(f"{n!r}: --kind evict takes a whole number of items", param_hint="--n")
        run_evict(name, out, store, policies, keeps, task, int(n) if n is not None else None)
    else:
        run_published_quality(table, model, task or "gsm8k")


@app.command()
def calibrate(
    study: Optional[str] = STUDY,
    study_opt: Optional[str] = STUDY_OPT,
    out: Optional[Path] = OUT,
    published: bool = CALIBRATE_PUBLISHED,
    import_: list[Path] = CALIBRATE_IMPORT,
    hardware: list[str] = CALIBRATE_HARDWARE,
    engine: list[str] = CALIBRATE_ENGINE,
    model: Optional[str] = CALIBRATE_MODEL,
    knobs: Optional[str] = CALIBRATE_KNOBS,
    output_tokens: Optional[int] = CALIBRATE_OUTPUT_TOKENS,
    table: list[Path] = CALIBRATE_TABLE,
    multi_gpu: bool = CALIBRATE_MULTI_GPU,
    allow_aggregate: bool = ALLOW_AGG,
    allow_unverified: bool = ALLOW_UNV,
) -> None:
    """Fit the simulator to the anchors in the store and print its fidelity; with --import, to other
    tools' result files first (one transaction, provenance imported:<tool>@<version>:<sha256>, the
    files kept in the store); with --published, the GPU cards to published measurements."""
    name = study_name(study, study_opt)
    if published and import_:
        raise typer.BadParameter("give --published or --import, not both", param_hint="--published")
    mode = "--published" if published else "--import" if import_ else "(the store's anchors)"
    refuse_unread("calibrate", mode, locals(), CALIBRATE_OPTIONS)
    if published:
        run_published(name, out, table, engine, hardware, multi_gpu)
    elif import_:
        for option, values in (("--hardware", hardware), ("--engine", engine)):
            if values and len(values) > 1:
                raise typer.BadParameter(f"one value with --import, got {len(values)}", param_hint=option)
        run_import(
            name,
            out,
            import_,
            hardware[0] if hardware else None,
            model,
            engine[0] if engine else None,
            knobs,
            output_tokens,
            allowed_contracts(allow_aggregate, allow_unverified),
        )
    else:

        def go():
            with open_context(name, out) as ctx:
                stages.calibrate(ctx, allow=allowed_contracts(allow_aggregate, allow_unverified))

        guarded(go)


@app.command()
def simulate(
    study: Optional[str] = STUDY,
    study_opt: Optional[str] = STUDY_OPT,
    out: Optional[Path] = OUT,
    ray: Optional[str] = RAY,
) -> None:
    """Simulate the configuration space across hardware with the latest calibration."""
    name = study_name(study, study_opt)

    def go():
        with open_context(name, out, ray) as ctx:
            stages.simulate(ctx)

    guarded(go)


@app.command()
def atlas(study: Optional[str] = STUDY, study_opt: Optional[str] = STUDY_OPT, out: Optional[Path] = OUT) -> None:
    """Compute the frontier and the winner of each regime from the store, and print them."""
    name = study_name(study, study_opt)

    def go():
        with open_context(name, out) as ctx:
            stages.atlas(ctx)

    guarded(go)


def _looks_like_constraint(text: str) -> bool:
    # a study is a built-in name or a TOML path; a constraint compares a column ("tpot_p99_ms<=40")
    return text == "" or any(op in text for op in ("<", ">", "="))


@app.command()
def pick(
    study: Optional[str] = STUDY,
    constraint: Optional[str] = PICK_CONSTRAINT,
    study_opt: Optional[str] = STUDY_OPT,
    objective: str = typer.Option("cost_per_mtok", help="Column to optimise."),
    maximize: bool = typer.Option(False, help="Maximise the objective instead of minimising it."),
    price: list[str] = typer.Option(None, help='Re-price hardware, e.g. "A100-80G-PCIe=2.085" (repeatable).'),
    allow_priors: bool = PICK_ALLOW_PRIORS,
    model: Optional[str] = PICK_MODEL,
    workload: Optional[str] = typer.Option(None, help="Answer for this workload only (default: each)."),
    out: Optional[Path] = OUT,
) -> None:
    """Re-plan without re-measuring: the best configuration under a constraint and prices, per model
    and workload; with --price, where the regime winners move."""
    if constraint is None and study is not None and _looks_like_constraint(study):
        study, constraint = None, study  # `pick "tpot_p99_ms<=40"`, as before STUDY came first
    name = study_name(study, study_opt)

    def go():
        with open_context(name, out) as ctx:
            stages.pick(ctx, constraint or "", objective, maximize, price or [], allow_priors, model, workload)

    guarded(go)


@app.command()
def report(study: Optional[str] = STUDY, study_opt: Optional[str] = STUDY_OPT, out: Optional[Path] = OUT) -> None:
    """Write the figures, tables, exports and the HTML atlas from the store."""
    name = study_name(study, study_opt)

    def go():
        with open_context(name, out) as ctx:
            stages.report(ctx)

    guarded(go)


@app.command()
def export(
    study: Optional[str] = STUDY,
    study_opt: Optional[str] = STUDY_OPT,
    out: Optional[Path] = OUT,
    fmt: str = typer.Option(
        "parquet",
        "--format",
        help="parquet, csv or json (every table of the store); "
        "vllm-bench or guidellm (the study's anchors in that "
        "tool's result format, one file each)",
    ),
) -> None:
    """Export every table of the store, or the study's anchors in a peer tool's format."""
    name = study_name(study, study_opt)

    def go():
        with open_context(name, out) as ctx:
            if fmt in stages.PEER_FORMATS:
                stages.export_peer(ctx, fmt)
                return
            paths = ctx.store.export(ctx.out / "export", fmt)
            console.print(f"exported {len(paths)} tables to {ctx.out / 'export'}")

    guarded(go)


@app.command()
def check(
    study: Optional[str] = STUDY,
    study_opt: Optional[str] = STUDY_OPT,
    out: Optional[Path] = OUT,
    store: Optional[Path] = typer.Option(None, help="Store file (default: the study's <out>/store.duckdb)."),
) -> None:
    """Report a store's integrity, read-only: migrations applied or unknown, tables readable to
    their end, orphaned rows, anchors without request records. Exit 1 when it finds a problem."""
    run_check(study_name(study, study_opt), out, store)


# the names of earlier releases, hidden: each says its new name, then does what it did
for _old, _command in cli_aliases.ALIASES.items():
    app.command(_old, hidden=True)(_command)


def main() -> None:  # pragma: no cover
    cli_run.stop_on_sigterm()
    sys.exit(app())
