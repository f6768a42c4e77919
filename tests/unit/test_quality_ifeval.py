"""IFEval: the real data (checksummed), each checker against responses that follow and break it,
strict vs loose, prompt vs instruction level, and the sentence-count prompts reported apart."""

from __future__ import annotations

import sys

import pytest

from pareto_atlas.quality import ifeval as ie
from pareto_atlas.quality import ifeval_checks as ck
from pareto_atlas.quality.records import QualityRecord
from pareto_atlas.quality.scoring import rescore, task_extras


def test_real_data_541_prompts_checked_and_never_imported(tmp_path):
    prompts = ie.load_prompts()
    assert len(prompts) == ie.N_PROMPTS
    assert sum(ie.SENTENCE_ID in p.instruction_ids for p in prompts) == 46
    assert "eval_framework" not in sys.modules
    bad = tmp_path / "input_data.jsonl"
    bad.write_text('{"key": 1, "prompt": "x", "instruction_id_list": ["made:up"], "kwargs": [{}]}\n')
    with pytest.raises(ie.IfevalDataError, match="sha256"):
        ie.load_prompts(str(bad))
    with pytest.raises(ie.IfevalDataError, match="no checker"):
        ie.load_prompts(str(bad), expected_sha256=None)


CASES = [  # (instruction, kwargs, follows, breaks)
    ("punctuation:no_comma", {}, "No commas here.", "One, two."),
    ("detectable_format:title", {}, "<<Joy>>\nText", "<< >> no title"),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2}, "*one* and **two**", "*one* only"),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "* a\n- b", "* a\n* b\n* c"),
    ("detectable_format:json_format", {}, '```json\n{"a": 1}\n```', "{a: 1}"),
    (
        "detectable_format:multiple_sections",
        {"section_spliter": "SECTION", "num_sections": 2},
        "SECTION 1\nx\nSECTION 2\ny",
        "SECTION 1\nx",
    ),
    ("detectable_format:constrained_response", {}, "My answer is no.", "No."),
    ("combination:two_responses", {}, "A\n******\nB", "A\n******\nA"),
    ("combination:repeat_prompt", {"prompt_to_repeat": "Say hi."}, "say hi. Hi!", "Hi! Say hi."),
    ("detectable_content:number_placeholders", {"num_placeholders": 2}, "[a] and [b]", "[a]"),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Body\nP.S. later", "Body only"),
    ("keywords:existence", {"keywords": ["cat", "dog"]}, "A Cat and a dog.", "A cat."),
    ("keywords:forbidden_words", {"forbidden_words": ["rock"]}, "Rocks are fine.", "I like rock."),
    ("keywords:frequency", {"keyword": "story", "frequency": 2, "relation": "at least"}, "story, story", "story"),
    ("keywords:letter_frequency", {"letter": "z", "let_frequency": 2, "let_relation": "less than"}, "zoo", "zzz"),
    ("length_constraints:number_words", {"num_words": 3, "relation": "less than"}, "two words", "one two three"),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "a\n***\nb", "a\n***\n***\nb"),
    (
        "length_constraints:nth_paragraph_first_word",
        {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "then"},
        "First.\n\n\"Then, more.",
        "First.\n\nAfter that.",
    ),
    (
        "length_constraints:number_sentences",
        {"num_sentences": 3, "relation": "at least"},
        "One. Two! Three?",
        "Dr. Who went home. Done.",
    ),
    (
        "change_case:english_lowercase",
        {},
        "this is all lowercase english text about the weather today",
        "This Has Capitals in english text about the weather",
    ),
    (
        "change_case:english_capital",
        {},
        "THIS IS ALL CAPITAL ENGLISH TEXT ABOUT THE WEATHER TODAY",
        "THIS is not all capital english text",
    ),
    (
        "change_case:capital_word_frequency",
        {"capital_frequency": 2, "capital_relation": "at least"},
        "USE TWO capitals",
        "only ONE",
    ),
    (
        "language:response_language",
        {"language": "de"},
        "Dies ist ein deutscher Satz über das Wetter heute.",
        "This is an English sentence about the weather today.",
    ),
    (
        "startend:end_checker",
        {"end_phrase": "Any other questions?"},
        'Text. Any other questions?"',
        "Any other questions? No.",
    ),
    ("startend:quotation", {}, '"quoted"', 'quoted"'),
]


def test_every_instruction_in_the_data_has_a_case():
    used = {i for p in ie.load_prompts() for i in p.instruction_ids}
    assert used == {c[0] for c in CASES} == set(ck.CHECKERS)


@pytest.mark.parametrize("inst, kwargs, good, bad", CASES, ids=[c[0] for c in CASES])
def test_checker_follows_and_breaks(inst, kwargs, good, bad):
    assert ck.follows(inst, kwargs, good) is True
    assert ck.follows(inst, kwargs, bad) is False


def test_loose_forgives_a_first_line_and_markdown_strict_does_not():
    resp = "Sure, here it is:\n\"quoted answer\""
    assert not ck.follows("startend:quotation", {}, resp)
    assert ck.follows("startend:quotation", {}, resp, loose=True)
    assert ck.follows("keywords:forbidden_words", {"forbidden_words": ["x"]}, "   ", loose=True) is False  # empty


def test_sentence_counter_without_nltk():
    assert ck.count_sentences("Hello there. Mr. Smith went to Washington. It was 3 p.m. on a Tuesday!") == 3
    assert ck.count_sentences("The U.S. grew 2.5 percent. J. K. Rowling wrote it.") == 2
    assert ck.count_sentences("") == 0 and ck.count_sentences("no end punctuation") == 1


def _rec(key: str, output: str) -> QualityRecord:
    s, l, ok_s, ok_l = ie.score_ifeval(output, key)
    return QualityRecord(
        item_id=f"ifeval/{key}",
        task="ifeval",
        variant="ifeval",
        prompt_sha256="x",
        target=key,
        output=output,
        extracted_strict=s,
        extracted_flexible=l,
        correct_strict=ok_s,
        correct_flexible=ok_l,
        latency_s=0.1,
    )


def test_prompt_and_instruction_level_and_sentence_prompts_apart():
    p1001 = ie.prompt_for("1001")  # punctuation:no_comma only
    assert p1001.instruction_ids == ("punctuation:no_comma",)
    sent = next(p for p in ie.load_prompts() if ie.SENTENCE_ID in p.instruction_ids)
    recs = [
        _rec("1001", "No commas at all here."),
        _rec("1000", "short, with a comma"),
        _rec(str(sent.key), "One sentence only"),
    ]
    s = ie.ifeval_summary(recs)
    assert s["prompt_strict"]["n"] == 3 and s["prompt_strict"]["k"] == 1
    assert s["instruction_strict"]["n"] == 1 + 3 + len(sent.instruction_ids)
    assert s["sentence_count"]["n_prompts"] == 1 and s["sentence_count"]["without"]["prompt_strict"]["n"] == 2
    assert rescore(recs).summary.strict.k == 1 and task_extras(recs)["prompt_loose"]["n"] == 3
