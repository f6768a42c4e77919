"""The `kld` stage: every quality configuration of a study against its baseline arm by token-level
KL divergence and top-1 agreement (quality.kld), into the store.

One run per distinct token-changing configuration (weights, KV type): speculation and slots do not
change tokens, so their arms inherit. The baseline's run saves its log-probabilities (large: ~300 kB
a scored token) beside the store; each configuration is stored as it finishes and never re-run; the
saved logits are deleted once every configuration is stored, unless asked to keep them.
"""

from __future__ import annotations

import hashlib
import math
import time
from pathlib import Path

from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from pareto_atlas.measure.weights import LLAMA_CPP_VERSION, ModelError, variant_file
from pareto_atlas.quality import kld as K
from pareto_atlas.quality.campaign import quality_arms
from pareto_atlas.spec.study import ArmSpec, QualitySpec, Study, StudyError
from pareto_atlas.store import Store
from pareto_atlas.store.db import dumps

ENGINE = "llama-perplexity"
METHOD = (
    "95 % t interval over chunk means (chunks are clusters), se never below llama.cpp's per-token se; "
    "PPL ratio: exp of the ln-ratio interval"
)


class KldUnavailable(ValueError):
    """The KL stage cannot run here (no llama-perplexity, or an engine whose numerics it does not measure)."""


def token_budget(study: Study, tokens: int | None) -> int:
    """Scored tokens per configuration: the command line's, validated like the study's field."""
    if tokens is None:
        return study.quality.kld_tokens
    try:
        return QualitySpec.model_validate({**study.quality.model_dump(), "kld_tokens": tokens}).kld_tokens
    except ValidationError as e:
        raise StudyError(f"kld --tokens: {e.errors()[0]['msg'].removeprefix('Value error, ')}") from None


def kld_arms(study: Study, arms: list[str] | None = None) -> list[ArmSpec]:
    """One arm per token-changing configuration among the study's arms (or those named), the
    baseline first: its run is the reference the others are held against."""
    names = [study.baseline.name, *(arms or [a.name for a in study.arms])]
    return quality_arms(study, list(dict.fromkeys(names)))


def _hash(ident: dict) -> str:
    return hashlib.sha256(dumps(ident).encode()).hexdigest()[:20]


def kld_id(study: Study, arm: ArmSpec, text_sha: str, chunks: int, ctx: int) -> str:
    return _hash(
        {
            "study": study.name,
            "model": study.model.name,
            "quality_key": arm.knobs().quality_key(),
            "base_key": study.baseline.knobs().quality_key(),
            "text_sha256": text_sha,
            "chunks": chunks,
            "ctx": ctx,
            "engine": ENGINE,
            "llama_cpp": LLAMA_CPP_VERSION,
        }
    )


def _common(
    study: Study, arm: ArmSpec, path: Path, sha: str, base_sha: str, text: tuple[str, str], chunks: int, threads: int
) -> dict:
    return {
        "study": study.name,
        "arm": arm.name,
        "quality_key": arm.knobs().quality_key(),
        "weights": arm.weights,
        "kv": arm.kv,
        "model": study.model.name,
        "model_file": str(path),
        "model_sha256": sha,
        "base_arm": study.baseline.name,
        "base_sha256": base_sha,
        "base_kv": study.baseline.kv,
        "text_source": text[0],
        "text_sha256": text[1],
        "chunks": chunks,
        "ctx": K.KLD_CTX,
        "threads": threads,
        "engine": ENGINE,
    }


def base_row(common: dict, kid: str, base: K.BaseOutput, version: str, out: str, seconds: float) -> dict:
    """The baseline against itself: zero divergence and full agreement by definition, with its PPL."""
    zero = {f"{p}{s}": v for p, v in (("kld", 0.0), ("top1", 1.0), ("ln_ppl_ratio", 0.0)) for s in ("", "_lo", "_hi")}
    return {
        **common,
        **zero,
        "kld_id": kid,
        "role": "base",
        "n_tokens": base.chunks * K.scored_per_chunk(base.ctx),
        "kld_median": 0.0,
        "kld_p99": 0.0,
        "kld_p999": 0.0,
        "kld_max": 0.0,
        "ppl": base.ppl,
        "ppl_base": base.ppl,
        "interval_method": "reference: zero by definition",
        "engine_version": version,
        "seconds": seconds,
        "output": out,
    }


def arm_row(common: dict, kid: str, res: K.KldResult, version: str, out: str, seconds: float) -> dict:
    return {
        **common,
        "kld_id": kid,
        "role": "arm",
        "n_tokens": res.n_tokens,
        **res.kld.to_dict("kld"),
        **res.top1.to_dict("top1"),
        **res.ln_ratio.to_dict("ln_ppl_ratio"),
        **res.tails,
        "ppl": res.ppl,
        "ppl_base": res.ppl_base,
        "interval_method": METHOD,
        "engine_version": version,
        "seconds": seconds,
        "output": out,
    }


def _keep(row: dict) -> dict:
    """A row as the caller gets it: without llama.cpp's raw output (kept in the store)."""
    return {k: v for k, v in row.items() if k != "output"}


def _run_base(
    exe: Path, study: Study, path: Path, text: str, part: Path, chunks: int
) -> tuple[K.BaseOutput, str, float]:
    """The baseline's run, its logits saved to `part` (removed again if the run does not finish)."""
    text_file = part.with_suffix(".txt")
    text_file.write_text(text)
    try:
        out, seconds = K.run_perplexity(
            K.base_argv(exe, path, study.baseline.kv, text_file, part, chunks, threads=study.engine.threads)
        )
        base = K.parse_base(out)
        if base.chunks < chunks:
            raise K.KldError(f"the KL text gave {base.chunks} chunks, {chunks} were asked")
    except BaseException:  # an interrupted run must not leave gigabytes behind
        part.unlink(missing_ok=True)
        raise
    finally:
        text_file.unlink(missing_ok=True)
    return base, out, seconds


def kld_study(
    study: Study,
    store: Store,
    console: Console,
    *,
    arms: list[str] | None = None,
    tokens: int | None = None,
    keep_base: bool = False,
    workdir: Path | None = None,
) -> list[dict]:
    """Run what the store lacks of the study's KL divergences; returns every configuration's row."""
    if study.engine.name != "llamacpp":
        raise KldUnavailable(
            f"kld: measured with llama.cpp; study {study.name!r} serves on {study.engine.name}, "
            f"whose numerics llama-perplexity does not reproduce"
        )
    exe = K.llama_perplexity()
    if exe is None:
        raise KldUnavailable(
            "kld: llama-perplexity is not built; `make llama-tools` builds it (~7 min on 2 cores, once)"
        )
    chunks = K.chunks_for(token_budget(study, tokens))
    text, source = K.kld_text(chunks)
    text_id = (source, hashlib.sha256(text.encode()).hexdigest())
    plan = kld_arms(study, arms)
    ids = {a.name: kld_id(study, a, text_id[1], chunks, K.KLD_CTX) for a in plan}
    console.print(
        f"[bold]kld[/] {study.name}: {len(plan)} configuration(s) against {study.baseline.name} by "
        f"llama-perplexity, {chunks} chunks x {K.scored_per_chunk()} scored tokens (ctx {K.KLD_CTX}) of "
        f"{source}",
        highlight=False,
    )
    stored = store.kld_points(study.name)
    rows = {
        a.name: _keep(stored[stored.kld_id == ids[a.name]].iloc[-1].to_dict())
        for a in plan
        if (stored.kld_id == ids[a.name]).any()
    }
    for name in rows:
        console.print(f"  {name}: stored earlier, kept", highlight=False)
    todo = [a for a in plan if a.name not in rows]
    if todo:
        workdir = workdir or store.path.parent / "kld"
        workdir.mkdir(parents=True, exist_ok=True)
        base_file = workdir / f"base-{ids[plan[0].name]}.kld"
        rows |= _run_todo(exe, study, store, console, plan, todo, ids, text, text_id, chunks, base_file)
        if len(rows) == len(plan) and not keep_base:
            base_file.unlink(missing_ok=True)  # ~300 kB a token; every configuration is stored
        elif base_file.exists():
            console.print(
                f"  baseline logits kept in {base_file} ({base_file.stat().st_size / 2**20:.0f} MiB)", highlight=False
            )
    out = [rows[a.name] for a in plan if a.name in rows]
    console.print(kld_table(out))
    return out


def _run_todo(
    exe: Path,
    study: Study,
    store: Store,
    console: Console,
    plan: list[ArmSpec],
    todo: list[ArmSpec],
    ids: dict[str, str],
    text: str,
    text_id: tuple[str, str],
    chunks: int,
    base_file: Path,
) -> dict[str, dict]:
    """The baseline's run where its logits are missing, then every configuration still to do."""
    base_arm, threads, rows, version = plan[0], study.engine.threads, {}, K.tool_version(exe)
    base_path, base_sha = variant_file(study.model.name, base_arm.weights)
    if not base_file.exists():
        console.print(
            f"  {base_arm.name}: baseline run ({base_arm.weights}, KV {base_arm.kv}) ... ", end="", highlight=False
        )
        part = base_file.with_suffix(".part")
        base, out, seconds = _run_base(exe, study, base_path, text, part, chunks)
        console.print(f"PPL {base.ppl:.4f} ({seconds:.0f} s)", highlight=False)
        if base_arm in todo:
            row = base_row(
                _common(study, base_arm, base_path, base_sha, base_sha, text_id, chunks, threads),
                ids[base_arm.name],
                base,
                version,
                out,
                seconds,
            )
            store.put_kld(row)
            rows[base_arm.name] = _keep(row)
        # named only once its row is stored: a logits file on disk means the baseline is in the store
        part.replace(base_file)
    for arm in todo:
        if arm is base_arm:
            continue
        console.print(f"  {arm.name} ({arm.weights}, KV {arm.kv}) ... ", end="", highlight=False)
        t0 = time.monotonic()
        try:
            path, sha = variant_file(study.model.name, arm.weights)
            out, seconds = K.run_perplexity(K.arm_argv(exe, path, arm.kv, base_file, threads=threads))
            parsed = K.parse_kld(out)
        except (K.KldError, ModelError, ValueError) as e:  # one configuration fails; the others go on
            console.print(f"[red]failed[/] ({time.monotonic() - t0:.0f} s): {e}", highlight=False)
            continue
        row = arm_row(
            _common(study, arm, path, sha, base_sha, text_id, chunks, threads),
            ids[arm.name],
            K.summarize(parsed),
            version,
            out,
            seconds,
        )
        store.put_kld(row)
        rows[arm.name] = _keep(row)
        console.print(f"KLD {row['kld']:.4g}, top-1 {row['top1']:.1%} ({seconds:.0f} s)", highlight=False)
    return rows


def _iv(v: float, lo: float, hi: float, fmt: str) -> str:
    fmt = fmt if hi < 1e3 else ".3g"  # the broken arm's PPL ratio runs to millions
    return f"{v:{fmt}} [{lo:{fmt}}, {hi:{fmt}}]"


def kld_table(rows: list[dict]) -> Table:
    """One line per configuration: mean KLD, top-1 agreement and PPL ratio with 95 % intervals."""
    t = Table(
        title="KL divergence against the baseline (95 % intervals clustered by chunk; deff: design effect)",
        title_justify="left",
    )
    for col in (
        "arm",
        "weights",
        "KV",
        "mean KLD [95 %]",
        "deff",
        "top-1 agreement [95 %]",
        "PPL ratio [95 %]",
        "KLD p99",
        "tokens",
        "s",
    ):
        t.add_column(col, justify="left" if col in ("arm", "weights", "KV") else "right")
    for r in rows:
        if r["role"] == "base":
            t.add_row(
                r["arm"],
                r["weights"],
                r["kv"],
                "reference",
                "",
                "",
                f"PPL {r['ppl']:.3f}",
                "",
                str(r["n_tokens"]),
                f"{r['seconds']:.0f}",
            )
            continue
        ratio = [math.exp(r[k]) for k in ("ln_ppl_ratio", "ln_ppl_ratio_lo", "ln_ppl_ratio_hi")]
        t.add_row(
            r["arm"],
            r["weights"],
            r["kv"],
            _iv(r["kld"], r["kld_lo"], r["kld_hi"], ".4f"),
            f"{r['kld_deff']:.1f}",
            _iv(100 * r["top1"], 100 * r["top1_lo"], 100 * r["top1_hi"], ".1f"),
            _iv(*ratio, ".3f"),
            f"{r['kld_p99']:.3f}",
            str(r["n_tokens"]),
            f"{r['seconds']:.0f}",
        )
    return t
