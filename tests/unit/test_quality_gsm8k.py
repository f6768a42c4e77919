"""GSM8K data, sampling and the lm-eval 5-shot prompt."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from pareto_atlas.quality import gsm8k as g


def _write(path, docs):
    path.write_text("".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in docs))
    return path


@pytest.fixture
def tiny(tmp_path):
    test = _write(tmp_path / "test.jsonl", [(f"T{i}?", f"work {i}\n#### {i}") for i in range(12)])
    train = _write(tmp_path / "train.jsonl", [(f"Q{i}?", f"step {i}\n#### {i * 10}") for i in range(40)])
    return test, train


def test_prompt_has_exact_lm_eval_format():
    doc = g.GsmDoc("How many?", "x")
    shots = [g.GsmDoc("A?", "1\n#### 1"), g.GsmDoc("B?", "2\n#### 2")]
    assert g.lm_eval_prompt(doc, shots) == (
        "Question: A?\nAnswer: 1\n#### 1\n\nQuestion: B?\nAnswer: 2\n#### 2\n\nQuestion: How many?\nAnswer:"
    )


def test_fewshot_replays_one_shared_generator_in_test_order():
    shots = g.fewshot_indices(30, 7473)
    rnd = random.Random(1234)
    expected = [tuple(rnd.sample(range(7473), 5)) for _ in range(30)]
    assert list(shots) == expected
    assert shots[0] != shots[1]  # not re-seeded per document


def test_fewshot_positions_equal_sampling_the_documents(tiny):
    _, train_path = tiny
    train = g.load_split("train", train_path)
    docs_drawn = random.Random(1234).sample(list(train.docs), 5)
    assert [train.docs[j] for j in g.fewshot_indices(1, len(train.docs))[0]] == docs_drawn


def test_items_are_deterministic_and_use_the_shots_of_their_index(tiny):
    test, train = tiny
    a = g.gsm8k_items(4, test_path=test, train_path=train)
    b = g.gsm8k_items(4, test_path=test, train_path=train)
    assert [x.prompt for x in a] == [x.prompt for x in b]
    it = a[0]
    i = it.meta["index"]
    tr = g.load_split("train", train).docs
    te = g.load_split("test", test).docs
    assert it.prompt == g.lm_eval_prompt(te[i], [tr[j] for j in g.fewshot_indices(12, 40)[i]])
    assert it.prompt.endswith(f"Question: T{i}?\nAnswer:")
    assert it.prompt.count("Question:") == 6 and it.stop == ("Question:", "</s>", "<|im_end|>")
    assert it.target == str(i) and it.max_tokens == 256


def test_sample_is_seeded_sorted_and_nested():
    s10, s20 = g.sample_indices(10, 1319), g.sample_indices(20, 1319)
    assert s10 == sorted(s10) and len(set(s10)) == 10 and set(s10) <= set(s20)
    assert g.sample_indices(10, 1319, seed=1) != s10
    assert g.sample_indices(None, 1319) == list(range(1319))
    with pytest.raises(ValueError, match="n: 0 must be in 1..1319"):
        g.sample_indices(0, 1319)


def test_default_test_split_is_verified_and_complete():
    test = g.load_split("test")
    assert len(test.docs) == g.N_TEST and test.source != "unverified"
    assert test.docs[0].target == "18"


def test_expected_sha_mismatch_is_one_clear_error(tiny):
    test, _ = tiny
    with pytest.raises(g.GsmDataError, match="expected 00"):
        g.load_split("test", test, expected_sha256="00")


def test_train_split_ships_with_the_package_verified_and_complete(tmp_path, monkeypatch):
    monkeypatch.setenv(g.SHARED_DIR_ENV, str(tmp_path / "nowhere"))  # an override without the file
    train = g.load_split("train")
    assert train.path == str(g.PACKAGED_DIR / "train.jsonl.gz")
    assert len(train.docs) == g.N_TRAIN and train.source.startswith("GSM8K train.jsonl")
    assert (g.PACKAGED_DIR / "LICENSE").read_text().startswith("MIT License")  # GSM8K's, shipped beside it


def test_an_override_directory_is_read_and_must_be_a_known_file(tiny, monkeypatch):
    _, train = tiny
    monkeypatch.setenv(g.SHARED_DIR_ENV, str(train.parent))
    with pytest.raises(g.GsmDataError, match="not a known GSM8K train file"):
        g.load_split("train")


def test_missing_train_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv(g.SHARED_DIR_ENV, str(tmp_path / "nowhere"))
    monkeypatch.setattr(g, "PACKAGED_DIR", tmp_path / "nowhere")
    with pytest.raises(g.GsmDataError, match="train split not found.*reinstall"):
        g.load_split("train")
    items = g.gsm8k_items(2, "chat-0shot")  # the chat variant needs only the packaged test split
    assert items[0].messages and "\\boxed{}" in items[0].messages[0][1] and items[0].prompt is None


def test_no_machine_path_in_the_product_or_its_tests():
    root = Path(g.__file__).parents[3]
    machine = re.compile(r"[\"']/(work|home|root|Users|mnt|srv|opt)/")  # a literal absolute path of one machine
    hits = [
        f"{p.relative_to(root)}: {line.strip()}"
        for base in ("src", "tests")
        for p in (root / base).rglob("*.py")
        for line in p.read_text().splitlines()
        if machine.search(line)
    ]
    assert not hits, hits


def test_unknown_variant_lists_allowed():
    with pytest.raises(ValueError, match="lm-eval-5shot, chat-0shot"):
        g.gsm8k_items(2, "cot")
