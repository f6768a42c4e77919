"""The runner against a fake OpenAI-compatible server (httpx.MockTransport), and rescore."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from pareto_atlas.quality import gsm8k as g
from pareto_atlas.quality.records import QualityItem, QualityRecord
from pareto_atlas.quality.runner import api_root, arun_items, parse_choice
from pareto_atlas.quality.scoring import rescore


def fake_server(answers: dict[str, str], seen: list[dict], fail_on: str | None = None, track: list | None = None):
    state = {"in_flight": 0}

    async def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append({"path": request.url.path, **body})
        state["in_flight"] += 1
        if track is not None:
            track.append(state["in_flight"])
        await asyncio.sleep(0.01)
        state["in_flight"] -= 1
        key = body.get("prompt") or body["messages"][-1]["content"]
        if fail_on and fail_on in key:
            return httpx.Response(400, json={"error": {"message": "exceeds the available context size"}})
        text = next(v for k, v in answers.items() if k in key)
        content = [{"id": ord(c), "token": c, "logprob": -0.1} for c in text]
        choice = {"index": 0, "finish_reason": "stop", "logprobs": {"content": content}}
        if request.url.path.endswith("chat/completions"):
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        return httpx.Response(
            200, json={"choices": [choice], "usage": {"prompt_tokens": 9, "completion_tokens": len(text)}}
        )

    return httpx.MockTransport(handler)


def items():
    mk = lambda i, q, t: QualityItem(
        item_id=f"gsm8k/test/{i:04d}",
        task="gsm8k",
        variant="lm-eval-5shot",
        target=t,
        prompt=f"Question: {q}\nAnswer:",
        stop=g.STOP,
    )
    return [mk(0, "one", "5"), mk(1, "two", "7"), mk(2, "three", "9"), mk(3, "four", "4")]


def run(its, transport, **kw):
    return asyncio.run(arun_items("http://fake:1/v1", its, transport=transport, **kw))


def test_records_complete_greedy_requests_and_rescore_reproduces():
    seen: list[dict] = []
    answers = {"one": " 2+3=5\n#### 5", "two": " it is 6\n#### 6", "three": " 9 Question: x #### 9", "four": " #### 4"}
    done = []
    saved: list[QualityRecord] = []
    res = run(
        items(),
        fake_server(answers, seen),
        concurrency=2,
        progress=lambda d, n: done.append((d, n)),
        on_record=saved.append,
    )
    assert [r.item_id for r in res.records] == [it.item_id for it in items()]  # item order, not finish order
    assert [r.correct_strict for r in res.records] == [True, False, False, True]
    assert res.records[2].correct_flexible is True  # stop cut, then last number
    assert res.summary.strict.k == 2 and res.summary.n == 4 and res.summary.flexible.k == 3
    r0 = res.records[0]
    assert r0.token_ids == tuple(ord(c) for c in " 2+3=5\n#### 5") and r0.prompt_tokens == 9
    assert r0.prompt_sha256 == items()[0].prompt_sha256() and r0.latency_s > 0
    for body in seen:
        assert body["path"] == "/v1/completions" and body["temperature"] == 0.0 and body["top_k"] == 1
        assert body["stop"] == list(g.STOP) and body["max_tokens"] == 256 and body["seed"] == 1234
    assert done[-1] == (4, 4) and len(saved) == 4
    again = rescore([QualityRecord.from_dict(json.loads(json.dumps(r.to_dict()))) for r in res.records])
    assert again.summary.strict == res.summary.strict and again.records == res.records


def test_concurrency_is_bounded_by_slots():
    track: list[int] = []
    answers = {"": " #### 1"}
    run(items(), fake_server(answers, [], track=track), concurrency=2)
    assert max(track) <= 2


def test_errors_are_kept_as_wrong_answers():
    res = run(items(), fake_server({"": " #### 5"}, [], fail_on="three"))
    bad = res.records[2]
    assert bad.error and "HTTP 400" in bad.error and not bad.correct_strict
    assert res.summary.n_errors == 1 and res.summary.n == 4


def test_chat_items_use_chat_endpoint():
    seen: list[dict] = []
    it = QualityItem(
        item_id="c0", task="gsm8k", variant="chat-0shot", target="18", messages=(("user", "ducks?"),), max_tokens=64
    )
    res = run([it], fake_server({"ducks": "so \\boxed{18}"}, seen))
    assert seen[0]["path"] == "/v1/chat/completions" and seen[0]["logprobs"] is True
    assert res.records[0].correct_strict


def test_parse_legacy_openai_logprobs_has_no_ids():
    text, ids, lps, fin = parse_choice(
        {"choices": [{"text": "a", "finish_reason": "length", "logprobs": {"tokens": ["a"], "token_logprobs": [-0.5]}}]}
    )
    assert (text, ids, lps, fin) == ("a", None, (-0.5,), "length")


def test_base_url_forms_and_bad_arguments():
    assert api_root("http://h:1/v1/") == api_root("http://h:1") == "http://h:1"
    with pytest.raises(ValueError, match="base_url"):
        api_root("h:1")
    with pytest.raises(ValueError, match="concurrency"):
        run(items(), fake_server({}, []), concurrency=0)
