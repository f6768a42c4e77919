"""The command line: one subcommand per pipeline stage, all against the same store.

`pareto-atlas build` runs the whole pipeline on a study (the built-in default when none is
given); every other subcommand runs one stage and can be repeated without re-measuring.
`evict` (KV eviction in transformers, optional extra) is not part of `build`.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Optional

import duckdb
import typer
from rich.console import Console
from rich.markup import escape

from pareto_atlas import stages
from pareto_atlas.measure.consent import Consent

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Which inference optimization stack to deploy: anchors on a real engine, a calibrated "
                       "simulator, and the cost-quality-latency Pareto atlas.")
# Tables stay readable when the output goes to a file or CI log (no terminal width to ask).
console = Console(stderr=True, width=max(shutil.get_terminal_size((160, 40)).columns, 140))

BUILTINS = ("default, full (the default and more: same store), tiny, ladder, vllm-cpu, sizes (three model sizes), workloads (a task per workload), "
            "paper (the seed paper's setup on published evidence, no engine), "
            "llama70b (Llama-3.1-70B on 1-8 H100-SXM / H200 GPUs a replica, on published evidence, no engine)")
STUDY = typer.Option("default", "--study", "-s", help=f"Study TOML path, or a built-in: {BUILTINS}.")
# evict and kld take the study as an argument and also as --study, as every other subcommand does
STUDY_ARG = typer.Argument(None, show_default=False, help=f"Study TOML path, or a built-in: {BUILTINS} (default: default).")
STUDY_OPT = typer.Option(None, "--study", "-s", help="The same as the argument.")


def _study(arg: Optional[str], opt: Optional[str]) -> str:
    if arg and opt and arg != opt:
        raise typer.BadParameter(f"study given twice: {arg!r} and --study {opt!r}; give one", param_hint="study")
    return arg or opt or "default"
OUT = typer.Option(None, "--out", "-o", help="Output folder (default: atlas-out/<study name>).")
RAY = typer.Option(None, "--ray", help="Run on Ray: HOST:PORT of a cluster's head, auto, or local "
                                       "(a cluster on this machine). Default: in-process.")
# What a study may do only because you say so here or in ~/.config/pareto-atlas/config.toml (measure.consent)
HOSTS = typer.Option(None, "--endpoint-host", help="A non-loopback host that may receive the study's API key "
                                                   "(engine openai; repeatable).")
KEYS = typer.Option(None, "--allow-key-env", help="An environment variable the study may send as its key although "
                                                  "its name does not look like an API key (repeatable).")
PROGRAMS = typer.Option(None, "--allow-program", help="A program the study may run (engine.options.binary or "
                                                      "python; the same file, after PATH and links; repeatable).")


def _ctx(study: str, out: Optional[Path], ray: Optional[str] = None, consent: Optional[Consent] = None) -> stages.Context:
    return stages.Context.open(study, out, console, ray, consent=consent)


def _consent(hosts: Optional[list[str]], keys: Optional[list[str]], programs: Optional[list[str]]) -> Consent:
    return Consent.from_user(hosts or (), keys or (), programs or ())


def _run(fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]: everything that finished is saved in the store; rerun to resume.")
        raise typer.Exit(130)
    except stages.USER_ERRORS as e:
        # escaped: an error naming an extra, 'pareto-atlas[ray]', is not rich markup
        console.print(f"[red]error:[/] {escape(str(e))}", markup=True, highlight=False, soft_wrap=True)
        raise typer.Exit(2)
    except duckdb.Error as e:     # the file or the disk failed under a read: one line, not a traceback
        from pareto_atlas.store.db import io_reason, is_fault

        if not is_fault(e):
            raise
        console.print(f"[red]error:[/] store: {escape(io_reason(e))}", markup=True, highlight=False, soft_wrap=True)
        raise typer.Exit(2)


@app.command()
def build(study: str = STUDY, out: Optional[Path] = OUT,
          skip_quality: bool = typer.Option(False, help="Measure speed only."), ray: Optional[str] = RAY,
          endpoint_host: list[str] = HOSTS, allow_key_env: list[str] = KEYS, allow_program: list[str] = PROGRAMS) -> None:
    """Run the whole pipeline: measure, quality, calibrate, simulate, atlas, report (a study without
    arms: simulate, atlas and report on published evidence; `paper` then prints its claims table)."""
    def go():
        with _ctx(study, out, ray, _consent(endpoint_host, allow_key_env, allow_program)) as ctx:
            stages.build(ctx, with_quality=not skip_quality)
    _run(go)


@app.command()
def measure(study: str = STUDY, out: Optional[Path] = OUT,
            arm: list[str] = typer.Option(None, "--arm", help="Only these arms (repeatable)."),
            ray: Optional[str] = RAY, endpoint_host: list[str] = HOSTS, allow_key_env: list[str] = KEYS,
            allow_program: list[str] = PROGRAMS) -> None:
    """Measure the study's anchors on the engine (finished anchors are never re-measured)."""
    def go():
        with _ctx(study, out, ray, _consent(endpoint_host, allow_key_env, allow_program)) as ctx:
            stages.measure(ctx, arms=arm or None)
    _run(go)


@app.command()
def quality(study: str = STUDY, out: Optional[Path] = OUT,
            arm: list[str] = typer.Option(None, "--arm", help="Only these arms (repeatable)."),
            n: Optional[str] = typer.Option(None, help="Items per arm, or 'all' (overrides the study); "
                                                       "retrieval and ruler: items per cell."),
            task: Optional[str] = typer.Option(None, help="gsm8k, retrieval, humaneval, ifeval or ruler "
                                                          "(default: the study's task, then each of its [quality] tasks)."),
            max_tokens: Optional[int] = typer.Option(None, "--max-tokens",
                                                     help="Tokens per answer (overrides the study; humaneval, "
                                                          "ifeval and each ruler subtask have their own default "
                                                          "when the study sets none)."),
            ray: Optional[str] = RAY, endpoint_host: list[str] = HOSTS, allow_key_env: list[str] = KEYS,
            allow_program: list[str] = PROGRAMS) -> None:
    """Score the quality arms (GSM8K, needle retrieval, HumanEval in a sandbox, IFEval, RULER's
    synthetic long-context tasks) through the same engine; saved items are never regenerated."""
    def go():
        with _ctx(study, out, ray, _consent(endpoint_host, allow_key_env, allow_program)) as ctx:
            stages.quality(ctx, arms=arm or None, n=n, task=task, max_tokens=max_tokens)
    _run(go)


def _split(value: Optional[str]) -> Optional[list[str]]:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


@app.command()
def evict(study: Optional[str] = STUDY_ARG, study_opt: Optional[str] = STUDY_OPT,
          policies: Optional[str] = typer.Option(None, help="Comma-separated: streamingllm (= streaming), h2o, "
                                                             "snapkv, pyramidkv (= pyramid), topk (= sparse: oracle top-k "
                                                             "sparse attention, keeps = share of the keys each decode step reads) "
                                                             "(overrides the study's \\[eviction])."),
          keeps: Optional[str] = typer.Option(None, help="Comma-separated KV keep ratios in (0, 1), e.g. 0.5,0.25 "
                                                         "(topk: the share of the keys each decode step reads)."),
          task: Optional[str] = typer.Option(None, help="retrieval, ruler or gsm8k (default: the study's [eviction] task, else its quality task)."),
          n: Optional[int] = typer.Option(None, help="GSM8K items, or retrieval items per length and depth."),
          store: Optional[Path] = typer.Option(None, help="Store file (default: <out>/store.duckdb)."),
          out: Optional[Path] = OUT) -> None:
    """Measure KV eviction (StreamingLLM, H2O, SnapKV, PyramidKV) and top-k sparse attention on the study's model
    in transformers; stored points are kept on a rerun. Needs the extra: pip install
    'pareto-atlas\\[eviction]'."""
    study = _study(study, study_opt)

    def go():
        with stages.Context.open(study, out, console, store=store) as ctx:
            stages.evict(ctx, policies=_split(policies), keeps=_split(keeps), task=task, n=n)
    _run(go)


@app.command()
def kld(study: Optional[str] = STUDY_ARG, study_opt: Optional[str] = STUDY_OPT,
        arm: list[str] = typer.Option(None, "--arm", help="Only these arms (repeatable); the baseline always runs."),
        tokens: Optional[int] = typer.Option(None, help="Tokens scored per configuration (overrides the study's "
                                                        "\\[quality] kld_tokens; whole chunks of 255)."),
        keep_base: bool = typer.Option(False, help="Keep the baseline's logits file (~300 kB a token) afterwards."),
        store: Optional[Path] = typer.Option(None, help="Store file (default: <out>/store.duckdb)."),
        out: Optional[Path] = OUT) -> None:
    """Token-level KL divergence and top-1 agreement of each quality configuration against the
    baseline arm, by llama.cpp's llama-perplexity (`make llama-tools` builds it); stored
    configurations are kept on a rerun."""
    study = _study(study, study_opt)

    def go():
        with stages.Context.open(study, out, console, store=store) as ctx:
            stages.kld(ctx, arms=arm or None, tokens=tokens, keep_base=keep_base, required=True)
    _run(go)


ALLOW_AGG = typer.Option(False, "--allow-aggregate", help="Also fit imported anchors whose token-count contract "
                                                           "rests on totals only (default: verified ones).")
ALLOW_UNV = typer.Option(False, "--allow-unverified", help="Also fit imported anchors whose file cannot show the "
                                                            "token-count contract was met.")


def _allow(aggregate: bool, unverified: bool) -> tuple[str, ...]:
    return tuple(c for c, on in (("aggregate", aggregate), ("unverified", unverified)) if on)


@app.command()
def calibrate(study: str = STUDY, out: Optional[Path] = OUT, allow_aggregate: bool = ALLOW_AGG,
              allow_unverified: bool = ALLOW_UNV) -> None:
    """Fit the simulator to the anchors in the store and print its fidelity."""
    def go():
        with _ctx(study, out) as ctx:
            stages.calibrate(ctx, allow=_allow(allow_aggregate, allow_unverified))
    _run(go)


@app.command("import")
def import_(files: list[Path] = typer.Argument(..., help="Result files: vllm bench serve / benchmark_serving.py "
                                                         "JSON or JSON lines, vllm bench sweep, GuideLLM, AIPerf, "
                                                         "genai-perf, SGLang bench_serving, llama-bench, MLPerf "
                                                         "loadgen logs, lm-eval results (told by shape, not name)."),
            study: str = STUDY, out: Optional[Path] = OUT,
            hardware: Optional[str] = typer.Option(None, "--hardware", help="The GPU card the runs used (a shipped "
                                                                              "card, e.g. H100-SXM)."),
            model: Optional[str] = typer.Option(None, "--model", help="The model card (a shipped one, e.g. llama-3-8b)."),
            engine: Optional[str] = typer.Option(None, "--engine", help="The serving engine, where the file does "
                                                                         "not say (vllm, sglang, ...)."),
            knobs: Optional[str] = typer.Option(None, "--knobs", help='The configuration served, e.g. '
                                                                      '"weights=FP8,kv=fp8" (default: the baseline).'),
            output_tokens: Optional[int] = typer.Option(None, "--output-tokens", help="The output length every "
                                                        "request asked for, to check the token-count contract."),
            allow_aggregate: bool = ALLOW_AGG, allow_unverified: bool = ALLOW_UNV) -> None:
    """Import other tools' result files as anchors (and lm-eval scores as quality evidence) in one
    transaction, each with provenance imported:<tool>@<version>:<sha256> and the file kept in the
    store; then calibrate the GPU card they name (held-out error printed)."""
    def go():
        with _ctx(study, out) as ctx:
            stages.import_files(ctx, files, hardware=hardware, model=model, engine=engine, knobs=knobs,
                                output_tokens=output_tokens, allow=_allow(allow_aggregate, allow_unverified))
    _run(go)


@app.command()
def published(study: str = STUDY, out: Optional[Path] = OUT,
              table: list[Path] = typer.Option(None, "--table", help="Another published-anchor CSV, in the shipped "
                                                                      "table's columns (repeatable; added to it)."),
              engine: list[str] = typer.Option(None, "--engine", help="Only anchors from this engine, e.g. vllm "
                                                                       "(repeatable; default: every engine)."),
              hardware: list[str] = typer.Option(None, "--hardware", help="Only this GPU card (repeatable)."),
              multi_gpu: bool = typer.Option(False, "--multi-gpu", help="Also fit spec/published_multigpu.csv per "
                                             "card and engine and print its held-out error per parallelism "
                                             "(leave one source, model, engine out); minutes.")) -> None:
    """Calibrate the GPU cards on published measurements (spec/published_anchors.csv plus --table):
    the anchors, the fit, its leave-one-source-out error, and the seed paper's ratios beside the
    projection. The fit is stored, and `simulate` uses it for those cards."""
    def go():
        with _ctx(study, out) as ctx:
            stages.published(ctx, tables=table or None, engines=engine or None, hardware=hardware or None,
                             multi_gpu=multi_gpu)
    _run(go)


@app.command("published-quality")
def published_quality(table: list[Path] = typer.Option(None, "--table", help="Another published-quality CSV in the "
                                                                            "shipped table's columns (repeatable)."),
                      model: Optional[str] = typer.Option(None, help="Also list this model card's scores, e.g. "
                                                                      "qwen2.5-7b."),
                      task: str = typer.Option("gsm8k", help="The task the quality guard prefers.")) -> None:
    """The published quality of deployed checkpoints (spec/published_quality.csv plus --table): what
    the quality ladder reads for a model the study did not measure, each score beside its own
    document's baseline, with the interval the guard decides on."""
    def go():
        stages.published_quality(console, table or [], model, task)
    _run(go)


@app.command()
def simulate(study: str = STUDY, out: Optional[Path] = OUT, ray: Optional[str] = RAY) -> None:
    """Simulate the configuration space across hardware with the latest calibration."""
    def go():
        with _ctx(study, out, ray) as ctx:
            stages.simulate(ctx)
    _run(go)


@app.command()
def atlas(study: str = STUDY, out: Optional[Path] = OUT) -> None:
    """Compute the frontier and the winner of each regime from the store, and print them."""
    def go():
        with _ctx(study, out) as ctx:
            stages.atlas(ctx)
    _run(go)


@app.command()
def report(study: str = STUDY, out: Optional[Path] = OUT) -> None:
    """Write the figures, tables, exports and the HTML atlas from the store."""
    def go():
        with _ctx(study, out) as ctx:
            stages.report(ctx)
    _run(go)


@app.command()
def pick(constraint: str = typer.Argument("", help='e.g. "tpot_p99_ms<=40, quality_rel>=0.95"'),
         objective: str = typer.Option("cost_per_mtok", help="Column to optimise."),
         maximize: bool = typer.Option(False, help="Maximise the objective instead of minimising it."),
         price: list[str] = typer.Option(None, help='Re-price hardware, e.g. "A100-80G-PCIe=2.085" (repeatable).'),
         allow_priors: bool = typer.Option(False, "--allow-priors",
                                           help="Let configurations whose quality or speed rests only on priors "
                                                "win (default: they are listed as projected, with the command that "
                                                "would measure them)."),
         model: Optional[str] = typer.Option(None, help="Answer for this model only (default: each model the "
                                                         "atlas answers for)."),
         workload: Optional[str] = typer.Option(None, help="Answer for this workload only (default: each)."),
         study: str = STUDY, out: Optional[Path] = OUT) -> None:
    """Re-plan without re-measuring: the best configuration under a constraint and prices, per model
    and workload; with --price, where the regime winners move."""
    def go():
        with _ctx(study, out) as ctx:
            stages.pick(ctx, constraint, objective, maximize, price or [], allow_priors, model, workload)
    _run(go)


@app.command()
def export(study: str = STUDY, out: Optional[Path] = OUT,
           fmt: str = typer.Option("parquet", "--format", help="parquet, csv or json (every table of the store); "
                                                               "vllm-bench or guidellm (the study's anchors in that "
                                                               "tool's result format, one file each)")) -> None:
    """Export every table of the store, or the study's anchors in a peer tool's format."""
    def go():
        with _ctx(study, out) as ctx:
            if fmt in stages.PEER_FORMATS:
                stages.export_peer(ctx, fmt)
                return
            paths = ctx.store.export(ctx.out / "export", fmt)
            console.print(f"exported {len(paths)} tables to {ctx.out / 'export'}")
    _run(go)


def check(study: str = STUDY, out: Optional[Path] = OUT,
          store: Optional[Path] = typer.Option(None, help="Store file (default: the study's <out>/store.duckdb).")) -> None:
    """Report a store's integrity, read-only: migrations applied or unknown, tables readable to
    their end, orphaned rows, anchors without request records. Exit 1 when it finds a problem."""
    from pareto_atlas.store.integrity import check_store

    def go():
        path = store
        if path is None:
            s = stages.load_study(study)
            path = stages.default_store(s, Path(out) if out else Path("atlas-out") / s.name)
        rep = check_store(path)
        for line in rep.lines():
            console.print(line, highlight=False, markup=False, soft_wrap=True)
        return rep.ok
    if not _run(go):
        raise typer.Exit(1)


app.command("check")(check)
app.command("doctor", help="Same as check.")(check)


def main() -> None:  # pragma: no cover
    sys.exit(app())
