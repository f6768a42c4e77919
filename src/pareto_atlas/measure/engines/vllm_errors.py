"""Why a vLLM server did not start, in one line naming the knob it refused.

vLLM's engine core runs in a child process: when it refuses a setting, its exception is printed
first and the API server's own failure ("Engine core initialization failed. See root cause
above.") comes last, so the last line of the log is never the reason. The root cause is the first
exception line that is not such a wrapper; which knob it concerns is read from its text (what
the real server says, never guessed before starting it).
"""

from __future__ import annotations

import re
from pathlib import Path

from pareto_atlas.spec.knobs import Knobs

# "ValueError: ...", "(EngineCore_DP0 pid=12) NotImplementedError: ..." , "torch.OutOfMemoryError: ..."
_EXCEPTION = re.compile(r"(?:^|[\s)\]])((?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)): (.+)$")
_NOISE = re.compile(r"\b(?:DEBUG|INFO|WARNING)\b \d\d-\d\d ")  # vLLM's own log lines below ERROR
_PYDANTIC_DETAIL = re.compile(r"Value error, (.+?)(?: \[type=.*)?$")  # the line after a ValidationError
_WRAPPERS = (
    "Engine core initialization failed",
    "See root cause above",
    "Failed core proc",
    "Background process failed",
    "Engine process failed to start",
)

# A phrase of vLLM's message -> the knob it refuses (first match wins).
KNOB_HINTS: tuple[tuple[str, str], ...] = (
    ("kv cache", "kv"),
    ("kv_cache_dtype", "kv"),
    ("kv-cache-dtype", "kv"),
    ("speculative", "spec"),
    ("ngram", "spec"),
    ("num_speculative_tokens", "spec_k"),
    ("max_num_batched_tokens", "chunk_tokens"),
    ("chunked prefill", "batching"),
    ("max_num_seqs", "slots"),
    ("quantization", "weights"),
    ("dtype", "weights"),
    ("bfloat16", "weights"),
    ("float16", "weights"),
)


def root_cause(lines: list[str]) -> str | None:
    """The first exception message that is not a wrapper around another process's failure. vLLM's
    configs are pydantic dataclasses: their "1 validation error for SchedulerConfig" says where,
    the next line ("Value error, max_num_batched_tokens (2) must be ...") says what."""
    for i, s in enumerate(lines):
        m = None if _NOISE.search(s) else _EXCEPTION.search(s.strip())
        if not m or any(w in m.group(2) for w in _WRAPPERS):
            continue
        name, msg = m.group(1).rsplit(".", 1)[-1], m.group(2).strip()
        if name == "ValidationError":
            detail = next((d for d in (_PYDANTIC_DETAIL.search(x.strip()) for x in lines[i + 1 : i + 4]) if d), None)
            msg = f"{msg.removeprefix('1 validation error for ')}: {detail.group(1)}" if detail else msg
        return f"{name}: {msg}"[:300]
    return None


def refused_knob(message: str) -> str | None:
    low = message.lower()
    return next((knob for phrase, knob in KNOB_HINTS if phrase in low), None)


def explain(message: str, knobs: Knobs | None) -> str:
    """`message` prefixed with the knob (and its value) it refused, when its text names one."""
    knob = refused_knob(message)
    if knob is None or knobs is None:
        return message
    return f"knobs.{knob} = {getattr(knobs, knob)!r} refused by vllm on this machine: {message}"


def why_vllm_died(log_path: Path, default: str = "", knobs: Knobs | None = None) -> str:
    """One line from a vLLM server's log: the refused knob and vLLM's own words, else its last line."""
    try:
        lines = [s for s in log_path.read_text(errors="replace").splitlines() if s.strip()]
    except OSError:
        return default
    cause = root_cause(lines)
    if cause is not None:
        return explain(cause, knobs)
    return lines[-1].strip()[:300] if lines else default
