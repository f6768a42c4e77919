"""Workloads that say what they share: descriptors, presets, their requests' blocks, Mooncake-format traces."""

from __future__ import annotations

import json

import pytest

from pareto_atlas.spec.sharing import PRESETS, Sharing, block_ids, requests, sharing
from pareto_atlas.spec.study import StudyError, study_from_dict
from pareto_atlas.spec.trace import HASH_BLOCK_TOKENS, TraceError, load_trace


def _study(wl: dict):
    return study_from_dict({"name": "x", "model": {"name": "m"}, "workload": wl})


@pytest.mark.parametrize(
    "share, needle",
    [
        ({"prefix_tokens": 128}, "share.prefix_tokens: 128 is not allowed: fewer than the prompt's 128"),
        ({"turns": 0}, "share.turns: 0 is not allowed"),
        ({"groups": 0}, "share.groups: 0 is not allowed"),
        ("nope", "shipped: system-prompt, agent-shared-preamble, chat-multiturn"),
        ({"prefix_share": 1.0}, "share.prefix_share: 1.0 is not allowed"),
        ({"color": 1}, "share.color: unknown field"),
    ],
)
def test_bad_descriptor_is_one_line_naming_the_field(share, needle):
    with pytest.raises(StudyError) as e:
        _study({"prompt_tokens": 128, "share": share})
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_turns_must_fit_the_context():
    with pytest.raises(StudyError, match="a session's last turn"):
        _study({"prompt_tokens": 512, "output_tokens": 128, "share": {"turns": 8}})


def test_presets_resolve_against_the_prompt():
    for name in PRESETS:
        s = _study({"prompt_tokens": 128, "output_tokens": 16, "share": name}).workload.sharing()
        assert 0 < s.prefix_tokens < 128
    assert _study({"prompt_tokens": 128, "share": "chat-multiturn"}).workload.sharing().turns == 4


def test_shared_prefix_blocks_are_equal_and_the_rest_unique():
    s = Sharing(prefix_tokens=64, groups=2)
    r = requests(s, 128, 16, 6, 1, 16)
    assert r.prompt == (128,) * 6
    # the prefix's 4 blocks: equal within a group, different across groups; every later block unique
    assert r.blocks[0][:4] == r.blocks[2][:4] != r.blocks[1][:4]
    assert r.blocks[0][4] != r.blocks[2][4]
    tails = [b for bl in r.blocks for b in bl[4:]]
    assert len(tails) == len(set(tails))


def test_a_turn_resends_its_history():
    s = Sharing(prefix_tokens=32, turns=3)
    r = requests(s, 96, 32, 6, 2, 16)
    # two sessions side by side: turn 0 of both, then turn 1 of both, ...
    assert list(zip(r.session, r.turn)) == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]
    assert r.prompt == (96, 96, 96 + 32 + 64, 96 + 32 + 64, 96 + 2 * 96, 96 + 2 * 96)
    # turn 1's prompt starts with all of turn 0's blocks (its prompt and its answer)
    n0 = (96 + 32) // 16
    assert r.blocks[2][:n0] == r.blocks[0][:n0]
    assert r.blocks[3][:2] == r.blocks[0][:2] and r.blocks[3][2] != r.blocks[0][2]


def test_block_ids_chain_on_what_came_before():
    a = block_ids([("x", 16), ("y", 16)], 16)
    b = block_ids([("z", 16), ("y", 16)], 16)
    assert a[1] != b[1]  # same tokens after a different prefix are not the same block


def test_sharing_none_and_direct():
    assert sharing(None, 10) is None
    with pytest.raises(ValueError, match="share.prefix_tokens"):
        sharing(Sharing(prefix_tokens=10), 10)


def _mooncake(tmp_path, rows):
    p = tmp_path / "mc.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows))
    return p


def test_mooncake_rows_name_their_blocks(tmp_path):
    p = _mooncake(
        tmp_path,
        [
            {"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [1, 2]},
            {"timestamp": 1500, "input_length": 513, "output_length": 5, "hash_ids": [1, 3]},
        ],
    )
    rows = load_trace(p)
    assert rows[1].arrival_s == pytest.approx(1.5)  # milliseconds in that format
    assert rows[0].hash_ids == (1, 2) and rows[1].prompt_tokens == 513


@pytest.mark.parametrize(
    "ids, needle",
    [
        ([1], "1 block ids is not allowed: the prompt's 1000 tokens are 2 block"),
        ([1, "a"], "a list of integer block ids"),
        ([1, -2], "a list of integer block ids"),
    ],
)
def test_a_block_list_that_does_not_match_the_length(tmp_path, ids, needle):
    p = _mooncake(
        tmp_path,
        [
            {"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": ids},
            {"timestamp": 1, "input_length": 10, "output_length": 10, "hash_ids": [7]},
        ],
    )
    with pytest.raises(TraceError, match="line 1: hash_ids") as e:
        load_trace(p)
    assert needle in str(e.value)
    assert HASH_BLOCK_TOKENS == 512


def test_trace_with_hash_ids_shares_and_excludes_share(tmp_path):
    p = _mooncake(
        tmp_path,
        [
            {"timestamp": 0, "input_length": 100, "output_length": 10, "hash_ids": [1]},
            {"timestamp": 9, "input_length": 100, "output_length": 10, "hash_ids": [1]},
        ],
    )
    assert _study({"trace": str(p)}).workload.shares()
    with pytest.raises(StudyError, match="share: a trace states"):
        _study({"trace": str(p), "share": "system-prompt"})


def _study_arms(arms):
    return study_from_dict(
        {
            "name": "x",
            "model": {"name": "m"},
            "workload": {"prompt_tokens": 256, "share": "system-prompt"},
            "arms": arms,
        }
    )


def test_arms_measure_their_own_sharing_level():
    from pareto_atlas.simulate.stage import measured_workloads

    s = _study_arms([{"name": "a", "prefix_cache": True}, {"name": "b", "share": {"prefix_tokens": 200}}])
    wls = {w.name: w.share for w in measured_workloads(s)}
    assert wls == {"chat-128-32": Sharing(prefix_tokens=128), "p256-n32-prefix200": Sharing(prefix_tokens=200)}
    with pytest.raises(StudyError, match=r"arms\.b\.share\.prefix_tokens: 300 is not allowed"):
        _study_arms([{"name": "b", "share": {"prefix_tokens": 300}}])


def test_anchor_ids_of_studies_that_share_nothing_are_unchanged():
    from pareto_atlas.measure.campaign import workload_ident

    assert "share" not in workload_ident(_study({"prompt_tokens": 128}).workload)
    assert workload_ident(_study({"prompt_tokens": 128, "share": "system-prompt"}).workload)["share"] == "system-prompt"


def test_the_prompt_cache_follows_the_knob_and_unbuilt_measurements_say_so(tmp_path):
    from pareto_atlas.measure.campaign import anchor_prompts, request_extra
    from pareto_atlas.spec.knobs import Knobs

    assert request_extra({"cache_prompt": False}, "llamacpp", Knobs()) == {"cache_prompt": False}
    assert request_extra({"cache_prompt": False}, "llamacpp", Knobs(prefix_cache=True)) == {"cache_prompt": True}
    wl = _study({"prompt_tokens": 256, "share": "chat-multiturn"}).workload
    with pytest.raises(ValueError, match="share.turns = 4: sessions of several turns are simulated, not yet measured"):
        anchor_prompts(None, wl, 256, 4, 0)
    trace = _mooncake(
        tmp_path,
        [
            {"timestamp": 0, "input_length": 100, "output_length": 10, "hash_ids": [1]},
            {"timestamp": 9, "input_length": 600, "output_length": 10, "hash_ids": [1, 2]},
        ],
    )
    traced = _study({"trace": str(trace)}).workload
    with pytest.raises(ValueError, match="a trace with hash_ids needs each sent request's blocks"):
        anchor_prompts(None, traced, [100, 600], None, 0, blocks=[(1,)])


def test_a_gzipped_trace_reads_as_its_plain_twin(tmp_path):
    import gzip

    from pareto_atlas.spec.trace import resolve_trace, trace_name

    rows = [
        {"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [1, 2]},
        {"timestamp": 1500, "input_length": 513, "output_length": 5, "hash_ids": [1, 3]},
    ]
    plain = _mooncake(tmp_path, rows)
    gz = tmp_path / "mc2.jsonl.gz"
    gz.write_bytes(gzip.compress(("# a comment\n" + plain.read_text()).encode()))
    assert load_trace(gz) == load_trace(plain)
    assert trace_name(resolve_trace(str(gz))) == "mc2"
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(TraceError, match="bad.jsonl.gz: cannot read"):
        load_trace(bad)


def test_the_shipped_mooncake_trace_is_the_whole_conversation_trace():
    from pareto_atlas.spec.trace import shipped_traces, trace_rows

    assert "mooncake_conversation" in shipped_traces()
    rows = trace_rows("mooncake_conversation")
    head = trace_rows("mooncake_conversation_head")
    # kvcache-ai/Mooncake conversation_trace.jsonl at 3b5a594: 12,031 rows over 58.9 minutes; the head is its start
    assert len(rows) == 12031 and 3500 < rows[-1].arrival_s < 3600
    assert rows[: len(head)] == head and all(r.hash_ids for r in rows)
