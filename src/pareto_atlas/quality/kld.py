"""Token-level KL divergence and top-1 agreement of an arm against the baseline arm, by llama.cpp's
own `llama-perplexity --kl-divergence` on a fixed teacher-forced GSM8K text, with honest intervals."""

from __future__ import annotations

import math
import re
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

from scipy import stats

from pareto_atlas.measure.engines.llamacpp import KV_CACHE_TYPES
from pareto_atlas.measure.weights import LLAMA_CPP_VERSION, llama_tool
from pareto_atlas.quality.stats import wilson_interval

KLD_CTX = 512  # llama-perplexity's default context; scores 255 tokens per chunk
CHARS_PER_TOKEN_BOUND = 6.0  # GSM8K runs ~3.3 characters per token; the text is cut with room to spare
LEVEL = 0.95
_NUM = r"(-?(?:nan|inf|[0-9.]+(?:e[-+]?[0-9]+)?))"
_PM = r"\s*±\s*"


class KldError(RuntimeError):
    """llama-perplexity failed, or printed something this parser does not know."""


def llama_perplexity() -> Path | None:
    """llama.cpp's llama-perplexity (see measure.weights.llama_tool), or None."""
    return llama_tool("llama-perplexity")


def scored_per_chunk(ctx: int = KLD_CTX) -> int:
    return ctx - 1 - ctx // 2


def chunks_for(tokens: int, ctx: int = KLD_CTX) -> int:
    """Chunks that score at least `tokens` tokens."""
    return max(1, math.ceil(tokens / scored_per_chunk(ctx)))


def kld_text(chunks: int, ctx: int = KLD_CTX) -> tuple[str, str]:
    """The teacher-forced text: GSM8K train questions and answers in file order, long enough for
    `chunks` chunks of `ctx` tokens. Returns the text and where it came from (split, file sha256,
    documents used), which the stage prints and stores with every KL row. Always the train split
    (shipped with the package): another split would be another text, and KL figures would move."""
    from pareto_atlas.quality.gsm8k import load_split

    split = load_split("train")
    need = max(chunks, 2) * ctx * CHARS_PER_TOKEN_BOUND  # llama-perplexity refuses under 2 x ctx tokens
    parts, size = [], 0
    for doc in split.docs:
        if size >= need:
            break
        parts.append(f"Question: {doc.question}\nAnswer: {doc.answer}\n\n")
        size += len(parts[-1])
    if size < need:
        raise KldError(f"kld: the GSM8K train split holds {size} characters, {chunks} chunks need {need:.0f}")
    return "".join(parts), f"gsm8k {split.name} ({split.sha256[:12]}), first {len(parts)} of {len(split.docs)} docs"


def kv_args(kv: str) -> list[str]:
    """The KV cache as measure.engines.llamacpp serves it: quantized types need flash attention."""
    if kv not in KV_CACHE_TYPES:
        raise ValueError(f"knobs.kv: {kv!r} is not served by llamacpp; allowed: {', '.join(KV_CACHE_TYPES)}")
    return [] if kv == "f16" else ["-fa", "on", "-ctk", KV_CACHE_TYPES[kv], "-ctv", KV_CACHE_TYPES[kv]]


def base_argv(
    exe: Path, model: Path, kv: str, text: Path, base: Path, chunks: int, *, ctx: int = KLD_CTX, threads: int = 2
) -> list[str]:
    """Score the text with the baseline and save its log-probabilities to `base`."""
    return [
        str(exe),
        "-m",
        str(model),
        "-f",
        str(text),
        "-c",
        str(ctx),
        "-t",
        str(threads),
        "--chunks",
        str(chunks),
        "--kl-divergence-base",
        str(base),
        *kv_args(kv),
    ]


def arm_argv(exe: Path, model: Path, kv: str, base: Path, *, ctx: int = KLD_CTX, threads: int = 2) -> list[str]:
    """Score the tokens saved in `base` with an arm and compare with the saved distributions."""
    return [
        str(exe),
        "-m",
        str(model),
        "-c",
        str(ctx),
        "-t",
        str(threads),
        "--kl-divergence-base",
        str(base),
        "--kl-divergence",
        *kv_args(kv),
    ]


def tool_version(exe: Path) -> str:
    """The binary's own version line(s), beside the pinned source it was built from."""
    try:
        res = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return f"llama.cpp {LLAMA_CPP_VERSION}"
    lines = [ln.strip() for ln in (res.stdout + res.stderr).splitlines() if ln.strip()]
    return f"llama.cpp {LLAMA_CPP_VERSION} ({'; '.join(lines[-2:])})" if lines else f"llama.cpp {LLAMA_CPP_VERSION}"


def run_perplexity(argv: list[str], timeout_s: float = 3600.0) -> tuple[str, float]:
    """Run llama-perplexity; its output (stdout and stderr in order) and wall seconds."""
    t0 = time.monotonic()
    try:
        res = subprocess.run(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            timeout=timeout_s,
            check=False,
        )  # llama.cpp's own errors are read from its output
    except subprocess.TimeoutExpired:
        raise KldError(f"llama-perplexity ran past {timeout_s:.0f} s") from None
    if res.returncode != 0:
        raise KldError(f"llama-perplexity exited {res.returncode}: {_error_line(res.stdout)}")
    return res.stdout, time.monotonic() - t0


def _error_line(out: str) -> str:
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    bad = [ln for ln in lines if re.search(r"error|failed|inconsistent|you need|does not look", ln, re.I)]
    return (bad or lines[-1:] or ["no output"])[0][:300]


def _f(s: str) -> float:
    return float(s.replace("-nan", "nan"))


@dataclass(frozen=True)
class BaseOutput:
    """What the baseline run printed: chunks of ctx tokens and the baseline's own perplexity."""

    chunks: int
    ctx: int
    ppl: float
    ppl_se: float


def parse_base(out: str) -> BaseOutput:
    m = re.search(r"calculating perplexity over (\d+) chunks, n_ctx=(\d+)", out)
    ppl = re.search(r"Final estimate: PPL = " + _NUM + r" \+/- " + _NUM, out)
    if not (m and ppl):
        raise KldError(f"llama-perplexity (base run) printed no final estimate: {_error_line(out)}")
    return BaseOutput(int(m[1]), int(m[2]), _f(ppl[1]), _f(ppl[2]))


_CHUNK = re.compile(r"^\s*(\d+)" + (r"\s+" + _NUM + _PM + _NUM + r"(?: %)?") * 5 + r"\s*$", re.M)
_FINAL = {
    "ppl": r"Mean PPL\(Q\)\s*:",
    "ppl_base": r"Mean PPL\(base\)\s*:",
    "ln_ratio": r"Mean ln\(PPL\(Q\)/PPL\(base\)\)\s*:",
    "kld": r"Mean\s+KLD:",
    "top1": r"Same top p:",
}
_PCT = {
    "kld_max": "Maximum KLD:",
    "kld_p999": r"99\.9%\s+KLD:",
    "kld_p99": r"99\.0%\s+KLD:",
    "kld_median": "Median  KLD:",
}


@dataclass(frozen=True)
class KldOutput:
    """What an arm's run printed. `running`: after each chunk, llama.cpp's running means over all
    chunks so far of ln(PPL ratio), KLD and top-1 agreement (a fraction); `final`: (value, per-token
    stderr) of ppl, ppl_base, ln_ratio, kld, top1 (fractions, not %); `tails`: KLD percentiles."""

    chunks: int
    ctx: int
    running: dict[str, list[float]]
    final: dict[str, tuple[float, float]]
    tails: dict[str, float]

    @property
    def per_chunk(self) -> int:
        return scored_per_chunk(self.ctx)

    @property
    def n_tokens(self) -> int:
        return self.chunks * self.per_chunk


def parse_kld(out: str) -> KldOutput:
    """Parse `llama-perplexity --kl-divergence` output (llama.cpp returns 0 even when it stopped
    early, so a missing summary is the error)."""
    m = re.search(r"kl_divergence: computing over (\d+) chunks, n_ctx=(\d+)", out)
    rows = [[_f(x) for x in r.groups()] for r in _CHUNK.finditer(out)]
    final = {}
    for key, label in _FINAL.items():
        hit = re.search(label + r"\s*" + _NUM + _PM + _NUM, out)
        if hit:
            final[key] = (_f(hit[1]), _f(hit[2]))
    tails = {k: _f(h[1]) for k, lab in _PCT.items() if (h := re.search(lab + r"\s+" + _NUM, out))}
    if not m or len(final) < len(_FINAL) or len(tails) < len(_PCT):
        raise KldError(f"llama-perplexity printed no KL-divergence summary: {_error_line(out)}")
    if [int(r[0]) for r in rows] != list(range(1, int(m[1]) + 1)):
        raise KldError(f"llama-perplexity printed {len(rows)} chunk lines for {m[1]} chunks")
    final["top1"] = (final["top1"][0] / 100, final["top1"][1] / 100)
    running = {"ln_ratio": [r[3] for r in rows], "kld": [r[5] for r in rows], "top1": [r[9] / 100 for r in rows]}
    return KldOutput(int(m[1]), int(m[2]), running, final, tails)


def chunk_means(running: Sequence[float]) -> list[float]:
    """Each chunk's own mean from running means over equal chunks: k m_k - (k - 1) m_(k-1)."""
    out, prev = [], 0.0
    for k, m in enumerate(running, 1):
        out.append(k * m - (k - 1) * prev)
        prev = m
    return out


def chunk_fractions(running: Sequence[float], per_chunk: int) -> list[float]:
    """Each chunk's own share of agreeing tokens: llama.cpp's running share to 0.001 % is exact
    enough to recover the integer counts."""
    counts = [round(p * per_chunk * k) for k, p in enumerate(running, 1)]
    return [(c - p) / per_chunk for c, p in zip(counts, [0, *counts[:-1]])]


@dataclass(frozen=True)
class Estimate:
    """A mean over scored tokens with a cluster-robust 95 % interval (see the module docstring)."""

    value: float
    lo: float
    hi: float
    se: float  # the standard error the interval uses
    token_se: float  # llama.cpp's per-token figure
    deff: float  # design effect: (chunk-based se / per-token se)^2; NaN with one chunk

    def to_dict(self, prefix: str) -> dict:
        return {
            prefix: self.value,
            f"{prefix}_lo": self.lo,
            f"{prefix}_hi": self.hi,
            f"{prefix}_se": self.se,
            f"{prefix}_token_se": self.token_se,
            f"{prefix}_deff": self.deff,
        }


def clustered(
    value: float, per_chunk: Sequence[float], token_se: float, *, bounds: tuple[float, float] = (-math.inf, math.inf)
) -> Estimate:
    """`value` with a 95 % interval that treats each chunk as a cluster.

    llama-perplexity evaluates each chunk of ctx tokens from an empty cache and scores its second
    half (255 tokens at ctx 512). Its "±" figures are per-token standard errors, as if every scored
    token were independent; neighbouring tokens are not (one hard passage, one KV-cache failure,
    spans many). So the standard error here is the spread of the per-chunk means / sqrt(chunks)
    (chunks are separate stretches of text on separate caches), never below llama.cpp's per-token
    one, with Student's t at chunks - 1 degrees of freedom; the design effect (that variance over
    the per-token one) is reported beside it. The per-chunk means come from differencing the running
    means llama.cpp prints after each chunk (`chunk_means`); their 5-decimal rounding adds at most
    (2k - 1) x 5e-6 to chunk k, which can only widen the interval. With one chunk there is no spread:
    the per-token standard error and the normal quantile are used."""
    k = len(per_chunk)
    if k < 2:
        se, crit, deff = token_se, stats.norm.ppf(0.5 + LEVEL / 2), math.nan
    else:
        mean = sum(per_chunk) / k
        sd = math.sqrt(sum((x - mean) ** 2 for x in per_chunk) / (k - 1))
        chunk_se = sd / math.sqrt(k)
        # no spread at all (every token agrees, or none does): no design effect to estimate
        deff = (chunk_se / token_se) ** 2 if token_se > 0 else (math.nan if chunk_se == 0 else math.inf)
        se, crit = max(chunk_se, token_se), stats.t.ppf(0.5 + LEVEL / 2, k - 1)
    lo, hi = max(bounds[0], value - crit * se), min(bounds[1], value + crit * se)
    return Estimate(value, lo, hi, se, token_se, deff)


def share(value: float, per_chunk: Sequence[float], token_se: float, n_tokens: int) -> Estimate:
    """A share of tokens (top-1 agreement): the clustered interval, widened to Wilson's at the
    effective sample size n / design effect (n where there is no spread to estimate it from), which
    stays honest at 0 % or 100 %, where every standard error is zero."""
    est = clustered(value, per_chunk, token_se, bounds=(0.0, 1.0))
    n_eff = max(1, round(n_tokens / max(est.deff, 1.0) if est.deff == est.deff else n_tokens))
    lo, hi = wilson_interval(min(n_eff, max(0, round(value * n_eff))), n_eff)
    return replace(est, lo=min(est.lo, lo), hi=max(est.hi, hi))


@dataclass(frozen=True)
class KldResult:
    """An arm against the baseline: mean KLD, top-1 agreement and ln(PPL ratio) with intervals."""

    kld: Estimate
    top1: Estimate
    ln_ratio: Estimate
    tails: dict[str, float]
    ppl: float
    ppl_base: float
    n_tokens: int
    chunks: int
    ctx: int

    @property
    def ppl_ratio(self) -> tuple[float, float, float]:
        return math.exp(self.ln_ratio.value), math.exp(self.ln_ratio.lo), math.exp(self.ln_ratio.hi)


def summarize(out: KldOutput) -> KldResult:
    """The figures of one run with their intervals."""
    f, r = out.final, out.running
    return KldResult(
        kld=clustered(f["kld"][0], chunk_means(r["kld"]), f["kld"][1], bounds=(0.0, math.inf)),
        top1=share(f["top1"][0], chunk_fractions(r["top1"], out.per_chunk), f["top1"][1], out.n_tokens),
        ln_ratio=clustered(f["ln_ratio"][0], chunk_means(r["ln_ratio"]), f["ln_ratio"][1]),
        tails=dict(out.tails),
        ppl=f["ppl"][0],
        ppl_base=f["ppl_base"][0],
        n_tokens=out.n_tokens,
        chunks=out.chunks,
        ctx=out.ctx,
    )
