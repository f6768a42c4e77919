"""Extraction and exact match pinned to lm-evaluation-harness gsm8k v3.0 on crafted outputs."""

from __future__ import annotations

import pytest

from pareto_atlas.quality.extract import (
    INVALID,
    chat_final_answer,
    exact_match,
    flexible_extract,
    normalize,
    strict_match,
    truncate_at_stops,
)
from pareto_atlas.quality.gsm8k import score_gsm8k


@pytest.mark.parametrize(
    "text, expected",
    [
        (" She has 3 + 4 = 7 apples.\n#### 7", "7"),
        ("#### 1,234.", "1,234."),  # the filter keeps separators; exact_match drops them
        ("#### -5\nthen #### 9", "-5"),  # strict takes the FIRST match
        ("The answer is 7.", INVALID),  # no "#### " -> invalid
        ("####7", INVALID),  # lm-eval needs the space
        ("#### $18", INVALID),  # lm-eval's strict regex has no "$"
    ],
)
def test_strict_match(text, expected):
    assert strict_match(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("3 apples and 4 pears make 7 fruits", "7"),  # flexible takes the LAST number
        ("It costs $5.00 in total.", "$5.00"),  # first group: keeps $ and decimals
        ("He walked 12 km, then 3", "3"),  # single digit via the second group
        ("1,234 people", "1,234"),
        ("no numbers here", INVALID),
        ("value -42 and then -7.5", "-7.5"),
    ],
)
def test_flexible_extract(text, expected):
    assert flexible_extract(text) == expected


def test_normalize_applies_lm_eval_ignores_in_order():
    assert normalize("1,234.") == "1234"
    assert normalize("$5") == "5"
    assert normalize("Step 1\n#### 72") == "72"
    assert normalize("5.00") == "5.00"  # only ONE trailing "." is removed, decimals stay


@pytest.mark.parametrize(
    "pred, ref, ok",
    [
        ("1,234.", "Natalia sold 1234 clips.\n#### 1,234", True),
        ("$5.00", "#### 5", False),  # lm-eval: "5.00" != "5" (no numeric comparison)
        ("$5", "#### 5", True),
        ("72", "#### 72", True),
        ("-3", "#### 3", False),
        (INVALID, "#### 72", False),
    ],
)
def test_exact_match(pred, ref, ok):
    assert exact_match(pred, ref) is ok


def test_score_gsm8k_5shot_truncates_at_stop_and_scores_both_filters():
    out = " 2 + 3 = 5 eggs.\n#### 5\n\nQuestion: Another one? Answer: 7 #### 7"
    strict, flexible, ok_s, ok_f = score_gsm8k(out, "5", "lm-eval-5shot")
    assert (strict, flexible, ok_s, ok_f) == ("5", "5", True, True)
    # Without the stop cut, flexible would read the 7 of the hallucinated next question.
    assert flexible_extract(out) == "7"


def test_score_gsm8k_strict_fails_without_hashes_flexible_can_pass():
    strict, flexible, ok_s, ok_f = score_gsm8k(" So the total is 1,234.", "1234", "lm-eval-5shot")
    assert (strict, ok_s) == (INVALID, False)
    assert (flexible, ok_f) == ("1,234.", True)


def test_truncate_at_stops_takes_earliest():
    assert truncate_at_stops("a</s>b Question: c", ("Question:", "</s>")) == "a"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("so 9*2=18.\nThe answer is \\boxed{18}", "18"),
        ("\\boxed{\\$1,250}", "1,250"),
        ("first #### 3 then finally #### $42", "42"),  # chat takes the LAST marker, allows "$"
        ("\\boxed{x = 7 \\text{ apples}}", "7"),
        ("I think it is 5", INVALID),
    ],
)
def test_chat_final_answer(text, expected):
    assert chat_final_answer(text) == expected


def test_score_gsm8k_chat_variant():
    assert score_gsm8k("Total: \\boxed{18}.", "18", "chat-0shot")[2] is True
    assert score_gsm8k("Total: 18 dollars", "18", "chat-0shot")[2:] == (False, True)
