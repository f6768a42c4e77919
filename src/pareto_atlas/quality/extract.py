"""Answer extraction and exact match, pinned to lm-evaluation-harness gsm8k v3.0.

lm-eval's filters (`RegexFilter`): `re.findall`, pick the match at `group_select` (0 = first for
strict-match, -1 = last for flexible-extract), take the first non-empty group of a tuple, strip,
"[invalid]" when nothing matches. `exact_match` then deletes each `regexes_to_ignore` pattern (in
order) from prediction and reference alike, lower-cases both (ignore_case) and compares strings.
"""

from __future__ import annotations

import re

INVALID = "[invalid]"  # lm-eval's fallback when a filter finds nothing
STRICT_RE = re.compile(r"#### (\-?[0-9\.\,]+)")
FLEXIBLE_RE = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")
# Applied in this order, to both sides (gsm8k.yaml metric_list.regexes_to_ignore).
IGNORE_RES = (",", r"\$", r"(?s).*#### ", r"\.$")

# Zero-shot chat answers: "#### 18", "#### $18" or "\boxed{18}"; lm-eval's strict regex rejects
# "#### $18", which instruct models write often, so the chat variant allows an optional "$".
CHAT_MARK_RE = re.compile(
    r"####\s*\\?\$?\s*(\-?[0-9][0-9\.\,]*)|\\boxed\{((?:[^{}]|\{[^{}]*\})*)\}"
)  # one nesting level: \text{..}
NUMBER_RE = re.compile(r"-?[0-9][0-9,]*(?:\.[0-9]+)?")


def regex_filter(text: str, pattern: re.Pattern[str], group_select: int) -> str:
    """lm-eval `RegexFilter.apply` for one response."""
    matches = pattern.findall(text)
    if not matches:
        return INVALID
    match = matches[group_select]
    if isinstance(match, tuple):
        non_empty = [m for m in match if m]
        if not non_empty:
            return INVALID
        match = non_empty[0]
    return match.strip()


def strict_match(text: str) -> str:
    """lm-eval strict-match: the first `#### <number>`."""
    return regex_filter(text, STRICT_RE, 0)


def flexible_extract(text: str) -> str:
    """lm-eval flexible-extract: the last number-like run anywhere."""
    return regex_filter(text, FLEXIBLE_RE, -1)


def normalize(s: str) -> str:
    for pattern in IGNORE_RES:
        s = re.sub(pattern, "", s)
    return s.lower()


def exact_match(prediction: str, reference: str) -> bool:
    """lm-eval `exact_match` with gsm8k's options (regexes_to_ignore, ignore_case)."""
    return normalize(prediction) == normalize(reference)


def truncate_at_stops(text: str, stops: tuple[str, ...] | list[str]) -> str:
    """Cut at the earliest stop sequence, as lm-eval's HF backend does (`s.split(term)[0]`).

    Servers usually stop there already; doing it again makes scoring independent of whether
    the endpoint honoured every stop string.
    """
    for stop in stops:
        if stop:
            text = text.split(stop)[0]
    return text


def chat_final_answer(text: str) -> str:
    """Zero-shot chat strict answer: the last `#### n` or `\\boxed{n}` marker's number.

    The last marker, not the first: chat models restate intermediate results before the final one.
    """
    marks = CHAT_MARK_RE.findall(text)
    if not marks:
        return INVALID
    hashes, boxed = marks[-1]
    if hashes:
        return hashes.strip()
    inner = boxed.replace("\\$", "").replace("$", "").replace("\\!", "").replace("{,}", ",")
    num = NUMBER_RE.search(inner)
    return num.group(0) if num else INVALID


def first_integer(text: str) -> str:
    """First run of digits (for the retrieval task, whose answers are plain integers)."""
    m = re.search(r"[0-9]+", text.replace(",", ""))
    return m.group(0) if m else INVALID


def all_integers(text: str) -> list[str]:
    return re.findall(r"[0-9]+", text.replace(",", ""))
