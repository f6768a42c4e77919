"""RULER's synthetic tasks: deterministic items whose answers are really (and only) in the context,
requests that fit their length, string_match_all scoring and the per-cell summary, and the wiring
as a study's quality task."""

from __future__ import annotations

import re
import uuid
from collections import Counter

import pytest

from pareto_atlas.quality import ruler as R
from pareto_atlas.quality.campaign import qrun_id, study_items, with_task
from pareto_atlas.quality.records import QualityRecord
from pareto_atlas.quality.scoring import rescore, scorer_for, task_extras
from pareto_atlas.quality.stats import score_bools
from pareto_atlas.spec.study import QualitySpec, Study, load_study

STUDY = load_study("tiny")
words = lambda s: len(s.split())  # a toy tokenizer: one token per whitespace-separated word
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def one(subtask: str, L: int = 1024, j: int = 0, seed: int = 0, count=words):
    return R.ruler_items((L,), (subtask,), per_cell=j + 1, seed=seed, count_tokens=count)[j]


def user(it) -> str:
    return it.messages[0][1]


def refs(it) -> list[str]:
    return R.references(it.target)[0]


def test_items_are_deterministic_with_stable_distinct_ids():
    a = R.ruler_items((512, 1024), per_cell=2, seed=3, count_tokens=words)
    b = R.ruler_items((512, 1024), per_cell=2, seed=3, count_tokens=words)
    assert [x.messages for x in a] == [x.messages for x in b] and [x.target for x in a] == [x.target for x in b]
    ids = [x.item_id for x in a]
    assert len(ids) == len(set(ids)) == len(R.SUBTASKS) * 2 * 2 and "ruler/vt/L1024/1" in ids
    assert a[0].task == a[0].variant == "ruler" and a[0].messages[1][0] == "assistant"
    assert user(R.ruler_items((512,), per_cell=1, seed=4, count_tokens=words)[0]) != user(a[0])


def test_niah_single_1_holds_one_needle_in_digit_free_noise():
    for j in range(4):
        it = one("niah_single_1", j=j)
        (value,) = refs(it)
        key = it.meta["key"]
        assert re.fullmatch(r"[1-9][0-9]{6}", value) and re.fullmatch(r"[a-z]+-[a-z]+", key)
        assert re.findall(r"[0-9]+", user(it)) == [value]  # the value once, no other digits
        assert user(it).count(f"One of the special magic numbers for {key} is: {value}.") == 1
        assert set(user(it).splitlines()[1:-1]) == {R.NOISE, f"One of the special magic numbers for {key} is: {value}."}
        assert it.messages[1][1] == f"The special magic number for {key} mentioned in the provided text is"
        assert user(it).startswith("A special magic number is hidden") and user(it).endswith("provided text?")
    depths = [one("niah_single_1", j=j).meta["depth"] for j in range(4)]
    assert depths == [0.5, 0.25, 0.75, 0.125]
    lines = [user(one("niah_single_1", j=j)).splitlines() for j in (1, 0, 2)]  # depth 1/4, 1/2, 3/4
    at = [next(i for i, ln in enumerate(ls) if ln.startswith("One of")) / len(ls) for ls in lines]
    assert at[0] < at[1] < at[2] and abs(at[1] - 0.5) < 0.05


@pytest.mark.parametrize("subtask, kind", [("niah_multikey_2", r"[a-z]+-[a-z]+"), ("niah_multikey_3", UUID_RE.pattern)])
def test_multikey_hides_the_key_among_needles_of_other_keys(subtask, kind):
    it = one(subtask, L=2048)
    (value,) = refs(it)
    key = it.meta["key"]
    needles = [ln for ln in user(it).splitlines() if ln.startswith("One of the special magic")]
    assert len(needles) == it.meta["lines"] > 20  # the haystack is needles
    pairs = [re.fullmatch(r"One of the special magic \w+ for (\S+) is: (\S+)\.", ln).groups() for ln in needles]
    assert all(re.fullmatch(kind, k) for k, _ in pairs)
    assert [k for k, _ in pairs].count(key) == 1 and [v for _, v in pairs].count(value) == 1
    assert (key, value) in pairs and user(it).count(value) == 1
    if subtask == "niah_multikey_3":
        assert UUID_RE.fullmatch(value) and str(uuid.UUID(value)) == value


def _task_part(text: str, head: str) -> str:
    return text[text.rindex(head) :]  # after the solved in-context example


def test_vt_answer_is_exactly_the_chain():
    for j in range(3):
        it = one("vt", j=j)
        names, value = refs(it), it.meta["value"]
        part = _task_part(user(it), "Memorize and track")
        held: dict[str, str] = {}
        for a, b in re.findall(r"^VAR ([A-Z]+) = (VAR [A-Z]+|[0-9]+) ?$", part, re.M):
            held[a] = held[b[4:]] if b.startswith("VAR ") else b
        assert sorted(n for n, v in held.items() if v == str(value)) == sorted(names) and len(names) == 5
        assert len(held) == 5 and all(re.fullmatch(r"[A-Z]{5}", n) for n in names)
        assert f"5 variables are assigned the value {value}" in it.messages[1][1]
        # the example before it tracks other names and another value
        example = user(it)[: user(it).rindex("Memorize and track")]
        assert str(value) not in example and not any(n in example for n in names)
        assert all(n.lower() not in (R.NOISE + R.VT_TEMPLATE).lower() for n in names)


@pytest.mark.parametrize("L, margin", [(1024, 5), (4096, 27)])
def test_cwe_answer_words_are_the_ten_most_common_with_a_margin(L, margin):
    it = one("cwe", L=L)
    part = _task_part(user(it), "Below is a numbered list")
    listed = re.findall(r"(\d+)\. ([a-z]+)", part)
    assert [int(i) for i, _ in listed] == list(range(1, len(listed) + 1))
    counts = Counter(w for _, w in listed)
    answer = refs(it)
    assert len(answer) == 10 and {w for w, _ in counts.most_common(10)} == set(answer)
    assert min(counts[w] for w in answer) - max(c for w, c in counts.items() if w not in answer) >= margin
    others = [w for w in counts if w not in answer]
    assert len(others) > 5
    assert not any(a in w for a in answer for w in counts if w != a)  # no answer word inside another word
    example = user(it)[: user(it).rindex("Below is a numbered list")]
    assert not set(answer) & set(re.findall(r"\d+\. ([a-z]+)", example))


@pytest.mark.parametrize("subtask", R.SUBTASKS)
@pytest.mark.parametrize("L", [1024, 4096])
def test_each_request_fits_its_length_and_fills_most_of_it(subtask, L):
    it = one(subtask, L=L)
    used = words(user(it)) + words(it.messages[1][1])
    assert it.meta["prompt_tokens"] == used and it.meta["length_method"] == "tokenizer"
    assert used + R.CHAT_TEMPLATE_TOKENS + it.max_tokens <= L
    slack = {"vt": 30, "niah_single_1": 30, "cwe": 10}.get(subtask, 20)  # one haystack unit at most
    assert used + R.CHAT_TEMPLATE_TOKENS + it.max_tokens > L - slack
    assert it.max_tokens == R.MAX_TOKENS[R._family(subtask)]


def test_without_a_counter_lengths_are_guessed_from_characters():
    for it in R.ruler_items((2048,), per_cell=1):
        text = user(it) + it.messages[1][1]
        assert it.meta["length_method"].endswith("chars/token")
        assert len(text) / R.CHARS_PER_TOKEN[it.meta["subtask"]] <= 2048 - R.CHAT_TEMPLATE_TOKENS - it.max_tokens + 2


def test_bad_arguments_and_too_short_lengths_name_the_field():
    with pytest.raises(ValueError, match="ruler per_cell"):
        R.ruler_items(per_cell=0)
    with pytest.raises(ValueError, match="ruler subtasks: 'qa_1'"):
        R.ruler_items(subtasks=("qa_1",))
    with pytest.raises(ValueError, match="ruler cwe at 512 tokens: even the smallest haystack"):
        R.ruler_items((512,), ("cwe",), count_tokens=lambda s: len(s) // 2)
    with pytest.raises(ValueError, match="ruler context_tokens"):
        R.ruler_items((100,))


VT_TARGET = '{"refs": ["HJXZO", "DWJHI", "VOEPF", "DXWEI", "ZATQL"], "prefix": "Answer: they are:"}'


@pytest.mark.parametrize(
    "out, bits, strict, flexible",
    [
        (" HJXZO DWJHI VOEPF DXWEI ZATQL", "11111", True, True),
        ("Answer: they are: zatql, dxwei, voepf, dwjhi and hjxzo.", "11111", True, True),  # case, order, prefix
        (" HJXZO DWJHI VOEPF", "11100", False, True),
        (" HJX\x00ZO", "00000", False, False),  # a control char splits it
        (" none of them", "00000", False, False),
    ],
)
def test_string_match_all_on_written_answers(out, bits, strict, flexible):
    assert R.score_ruler(out, VT_TARGET) == (bits, bits, strict, flexible)
    assert R.string_match_all(out, R.references(VT_TARGET)[0]) == pytest.approx(bits.count("1") / 5)


def test_the_pre_filled_prefix_is_not_counted_as_an_answer():
    target = '{"refs": ["list", "paper"], "prefix": "Answer: The top 10 words that appear most often in the list are:"}'
    prefilled = "Answer: The top 10 words that appear most often in the list are: 1. paper 2. pen"
    assert R.score_ruler(prefilled, target)[0] == "01"  # "list" is only in the prefix
    assert R.score_ruler(" 1. paper 2. list", target)[0] == "11"


def _record(it, output: str, error: str | None = None) -> QualityRecord:
    s, f, ok_s, ok_f = scorer_for(it.task, it.variant)(output, it.target, it.stop)
    return QualityRecord(
        item_id=it.item_id,
        task=it.task,
        variant=it.variant,
        prompt_sha256=it.prompt_sha256(),
        target=it.target,
        output=output,
        extracted_strict=s,
        extracted_flexible=f,
        correct_strict=ok_s and error is None,
        correct_flexible=ok_f and error is None,
        latency_s=0.1,
        error=error,
        meta=dict(it.meta),
    )


def test_summary_per_subtask_and_length_with_wilson_intervals():
    items = R.ruler_items((512, 1024), ("niah_single_1", "vt"), per_cell=3, count_tokens=words)
    recs = []
    for it in items:
        rs, prefix = R.references(it.target)
        if it.meta["subtask"] == "vt" and it.meta["context_tokens"] == 1024:
            outs = [" ".join(rs), " ".join(rs[:2]), " ".join(rs[:4])]  # 1 of 3 strict; partial 1, .4, .8
        else:
            outs = [f"{prefix} {' '.join(rs)}.", "no idea", f"{prefix} {' '.join(rs)}"]  # 2 of 3
        recs.append(_record(it, outs[int(it.item_id[-1])]))
    recs[0] = _record(items[0], "", error="HTTPError: down")  # a failed request counts as wrong
    s = task_extras(recs)
    cells = {(c["subtask"], c["context_tokens"]): c for c in s["ruler_cells"]}
    assert list(cells) == [("niah_single_1", 512), ("niah_single_1", 1024), ("vt", 512), ("vt", 1024)]
    vt = cells[("vt", 1024)]
    assert vt["strict"] == score_bools([True, False, False]).to_dict() and vt["strict"]["k"] == 1
    assert vt["string_match_all"] == pytest.approx((1 + 0.4 + 0.8) / 3)
    assert cells[("niah_single_1", 512)]["strict"]["k"] == 1 and cells[("niah_single_1", 1024)]["strict"]["k"] == 2
    assert 0 < vt["strict"]["lo"] < 1 / 3 < vt["strict"]["hi"] < 1
    assert cells[("vt", 512)]["strict"]["k"] == 2 and cells[("vt", 512)]["string_match_all"] == pytest.approx(2 / 3)
    assert s["ruler_overall"]["strict"]["k"] == 1 + 2 + 2 + 1 and s["ruler_overall"]["strict"]["n"] == 12
    run = rescore(recs)
    assert run.summary.strict.k == 6 and [r.extracted_strict for r in run.records[1:]] == [
        r.extracted_strict for r in recs[1:]
    ]


def test_ruler_as_the_study_task():
    st = with_task(STUDY, "ruler")
    q = st.quality
    assert q.ruler_lengths == [1024, 2048] and q.ruler_per_cell == 2 and len(q.ruler_subtasks) == 5
    items = study_items(
        q.model_copy(update={"ruler_lengths": [512], "ruler_subtasks": ["vt", "cwe"]}), count_tokens=words
    )
    assert [it.item_id for it in items] == [
        "ruler/vt/L512/0",
        "ruler/vt/L512/1",
        "ruler/cwe/L512/0",
        "ruler/cwe/L512/1",
    ]
    capped = study_items(
        QualitySpec(task="ruler", ruler_lengths=[1024], ruler_subtasks=["cwe"], max_tokens=40), count_tokens=words
    )
    assert {it.max_tokens for it in capped} == {40}
    arm = STUDY.baseline
    more = st.model_copy(update={"quality": q.model_copy(update={"ruler_per_cell": 3})})
    assert len({qrun_id(st, arm, 10), qrun_id(with_task(STUDY, "retrieval"), arm, 10), qrun_id(more, arm, 10)}) == 3
    assert qrun_id(st, arm, 10) == qrun_id(st, arm, 99)  # n is per cell, carried by ruler_per_cell


def test_study_checks_ruler_lengths():
    d = STUDY.model_dump(exclude_unset=True)
    d["quality"] = {**d.get("quality", {}), "task": "ruler", "ruler_lengths": [1024, 8192]}
    with pytest.raises(
        ValueError, match="the longest ruler_lengths .* = 8192 tokens is not allowed: within engine.n_ctx = 2048"
    ):
        Study.model_validate(d)
    for bad, field in (
        ({"ruler_lengths": [1024, 1024]}, "listed twice"),
        ({"ruler_subtasks": ["qa_1"]}, "ruler_subtasks"),
        ({"ruler_lengths": [256]}, "512.."),
        ({"ruler_per_cell": 0}, "items per subtask and length"),
    ):
        with pytest.raises(ValueError, match=field):
            QualitySpec(task="ruler", **bad)


def test_cli_quality_ruler_n_is_per_cell_in_one_line(tmp_path):
    from typer.testing import CliRunner

    from pareto_atlas.cli import app

    res = CliRunner().invoke(
        app, ["quality", "--study", "tiny", "--out", str(tmp_path), "--task", "ruler", "--n", "all"]
    )
    assert res.exit_code != 0 and "--n: 'all' is not defined for ruler" in " ".join(res.output.split())
