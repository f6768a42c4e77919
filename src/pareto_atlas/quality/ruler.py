"""RULER's synthetic long-context tasks, generated offline: a key's needle among noise or among
distractor needles, variable tracking through a chain of assignments, and common-word extraction.

RULER (Hsieh et al. 2024, arXiv:2404.06654; NVIDIA/RULER scripts/data/synthetic) asks more of a
long context than one needle does: multikey needles are hidden among needles of other keys, vt
follows a chain across the context and cwe counts over all of it, which is what KV eviction and
compression break first. Each item is a pure function of (seed, subtask, length, index, token
counter); prompts follow RULER's templates and its answer prefix pre-fills the assistant turn,
as RULER appends it after the chat template. Scoring is RULER's string_match_all.
"""

from __future__ import annotations

import json
import math
import random
import re
import string
import uuid
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from typing import Callable, Sequence

from .extract import INVALID
from .records import QualityItem, QualityRecord
from .stats import score_bools

TASK = VARIANT = "ruler"
SUBTASKS = ("niah_single_1", "niah_multikey_2", "niah_multikey_3", "vt", "cwe")
CONTEXT_TOKENS = (1024, 2048)
# RULER's tokens_to_generate are 128 (niah), 30 (vt) and 120 (cwe); a needle's value (a UUID: ~25
# tokens) needs far less than 128, so niah gets 64.
MAX_TOKENS = {"niah": 64, "vt": 30, "cwe": 120}
# The length holds the whole request, as RULER's max_seq_length does: prompt, chat template and
# answer. The template's own tokens (role markers, a default system turn) are not counted by
# /tokenize, so this many are kept for them.
CHAT_TEMPLATE_TOKENS = 64
# Without the server's tokenizer, tokens are guessed as characters / this (low, so prompts come out
# short rather than long; UUIDs tokenize densest).
CHARS_PER_TOKEN = {"niah_single_1": 3.5, "niah_multikey_2": 2.5, "niah_multikey_3": 1.5, "vt": 3.0, "cwe": 2.5}

NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
NEEDLE = "One of the special magic {type_v} for {key} is: {value}."
# scripts/data/synthetic/constants.py (TASKS[...]["template"], ["answer_prefix"])
NIAH_TEMPLATE = (
    "Some special magic {type_v} are hidden within the following text. Make sure to memorize it. "
    "I will quiz you about the {type_v} afterwards.\n{context}\nWhat are all the special magic "
    "{type_v} for {query} mentioned in the provided text?"
)
NIAH_PREFIX = " The special magic {type_v} for {query} mentioned in the provided text are"
VT_TEMPLATE = (
    "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n{context}\n"
    "Question: Find all variables that are assigned the value {query} in the text above."
)
VT_PREFIX = (
    " Answer: According to the chain(s) of variable assignment in the text above, {num_v} variables "
    "are assigned the value {query}, they are: "
)
CWE_TEMPLATE = (
    "Below is a numbered list of words. In these words, some appear more often than others. Memorize "
    "the ones that appear most often.\n{context}\nQuestion: What are the 10 most common words in the "
    "above list?"
)
CWE_PREFIX = " Answer: The top 10 words that appear most often in the list are:"

# scripts/synthetic.yaml: (haystack, key type, value type)
NIAH = {
    "niah_single_1": ("noise", "words", "numbers"),
    "niah_multikey_2": ("needle", "words", "numbers"),
    "niah_multikey_3": ("needle", "uuids", "uuids"),
}
VT_HOPS, VT_ICL_NOISE = 4, 5  # RULER: 1 chain of 4 hops; its in-context example, shortened
CWE_WORDS = 10  # RULER's num_cw
# RULER's (common, uncommon) repeats: (6, 1) below 4096 tokens, else freq_cw 30 / freq_ucw 3; its
# one in-context example has 20 words at (3, 1), else 40 at (10, 3).
CWE_SHORT, CWE_LONG = ((6, 1), (20, 3, 1)), ((30, 3), (40, 10, 3))
MIN_SIZE = {"vt": VT_HOPS + 1, "cwe": CWE_WORDS + 1}  # haystack units: the chain's lines; one uncommon word


@dataclass(frozen=True)
class Sample:
    user: str  # the instruction, the context and the question
    prefix: str  # the answer's start, pre-filled in the assistant turn
    refs: tuple[str, ...]  # every one must occur in the answer
    meta: dict


@cache
def word_lists() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """wonderwords' nouns, adjectives and verbs, as RULER reads them; entries that are not one
    lowercase ASCII word ("ATM", "ice cream") are left out so keys and answers stay single words."""
    from wonderwords.random_word import _get_words_from_text_file as read

    def clean(name: str) -> tuple[str, ...]:
        return tuple(sorted({w for w in read(name) if w.isascii() and w.isalpha() and w.islower()}))

    return clean("nounlist.txt"), clean("adjectivelist.txt"), clean("verblist.txt")


@cache
def cwe_pool() -> tuple[str, ...]:
    """RULER's cwe words: nouns, adjectives and verbs together."""
    nouns, adjs, verbs = word_lists()
    return tuple(sorted(set(nouns + adjs + verbs)))


def _draw(rng: random.Random, kind: str) -> str:
    """RULER's generate_random: an adjective-noun key, a 7-digit number or a UUID."""
    if kind == "words":
        nouns, adjs, _ = word_lists()
        return f"{rng.choice(adjs)}-{rng.choice(nouns)}"
    if kind == "numbers":
        return str(rng.randint(10**6, 10**7 - 1))
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def depth_of(j: int) -> float:
    """The j-th needle depth of a cell: 1/2, 1/4, 3/4, 1/8, ... (van der Corput), so any n items
    spread over the context and growing n only adds depths."""
    d, base, k = 0.0, 0.5, j + 1
    while k:
        d, k, base = d + base * (k & 1), k >> 1, base / 2
    return d


def niah(subtask: str, rng: random.Random, size: int, depth: float) -> Sample:
    """One needle at `depth` among `size` noise blocks or distractor needles (other keys, other values)."""
    haystack, kind_k, kind_v = NIAH[subtask]
    key, value = _draw(rng, kind_k), _draw(rng, kind_v)
    if haystack == "noise":
        lines = [NOISE] * size
    else:
        lines = []
        while len(lines) < size:
            k, v = _draw(rng, kind_k), _draw(rng, kind_v)
            if k != key and v != value:  # the asked key and its value occur once
                lines.append(NEEDLE.format(type_v=kind_v, key=k, value=v))
    at = round(depth * size)
    lines.insert(at, NEEDLE.format(type_v=kind_v, key=key, value=value))
    # one needle, one value: RULER's singular rewrite of the template
    singular = lambda t: t.replace("Some", "A").replace("are all", "is").replace("are", "is")
    user = singular(NIAH_TEMPLATE).format(type_v=kind_v[:-1], context="\n".join(lines), query=key)
    prefix = singular(NIAH_PREFIX).format(type_v=kind_v[:-1], query=key)
    return Sample(user, prefix, (value,), {"key": key, "depth": depth, "needle_line": at, "lines": size + 1})


def _names(rng: random.Random, n: int, k: int, avoid: str) -> list[str]:
    """n distinct k-letter variable names that no fixed text of the prompt contains."""
    out: list[str] = []
    while len(out) < n:
        name = "".join(rng.choices(string.ascii_uppercase, k=k))
        if name not in out and name.lower() not in avoid:
            out.append(name)
    return out


def _chain_text(rng: random.Random, names: list[str], value: int, noise: int) -> str:
    """RULER's noise haystack with one chain `VAR A = value`, `VAR B = VAR A `, ... in order at
    random lines."""
    chain = [f"VAR {names[0]} = {value}"] + [f"VAR {b} = VAR {a} " for a, b in zip(names, names[1:])]
    lines = [NOISE] * noise
    for j, at in enumerate(sorted(rng.sample(range(noise), len(chain)))):
        lines.insert(at + j, chain[j])
    return "\n".join(lines)


def vt(rng: random.Random, size: int) -> Sample:
    """Variable tracking: which variables hold `value` through a chain of VT_HOPS assignments,
    after one solved example with 3-letter names (RULER's in-context example)."""
    avoid = (NOISE + VT_TEMPLATE + VT_PREFIX).lower()
    names = _names(rng, VT_HOPS + 1, 5, avoid)
    icl_names = _names(rng, VT_HOPS + 1, 3, avoid)
    value = rng.randrange(10000, 99999)
    icl_value = value
    while icl_value == value:
        icl_value = rng.randrange(10000, 99999)
    icl = (
        VT_TEMPLATE.format(context=_chain_text(rng, icl_names, icl_value, VT_ICL_NOISE), query=icl_value)
        + VT_PREFIX.format(num_v=VT_HOPS + 1, query=icl_value)
        + " "
        + " ".join(icl_names)
        + "\n"
    )
    user = icl + "\n" + VT_TEMPLATE.format(context=_chain_text(rng, names, value, size), query=value)
    return Sample(
        user,
        VT_PREFIX.format(num_v=VT_HOPS + 1, query=value),
        tuple(names),
        {"value": value, "lines": size + VT_HOPS + 1},
    )


def _word_list(words: list[str], common: int, uncommon: int, rng: random.Random) -> str:
    cw, ucw = words[:CWE_WORDS], words[CWE_WORDS:]
    listed = cw * common + ucw * uncommon
    rng.shuffle(listed)
    return " ".join(f"{i + 1}. {w}" for i, w in enumerate(listed))


def cwe(rng: random.Random, size: int, context_tokens: int) -> Sample:
    """Common words: `size` distinct words, the first CWE_WORDS repeated most, after one solved
    example on other words. No answer word is part of another listed word or of the instruction,
    so finding it in the answer means the model named it."""
    (common, uncommon), (ex_n, ex_c, ex_u) = CWE_SHORT if context_tokens < 4096 else CWE_LONG
    pool = list(cwe_pool())
    if size + ex_n > len(pool):
        raise ValueError(
            f"ruler cwe: {context_tokens} tokens need {size + ex_n} distinct words; the word list holds {len(pool)}"
        )
    rng.shuffle(pool)
    fixed = (CWE_TEMPLATE + CWE_PREFIX).lower()
    answer = []
    for w in pool:  # the answer words first: none inside another, none in the instruction
        if len(answer) < CWE_WORDS and w not in fixed and all(w not in a and a not in w for a in answer):
            answer.append(w)
    rest = [w for w in pool if w not in answer and not any(a in w for a in answer)]
    if len(rest) < size - CWE_WORDS + ex_n:
        raise ValueError(
            f"ruler cwe: {context_tokens} tokens need {size + ex_n} distinct words; {len(rest) + CWE_WORDS} are usable"
        )
    words, example = answer + rest[: size - CWE_WORDS], rest[size - CWE_WORDS : size - CWE_WORDS + ex_n]
    icl = (
        CWE_TEMPLATE.format(context=_word_list(example, ex_c, ex_u, rng))
        + CWE_PREFIX
        + " "
        + " ".join(f"{i + 1}. {w}" for i, w in enumerate(example[:CWE_WORDS]))
    )
    user = icl + "\n" + CWE_TEMPLATE.format(context=_word_list(words, common, uncommon, rng))
    return Sample(user, CWE_PREFIX, tuple(answer), {"words": size, "repeats": [common, uncommon]})


def _family(subtask: str) -> str:
    return "niah" if subtask.startswith("niah") else subtask


def sample(subtask: str, key: str, size: int, context_tokens: int, depth: float) -> Sample:
    """The item's content at haystack size `size`; its own seeded RNG, so only the haystack
    changes with `size` (the needle, chain and answer words are drawn first)."""
    rng = random.Random(key)
    if subtask in NIAH:
        return niah(subtask, rng, size, depth)
    if subtask == "vt":
        return vt(rng, size)
    return cwe(rng, size, context_tokens)


def fit(
    make: Callable[[int], Sample], budget: int, count: Callable[[str], int], smallest: int, what: str
) -> tuple[Sample, int]:
    """The largest haystack found whose prompt counts at most `budget` tokens, and its count: a
    secant step from two sizes, then corrected (counts may jump with the drawn content)."""

    def measure(n: int) -> tuple[Sample, int]:
        s = make(n)
        return s, count(s.user) + count(s.prefix)

    small, m0 = measure(smallest)
    if m0 > budget:
        raise ValueError(
            f"{what}: even the smallest haystack takes {m0} tokens; the length leaves {budget} "
            f"for the prompt (it also holds {CHAT_TEMPLATE_TOKENS} for the chat template and the "
            f"answer's max_tokens)"
        )
    probe = smallest + 32
    m1 = measure(probe)[1]
    slope = max((m1 - m0) / (probe - smallest), 1e-6)
    best, best_n, best_m = small, smallest, m0
    n = smallest + int((budget - m0) / slope)
    for _ in range(8):
        if n <= best_n:
            break
        s, m = measure(n)
        if m <= budget:
            best, best_n, best_m = s, n, m
            step = int((budget - m) / slope)
            if step < 1:
                break
            n += step
        else:
            n = max(best_n, n - max(1, math.ceil((m - budget) / slope)))
    return best, best_m


def ruler_items(
    context_tokens: Sequence[int] = CONTEXT_TOKENS,
    subtasks: Sequence[str] = SUBTASKS,
    per_cell: int = 1,
    seed: int = 0,
    count_tokens: Callable[[str], int] | None = None,
    max_tokens: int | None = None,
) -> list[QualityItem]:
    """per_cell items for every (subtask, length), chat prompts with the answer prefix pre-filled.
    Each request (prompt, chat template allowance and answer) fits its length when `count_tokens`
    is the server's tokenizer; without one, lengths are guessed from characters. `max_tokens`:
    one limit for every subtask instead of RULER's own."""
    if per_cell < 1:
        raise ValueError(f"ruler per_cell: {per_cell} must be >= 1")
    for t in subtasks:
        if t not in SUBTASKS:
            raise ValueError(f"ruler subtasks: {t!r} is not one; allowed: {', '.join(SUBTASKS)}")
    for L in context_tokens:
        if L < 256:
            raise ValueError(f"ruler context_tokens: {L} must be >= 256")
    items = []
    for t in subtasks:
        cpt = CHARS_PER_TOKEN[t]
        count = count_tokens or (lambda s, cpt=cpt: math.ceil(len(s) / cpt))
        out_tokens = max_tokens or MAX_TOKENS[_family(t)]
        for L in context_tokens:
            budget = L - CHAT_TEMPLATE_TOKENS - out_tokens
            for j in range(per_cell):
                # A string seed hashes the same in every process (random.seed version 2).
                key, depth = f"ruler-{seed}-{t}-{L}-{j}", depth_of(j)
                s, measured = fit(
                    lambda n: sample(t, key, n, L, depth), budget, count, MIN_SIZE.get(t, 1), f"ruler {t} at {L} tokens"
                )
                items.append(
                    QualityItem(
                        item_id=f"ruler/{t}/L{L}/{j}",
                        task=TASK,
                        variant=VARIANT,
                        target=json.dumps({"refs": list(s.refs), "prefix": s.prefix.strip()}),
                        messages=(("user", s.user), ("assistant", s.prefix.strip())),
                        max_tokens=out_tokens,
                        meta={
                            "subtask": t,
                            "context_tokens": L,
                            "prompt_tokens": measured,
                            **s.meta,
                            "length_method": "tokenizer" if count_tokens else f"{cpt} chars/token",
                        },
                    )
                )
    return items


def references(target: str) -> tuple[list[str], str]:
    d = json.loads(target)
    return list(d["refs"]), d.get("prefix", "")


def answer_text(output: str, prefix: str) -> str:
    """RULER's postprocess_pred (control characters to newlines, stripped), less the pre-filled
    prefix that llama.cpp returns in front of the continuation."""
    text = re.sub(r"[\x00-\x1f]", "\n", output.strip()).strip()
    return text[len(prefix) :] if prefix and text.startswith(prefix) else text


def string_match_all(output: str, refs: Sequence[str]) -> float:
    """RULER's string_match_all for one item: the share of references found, case-insensitive."""
    low = output.lower()
    return sum(r.lower() in low for r in refs) / len(refs)


def score_ruler(output: str, target: str) -> tuple[str, str, bool, bool]:
    """Extracted: one bit per reference ("1" found). Strict: all found (string_match_all = 1).
    Flexible: any found (RULER's string_match_part)."""
    refs, prefix = references(target)
    low = answer_text(output, prefix).lower()
    bits = "".join("1" if r.lower() in low else "0" for r in refs)
    return bits, bits, "0" not in bits, "1" in bits


def partial(r: QualityRecord) -> float:
    """string_match_all of a saved record (0 for a failed request)."""
    bits = r.extracted_strict
    return 0.0 if r.error is not None or not bits or bits == INVALID else bits.count("1") / len(bits)


def ruler_summary(records: Sequence[QualityRecord]) -> dict:
    """Strict pass rate (Wilson interval) and mean string_match_all per (subtask, length), and overall."""
    cells: dict[tuple[str, int], list[QualityRecord]] = defaultdict(list)
    for r in records:
        if r.task == TASK:
            cells[(str(r.meta["subtask"]), int(r.meta["context_tokens"]))].append(r)
    if not cells:
        return {}
    order = {t: i for i, t in enumerate(SUBTASKS)}

    def part(rs: list[QualityRecord]) -> dict:
        return {
            "strict": score_bools(r.correct_strict for r in rs).to_dict(),
            "string_match_all": sum(map(partial, rs)) / len(rs),
        }

    every = [r for rs in cells.values() for r in rs]
    return {
        "ruler_cells": [
            {"subtask": t, "context_tokens": L, **part(cells[(t, L)])}
            for t, L in sorted(cells, key=lambda c: (order.get(c[0], 99), c[1]))
        ],
        "ruler_overall": part(every),
    }
