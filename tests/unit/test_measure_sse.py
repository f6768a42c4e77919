"""SSE parsing: only events carrying generated text count toward TTFT and chunk times."""

from __future__ import annotations

import json

from pareto_atlas.measure.loadgen import parse_sse_line


def data(obj) -> str:
    return "data: " + json.dumps(obj)


def test_role_only_chat_chunk_carries_no_text():
    ev = parse_sse_line(data({"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}]}))
    assert not ev.has_text and ev.usage is None and not ev.done


def test_empty_content_and_empty_text_carry_no_text():
    assert not parse_sse_line(data({"choices": [{"delta": {"content": ""}}]})).has_text
    assert not parse_sse_line(data({"choices": [{"text": "", "finish_reason": "length"}]})).has_text


def test_usage_only_chunk_gives_usage_and_timings_but_no_text():
    ev = parse_sse_line(
        data({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}, "timings": {"prompt_ms": 3.5}})
    )
    assert not ev.has_text
    assert ev.usage == {"prompt_tokens": 5, "completion_tokens": 2}
    assert ev.timings == {"prompt_ms": 3.5}


def test_text_chunks_count_for_completions_chat_and_reasoning():
    assert parse_sse_line(data({"choices": [{"text": " a"}]})).has_text
    assert parse_sse_line(data({"choices": [{"delta": {"content": "b"}}]})).has_text
    assert parse_sse_line(data({"choices": [{"delta": {"reasoning_content": "c"}}]})).has_text


def test_done_comments_keepalives_and_errors():
    assert parse_sse_line("data: [DONE]").done
    for line in ("", ": ping", "event: message", "id: 3", "data:"):
        ev = parse_sse_line(line)
        assert not (ev.has_text or ev.done or ev.error)
    assert "boom" in parse_sse_line('error: {"message": "boom"}').error
    assert parse_sse_line(data({"error": {"message": "context full"}})).error == "context full"
    assert parse_sse_line("data: {not json").error.startswith("unparseable")


def test_no_space_after_colon_is_accepted():
    assert parse_sse_line('data:{"choices":[{"text":"x"}]}').has_text
