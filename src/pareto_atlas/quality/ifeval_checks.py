"""IFEval's instruction checkers, written from the definitions of Zhou et al. 2023 ("Instruction-
Following Evaluation for Large Language Models", arXiv 2311.07911; the reference implementation is
google-research `instruction_following_eval/instructions.py`, commit 3f357bde6df14f1eb8b7d27518072b396b7f8a2a,
read for the exact rules, not copied).

Each checker takes the response and the instruction's kwargs and says whether it is followed.
Two rules differ from the reference because they need NLTK's `punkt` data, which no registry
package ships: sentences are counted by `count_sentences` below (terminal punctuation followed by
space and a capital, a digit or a quote, minus common abbreviations and initials) and
capital_word_frequency tokenizes words with a regex (hyphenated and apostrophe words stay one
token, where NLTK's word_tokenize would split "DON'T" into two). Scores say which prompts rest on
these (`NLTK_DEPENDENT`).
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Mapping

NLTK_DEPENDENT = {
    "length_constraints:number_sentences": "sentence count (own splitter, not NLTK punkt)",
    "change_case:capital_word_frequency": "word tokens (regex, not NLTK word_tokenize)",
}
CONSTRAINED = ("My answer is yes.", "My answer is no.", "My answer is maybe.")
ABBREVIATIONS = {
    "mr",
    "mrs",
    "ms",
    "dr",
    "prof",
    "sr",
    "jr",
    "st",
    "vs",
    "etc",
    "e.g",
    "i.e",
    "inc",
    "ltd",
    "co",
    "corp",
    "no",
    "fig",
    "approx",
    "dept",
    "est",
    "u.s",
    "u.k",
    "a.m",
    "p.m",
    "mt",
    "ft",
}
_SENTENCE_END = re.compile(r"""([.!?]+)(["')\]]*)\s+(?=["'(\[]?[A-Z0-9])""")
_WORD = re.compile(r"\w+")


def _compare(actual: int, relation: str, threshold: int) -> bool:
    if relation == "less than":
        return actual < threshold
    if relation == "at least":
        return actual >= threshold
    raise ValueError(f"ifeval relation: {relation!r} is not one of 'less than', 'at least'")


def count_words(text: str) -> int:
    """Runs of word characters (the reference's RegexpTokenizer(r"\\w+"))."""
    return len(_WORD.findall(text))


def count_sentences(text: str) -> int:
    """Sentences without NLTK: a boundary is [.!?] (with closing quotes/brackets) then whitespace
    then a capital, digit or opening quote, unless the word before is a known abbreviation or a
    single-letter initial. Text after the last boundary counts as a sentence if it has a word."""
    count, start = 0, 0
    for m in _SENTENCE_END.finditer(text):
        before = text[start : m.start()].split()
        last = before[-1].lower().rstrip(".") if before else ""
        if m.group(1) == "." and (last in ABBREVIATIONS or (len(last) == 1 and last.isalpha())):
            continue
        if _WORD.search(text[start : m.end()]):
            count += 1
        start = m.end()
    return count + (1 if _WORD.search(text[start:]) else 0)


def _capital_words(text: str) -> int:
    return sum(1 for w in re.findall(r"\w+(?:[-'’]\w+)*", text) if w.isupper())


def _detect(text: str) -> str | None:
    """langdetect's guess (seeded: langdetect is random otherwise); None when it cannot tell,
    which the reference counts as followed."""
    import langdetect
    from langdetect import DetectorFactory

    DetectorFactory.seed = 0
    try:
        return langdetect.detect(text)
    except langdetect.LangDetectException:
        return None


def _highlights(text: str) -> int:
    single = [h for h in re.findall(r"\*[^\n\*]*\*", text) if h.strip("*").strip()]
    double = [h for h in re.findall(r"\*\*[^\n\*]*\*\*", text) if h[2:-2].strip()]
    return len(single) + len(double)


def _paragraphs_by_divider(text: str, n: int) -> bool:
    parts = re.split(r"\s?\*\*\*\s?", text)
    count = len(parts)
    for i, p in enumerate(parts):
        if not p.strip():
            if i in (0, len(parts) - 1):
                count -= 1
            else:
                return False  # an empty paragraph between two dividers
    return count == n


def _nth_paragraph_first_word(text: str, num_paragraphs: int, nth_paragraph: int, first_word: str) -> bool:
    parts = text.split("\n\n")
    count = sum(1 for p in parts if p.strip())
    if nth_paragraph > count:
        return False
    para = parts[nth_paragraph - 1].strip()
    if not para:
        return False
    word = para.split()[0].strip().lstrip("'").lstrip('"')
    word = re.split(r"""[.,?!'"]""", word, maxsplit=1)[0].lower()
    return count == num_paragraphs and word == first_word.lower()


def _postscript(text: str, marker: str) -> bool:
    low = text.lower()
    if marker == "P.P.S":
        pattern = r"\s*p\.\s?p\.\s?s.*$"
    elif marker == "P.S.":
        pattern = r"\s*p\.\s?s\..*$"
    else:
        pattern = r"\s*" + marker.lower() + r".*$"
    return bool(re.findall(pattern, low, flags=re.MULTILINE))


def _json(text: str) -> bool:
    body = text.strip()
    for prefix in ("```json", "```Json", "```JSON", "```"):  # each in turn, as the reference does
        body = body.removeprefix(prefix)
    body = body.removesuffix("```").strip()
    try:
        json.loads(body)
    except ValueError:
        return False
    return True


def _two_responses(text: str) -> bool:
    parts = text.split("******")
    kept = []
    for i, p in enumerate(parts):
        if p.strip():
            kept.append(p.strip())
        elif i not in (0, len(parts) - 1):
            return False
    return len(kept) == 2 and kept[0] != kept[1]


def _sections(text: str, spliter: str, n: int) -> bool:
    return len(re.split(r"\s?" + spliter.strip() + r"\s?\d+\s?", text)) - 1 >= n


def _language(text: str, language: str) -> bool:
    got = _detect(text)
    return got is None or got == language


def _english_case(text: str, upper: bool) -> bool:
    if not (text.isupper() if upper else text.islower()):
        return False
    got = _detect(text)
    return got is None or got == "en"


Checker = Callable[[str, Mapping[str, Any]], bool]
CHECKERS: dict[str, Checker] = {
    "change_case:capital_word_frequency": lambda t, k: _compare(
        _capital_words(t), k["capital_relation"], k["capital_frequency"]
    ),
    "change_case:english_capital": lambda t, k: _english_case(t, upper=True),
    "change_case:english_lowercase": lambda t, k: _english_case(t, upper=False),
    "combination:repeat_prompt": lambda t, k: t.strip().lower().startswith(k["prompt_to_repeat"].strip().lower()),
    "combination:two_responses": lambda t, k: _two_responses(t),
    "detectable_content:number_placeholders": lambda t, k: len(re.findall(r"\[.*?\]", t)) >= k["num_placeholders"],
    "detectable_content:postscript": lambda t, k: _postscript(t, k["postscript_marker"].strip()),
    "detectable_format:constrained_response": lambda t, k: any(o in t.strip() for o in CONSTRAINED),
    "detectable_format:json_format": lambda t, k: _json(t),
    "detectable_format:multiple_sections": lambda t, k: _sections(t, k["section_spliter"], k["num_sections"]),
    "detectable_format:number_bullet_lists": lambda t, k: (
        len(re.findall(r"^\s*\*[^\*].*$", t, flags=re.M)) + len(re.findall(r"^\s*-.*$", t, flags=re.M))
        == k["num_bullets"]
    ),
    "detectable_format:number_highlighted_sections": lambda t, k: _highlights(t) >= k["num_highlights"],
    "detectable_format:title": lambda t, k: any(
        m.lstrip("<").rstrip(">").strip() for m in re.findall(r"<<[^\n]+>>", t)
    ),
    "keywords:existence": lambda t, k: all(re.search(w, t, flags=re.I) for w in k["keywords"]),
    "keywords:forbidden_words": lambda t, k: (
        not any(re.search(r"\b" + w + r"\b", t, flags=re.I) for w in k["forbidden_words"])
    ),
    "keywords:frequency": lambda t, k: _compare(
        len(re.findall(k["keyword"].strip(), t, flags=re.I)), k["relation"], k["frequency"]
    ),
    "keywords:letter_frequency": lambda t, k: _compare(
        t.lower().count(k["letter"].strip().lower()), k["let_relation"], k["let_frequency"]
    ),
    "language:response_language": lambda t, k: _language(t, k["language"]),
    "length_constraints:nth_paragraph_first_word": lambda t, k: _nth_paragraph_first_word(
        t, k["num_paragraphs"], k["nth_paragraph"], k["first_word"]
    ),
    "length_constraints:number_paragraphs": lambda t, k: _paragraphs_by_divider(t, k["num_paragraphs"]),
    "length_constraints:number_sentences": lambda t, k: _compare(count_sentences(t), k["relation"], k["num_sentences"]),
    "length_constraints:number_words": lambda t, k: _compare(count_words(t), k["relation"], k["num_words"]),
    "punctuation:no_comma": lambda t, k: "," not in t,
    "startend:end_checker": lambda t, k: t.strip().strip('"').lower().endswith(k["end_phrase"].strip().lower()),
    "startend:quotation": lambda t, k: len(t.strip()) > 1 and t.strip()[0] == '"' and t.strip()[-1] == '"',
}


def loose_variants(response: str) -> list[str]:
    """The loose score's eight readings: as is, without its first line, its last line or both,
    each also with every '*' removed (markdown emphasis a strict reading would trip on)."""
    lines = response.split("\n")
    cut = [response, "\n".join(lines[1:]).strip(), "\n".join(lines[:-1]).strip(), "\n".join(lines[1:-1]).strip()]
    return cut + [c.replace("*", "") for c in cut]


def follows(instruction_id: str, kwargs: Mapping[str, Any], response: str, loose: bool = False) -> bool:
    try:
        check = CHECKERS[instruction_id]
    except KeyError:
        raise ValueError(
            f"ifeval instruction: {instruction_id!r} is not one of {', '.join(sorted(CHECKERS))}"
        ) from None
    args = {k: v for k, v in kwargs.items() if v is not None}
    texts = loose_variants(response) if loose else [response]
    return any(t.strip() and check(t, args) for t in texts)
