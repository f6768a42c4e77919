"""Needle-in-a-haystack retrieval: the long-context check that perplexity cannot replace.

A KV-cache eviction or compression method can keep perplexity on ordinary text almost unchanged
and still lose a fact stated once, far back (seed 000). Each item hides "The secret code for
<name> is <number>." at a relative depth of a digit-free generated haystack and asks for the
number; the only digits in the prompt are the needle's, so any number in the answer came from it.
Everything is a pure function of the seed (and of the token counter, when one is given).
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Callable, Iterator, Sequence

from .extract import INVALID, all_integers, first_integer
from .records import QualityItem, QualityRecord
from .stats import Score, score_bools

VARIANT = "niah"
CONTEXT_TOKENS = (512, 1024, 2048)
DEPTHS = (0.1, 0.5, 0.9)
STOP = ("\n",)
MAX_TOKENS = 12
CHARS_PER_TOKEN = 4.0  # first guess only; refined with the real tokenizer when one is given

NAMES = (
    "Alice",
    "Bruno",
    "Chiara",
    "Dmitri",
    "Elena",
    "Farid",
    "Greta",
    "Hiroshi",
    "Ingrid",
    "Jonas",
    "Kavya",
    "Lukas",
    "Marisol",
    "Nadia",
    "Oskar",
    "Priya",
    "Quentin",
    "Rosa",
    "Stefan",
    "Tamsin",
    "Ulrich",
    "Valeria",
    "Wanjiru",
    "Xavier",
    "Yusuf",
    "Zofia",
)
_SUBJ = (
    "The old farmer",
    "A quiet librarian",
    "The river",
    "Our neighbour",
    "The small dog",
    "A travelling merchant",
    "The wind",
    "My cousin",
    "The baker",
    "A young painter",
    "The committee",
    "The lighthouse keeper",
)
_VERB = (
    "walked past",
    "thought about",
    "painted",
    "forgot",
    "carried",
    "described",
    "repaired",
    "watched",
    "admired",
    "followed",
    "cleaned",
    "measured",
)
_OBJ = (
    "the wooden bridge",
    "a basket of apples",
    "the northern hills",
    "an old letter",
    "the garden wall",
    "a blue umbrella",
    "the empty market",
    "a pile of books",
    "the frozen lake",
    "the narrow street",
)
_TAIL = (
    "before the rain began",
    "in the late afternoon",
    "without saying a word",
    "while the bells rang",
    "as the sun went down",
    "for no clear reason",
    "with great patience",
    "under a grey sky",
)

INTRO = "Below is a long text. Somewhere in it a secret code is mentioned. Remember it.\n\n"


def filler(rng: random.Random) -> Iterator[str]:
    """Endless digit-free sentences."""
    while True:
        yield f"{rng.choice(_SUBJ)} {rng.choice(_VERB)} {rng.choice(_OBJ)} {rng.choice(_TAIL)}."


def _haystack(sentences: list[str], needle: str, depth: float) -> str:
    at = round(depth * len(sentences))
    return " ".join(sentences[:at] + [needle] + sentences[at:])


def build_prompt(
    context_tokens: int,
    depth: float,
    name: str,
    code: str,
    rng: random.Random,
    count_tokens: Callable[[str], int] | None = None,
) -> tuple[str, int | None]:
    """The prompt and its measured haystack length (None without a counter).

    Sentences are drawn once, then the prefix length is chosen so the haystack (needle included)
    is about `context_tokens` long: a chars-per-token guess, corrected twice with the counter.
    """
    needle = f"The secret code for {name} is {code}."
    pool_gen = filler(rng)
    pool = [next(pool_gen) for _ in range(int(context_tokens * 1.5 / 8) + 8)]  # > 1.5x the need
    per_sentence = sum(len(s) + 1 for s in pool) / len(pool) / CHARS_PER_TOKEN
    n = max(1, round(context_tokens / per_sentence))
    measured = None
    if count_tokens is not None:
        for _ in range(2):
            measured = count_tokens(_haystack(pool[:n], needle, depth))
            n = max(1, min(len(pool), round(n * context_tokens / max(1, measured))))
        measured = count_tokens(_haystack(pool[:n], needle, depth))
    question = f"\n\nQuestion: What is the secret code for {name}?\nAnswer: The secret code for {name} is"
    return INTRO + _haystack(pool[:n], needle, depth) + question, measured


def retrieval_items(
    context_tokens: Sequence[int] = CONTEXT_TOKENS,
    depths: Sequence[float] = DEPTHS,
    per_cell: int = 2,
    seed: int = 0,
    count_tokens: Callable[[str], int] | None = None,
) -> list[QualityItem]:
    """per_cell items for every (context length, depth); completion-style prompts for any model."""
    if per_cell < 1:
        raise ValueError(f"retrieval per_cell: {per_cell} must be >= 1")
    for d in depths:
        if not 0.0 <= d <= 1.0:
            raise ValueError(f"retrieval depths: {d} must be in [0, 1]")
    for L in context_tokens:
        if L < 32:
            raise ValueError(f"retrieval context_tokens: {L} must be >= 32")
    items = []
    for L in context_tokens:
        for d in depths:
            for j in range(per_cell):
                # A string seed hashes the same in every process (random.seed version 2).
                rng = random.Random(f"niah-{seed}-{L}-{d:.4f}-{j}")
                name = rng.choice(NAMES)
                code = str(rng.randrange(10000, 100000))
                prompt, measured = build_prompt(L, d, name, code, rng, count_tokens)
                items.append(
                    QualityItem(
                        item_id=f"retrieval/niah/L{L}/d{d:.2f}/{j}",
                        task="retrieval",
                        variant=VARIANT,
                        target=code,
                        prompt=prompt,
                        stop=STOP,
                        max_tokens=MAX_TOKENS,
                        meta={
                            "context_tokens": L,
                            "depth": d,
                            "name": name,
                            "haystack_tokens": measured,
                            "length_method": "tokenizer" if count_tokens else f"{CHARS_PER_TOKEN} chars/token",
                        },
                    )
                )
    return items


def score_retrieval(output: str, target: str) -> tuple[str, str, bool, bool]:
    """Strict: the first integer of the answer is the code. Flexible: the code appears anywhere."""
    text = output.split("\n")[0]
    strict = first_integer(text)
    nums = all_integers(text)
    flexible = target if target in nums else (nums[-1] if nums else INVALID)
    return strict, flexible, strict == target, target in nums


def by_cell(records: Sequence[QualityRecord], strict: bool = True) -> dict[tuple[int, float], Score]:
    """Accuracy per (context length, depth), each with its Wilson interval."""
    cells: dict[tuple[int, float], list[bool]] = defaultdict(list)
    for r in records:
        if r.task == "retrieval":
            cells[(int(r.meta["context_tokens"]), float(r.meta["depth"]))].append(
                r.correct_strict if strict else r.correct_flexible
            )
    return {k: score_bools(v) for k, v in sorted(cells.items())}


def by_length(records: Sequence[QualityRecord], strict: bool = True) -> dict[int, Score]:
    lengths: dict[int, list[bool]] = defaultdict(list)
    for r in records:
        if r.task == "retrieval":
            lengths[int(r.meta["context_tokens"])].append(r.correct_strict if strict else r.correct_flexible)
    return {k: score_bools(v) for k, v in sorted(lengths.items())}
