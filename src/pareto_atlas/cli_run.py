"""How each verb of the command line runs: the console, one-line errors, how a study is named, the
options several verbs share, and one function per job that a verb and its earlier name both call."""

from __future__ import annotations

import shutil
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Optional

import duckdb
import typer
from rich.console import Console
from rich.markup import escape

from pareto_atlas import stages
from pareto_atlas.measure.consent import Consent

# Tables stay readable when the output goes to a file or CI log (no terminal width to ask).
console = Console(stderr=True, width=max(shutil.get_terminal_size((160, 40)).columns, 140))

BUILTINS = (
    "default, full (the default and more: same store), tiny, ladder, vllm-cpu, sizes (three model sizes), workloads (a task per workload), "
    "paper (the seed paper's setup on published evidence, no engine), "
    "llama70b (Llama-3.1-70B on 1-8 H100-SXM / H200 GPUs a replica, on published evidence, no engine), "
    "prefix (prefix caching on workloads that share), "
    "prefix-vllm (vLLM's CPU build, prefix caching on and off on a shared system prompt), "
    "moe (Qwen3-30B-A3B and -235B-A22B beside the dense Qwen3-32B on 1-8 H100-SXM / H200 GPUs, EP and attention-DP, no engine)"
)
# Every verb that takes a study takes it as STUDY, and as --study / -s (the older spelling).
STUDY = typer.Argument(
    None, metavar="STUDY", show_default=False, help=f"Study TOML path, or a built-in: {BUILTINS} (default: default)."
)
STUDY_OPT = typer.Option(None, "--study", "-s", show_default=False, help="The same as STUDY.")
OUT = typer.Option(None, "--out", "-o", help="Output folder (default: atlas-out/<study name>).")
RAY = typer.Option(
    None,
    "--ray",
    help="Run on Ray: HOST:PORT of a cluster's head, auto, or local (a cluster on this machine). Default: in-process.",
)
ARMS = typer.Option(None, "--arm", help="Only these arms (repeatable; kld: the baseline always runs).")
STORE = typer.Option(None, "--store", help="Store file (default: <out>/store.duckdb).")
# What a study may do only because you say so here or in ~/.config/pareto-atlas/config.toml (measure.consent)
HOSTS = typer.Option(
    None,
    "--endpoint-host",
    help="A non-loopback host that may receive the study's API key (engine openai; repeatable).",
)
KEYS = typer.Option(
    None,
    "--allow-key-env",
    help="An environment variable the study may send as its key although "
    "its name does not look like an API key (repeatable).",
)
PROGRAMS = typer.Option(
    None,
    "--allow-program",
    help="A program the study may run (engine.options.binary or "
    "python; the same file, after PATH and links; repeatable).",
)
ALLOW_AGG = typer.Option(
    False,
    "--allow-aggregate",
    help="Also fit imported anchors whose token-count contract rests on totals only (default: verified ones).",
)
ALLOW_UNV = typer.Option(
    False,
    "--allow-unverified",
    help="Also fit imported anchors whose file cannot show the token-count contract was met.",
)


def study_name(arg: Optional[str], opt: Optional[str]) -> str:
    if arg and opt and arg != opt:
        raise typer.BadParameter(f"study given twice: {arg!r} and --study {opt!r}; give one", param_hint="study")
    return arg or opt or "default"


def open_context(
    study: str,
    out: Optional[Path],
    ray: Optional[str] = None,
    store: Optional[Path] = None,
    consent: Optional[Consent] = None,
) -> stages.Context:
    return stages.Context.open(study, out, console, ray, store=store, consent=consent)


def consent_of(hosts: Optional[list[str]], keys: Optional[list[str]], programs: Optional[list[str]]) -> Consent:
    return Consent.from_user(hosts or (), keys or (), programs or ())


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def stop_on_sigterm() -> None:
    """A plain `kill` or `timeout` ends a command as Ctrl-C does: the running stage unwinds, which
    stops the engine server it started (its own process group would otherwise outlive us) and
    keeps everything already measured."""
    signal.signal(signal.SIGTERM, _interrupt)


def guarded(fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]: everything that finished is saved in the store; rerun to resume.")
        raise typer.Exit(130)
    except stages.USER_ERRORS as e:
        # escaped: an error naming an extra, 'pareto-atlas[ray]', is not rich markup
        console.print(f"[red]error:[/] {escape(str(e))}", markup=True, highlight=False, soft_wrap=True)
        raise typer.Exit(2)
    except duckdb.Error as e:  # the file or the disk failed under a read: one line, not a traceback
        from pareto_atlas.store.db import io_reason, is_fault

        if not is_fault(e):
            raise
        console.print(f"[red]error:[/] store: {escape(io_reason(e))}", markup=True, highlight=False, soft_wrap=True)
        raise typer.Exit(2)


def split_list(value: Optional[str]) -> Optional[list[str]]:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


def allowed_contracts(aggregate: bool, unverified: bool) -> tuple[str, ...]:
    return tuple(c for c, on in (("aggregate", aggregate), ("unverified", unverified)) if on)


def refuse_unread(kind_flag: str, kind: str, params: Mapping[str, object], reads: dict[str, tuple[str, ...]]) -> None:
    """Refuse, in one line, an option the chosen kind does not read (it would be silently ignored).
    `reads`: each option and the kinds that read it (cli_options); `params`: the command's parameters
    by name (its locals()), option --max-tokens being parameter max_tokens."""
    for option, kinds in reads.items():
        value = params[option.removeprefix("--").replace("-", "_")]
        unset = value is None or value is False or (isinstance(value, (list, tuple)) and not value)
        if not unset and kind not in kinds:
            raise typer.BadParameter(
                f"{option} applies to {kind_flag} {', '.join(kinds)}, not {kind}", param_hint=option
            )


def run_quality_tasks(
    study: str,
    out: Optional[Path],
    arm: list[str],
    n: Optional[str],
    task: Optional[str],
    max_tokens: Optional[int],
    ray: Optional[str],
    consent: Consent,
) -> None:
    def go():
        with open_context(study, out, ray, consent=consent) as ctx:
            stages.quality(ctx, arms=arm or None, n=n, task=task, max_tokens=max_tokens)

    guarded(go)


def run_kld(
    study: str, out: Optional[Path], store: Optional[Path], arm: list[str], tokens: Optional[int], keep_base: bool
) -> None:
    def go():
        with open_context(study, out, store=store) as ctx:
            stages.kld(ctx, arms=arm or None, tokens=tokens, keep_base=keep_base, required=True)

    guarded(go)


def run_evict(
    study: str,
    out: Optional[Path],
    store: Optional[Path],
    policies: Optional[str],
    keeps: Optional[str],
    task: Optional[str],
    n: Optional[int],
) -> None:
    def go():
        with open_context(study, out, store=store) as ctx:
            stages.evict(ctx, policies=split_list(policies), keeps=split_list(keeps), task=task, n=n)

    guarded(go)


def run_published_quality(table: list[Path], model: Optional[str], task: str) -> None:
    def go():
        stages.published_quality(console, table or [], model, task)

    guarded(go)


def run_import(
    study: str,
    out: Optional[Path],
    files: list[Path],
    hardware: Optional[str],
    model: Optional[str],
    engine: Optional[str],
    knobs: Optional[str],
    output_tokens: Optional[int],
    allow: tuple[str, ...],
) -> None:
    def go():
        with open_context(study, out) as ctx:
            stages.import_files(
                ctx,
                files,
                hardware=hardware,
                model=model,
                engine=engine,
                knobs=knobs,
                output_tokens=output_tokens,
                allow=allow,
            )

    guarded(go)


def run_published(
    study: str, out: Optional[Path], table: list[Path], engine: list[str], hardware: list[str], multi_gpu: bool = False
) -> None:
    def go():
        with open_context(study, out) as ctx:
            stages.published(
                ctx, tables=table or None, engines=engine or None, hardware=hardware or None, multi_gpu=multi_gpu
            )

    guarded(go)


def run_check(study: str, out: Optional[Path], store: Optional[Path]) -> None:
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

    if not guarded(go):
        raise typer.Exit(1)
