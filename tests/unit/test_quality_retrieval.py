"""Needle retrieval items: deterministic, digit-free haystacks, sized, scored."""

from __future__ import annotations

import re

import pytest

from pareto_atlas.quality import retrieval as r


def test_items_are_deterministic_and_hold_one_needle():
    a = r.retrieval_items((256, 512), (0.0, 0.5, 1.0), per_cell=2, seed=3)
    b = r.retrieval_items((256, 512), (0.0, 0.5, 1.0), per_cell=2, seed=3)
    assert [x.prompt for x in a] == [x.prompt for x in b] and len(a) == 12
    assert r.retrieval_items((256,), (0.5,), seed=4)[0].prompt != a[2].prompt
    for it in a:
        digits = re.findall(r"[0-9]+", it.prompt)
        assert digits == [it.target]  # the only number is the needle's
        assert f"The secret code for {it.meta['name']} is {it.target}." in it.prompt


def test_needle_depth_orders_its_position():
    items = r.retrieval_items((1024,), (0.1, 0.5, 0.9), per_cell=1)
    pos = [it.prompt.index("The secret code") / len(it.prompt) for it in items]
    assert pos[0] < pos[1] < pos[2]


def test_counter_sizes_the_haystack():
    words = lambda s: len(s.split())  # a toy tokenizer: one token per word
    for L in (200, 800):
        it = r.retrieval_items((L,), (0.5,), per_cell=1, count_tokens=words)[0]
        assert abs(it.meta["haystack_tokens"] - L) <= 0.05 * L
        assert it.meta["length_method"] == "tokenizer"


def test_longer_contexts_give_longer_prompts():
    a, b = r.retrieval_items((512, 2048), (0.5,), per_cell=1)
    assert 3 * len(a.prompt) < len(b.prompt)


@pytest.mark.parametrize(
    "out, strict, flex",
    [
        (" 48213.", True, True),
        (" 48,213", True, True),
        (" 12 then 48213", False, True),
        (" unknown", False, False),
    ],
)
def test_score_retrieval(out, strict, flex):
    assert r.score_retrieval(out, "48213")[2:] == (strict, flex)


def test_bad_arguments_name_the_field():
    with pytest.raises(ValueError, match="depths"):
        r.retrieval_items(depths=(1.5,))
    with pytest.raises(ValueError, match="per_cell"):
        r.retrieval_items(per_cell=0)
