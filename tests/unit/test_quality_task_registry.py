"""The quality-task registry: one module per task (quality.tasks), the shipped ones listed exactly, a new
task added as one module running end to end, and no task name branched on outside its own module."""

from __future__ import annotations

import ast
import asyncio
import json
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import pytest

import pareto_atlas
from pareto_atlas.quality import tasks as registry
from pareto_atlas.quality.campaign import max_tokens_for, qrun_id, study_items, task_mode, with_task
from pareto_atlas.quality.records import QualityItem
from pareto_atlas.quality.runner import arun_items
from pareto_atlas.quality.scoring import rescore, scorer_for, task_extras
from pareto_atlas.quality.tasks import TASKS, Task
from pareto_atlas.spec.study import QualitySpec, StudyError, parse_study
from pareto_atlas.spec.study.tasks import TABLES, TaskTable
from pareto_atlas.stages.progress import task_lines
from pareto_atlas.stages.quality import parse_n

ROOT = Path(pareto_atlas.__file__).parent
SHIPPED = ["gsm8k", "retrieval", "humaneval", "ifeval", "ruler"]
COMMON = {"task", "n", "seed", "max_tokens", "baseline_arm", "floor", "kld_max", "allow_priors"}
COMMON |= {"kld_tokens", "kld", "tasks"}  # the KL stage's and the further tasks': every task's

STUDY = """
name = "s"
[model]
name = "smollm2-135m-instruct"
[[arms]]
name = "a"
weights = "Q4_1"
[quality]
task = "toy"
"""


def test_the_registry_lists_exactly_the_shipped_tasks_one_module_each():
    assert list(TASKS) == SHIPPED and list(TABLES) == SHIPPED
    modules = sorted(p.stem for p in (ROOT / "quality" / "tasks").glob("*.py") if p.stem not in ("__init__", "base"))
    assert modules == sorted(SHIPPED)
    for name, t in TASKS.items():
        assert type(t).__module__ == f"pareto_atlas.quality.tasks.{name}" and t.table is TABLES[name]
        assert t.variants and t.metric and t.published_benchmark


def test_each_quality_field_is_every_tasks_or_one_tasks_own():
    owned = [f for t in TABLES.values() for f in t.fields]
    assert len(owned) == len(set(owned)), "a [quality] field is claimed by two task tables"
    assert set(QualitySpec.model_fields) == COMMON | set(owned)


def test_the_old_per_task_answers_come_from_the_registry():
    """What the campaign and the stages read per task, as they had it in their own tables before."""
    assert {n: t.size for n, t in TASKS.items() if t.size} == {"gsm8k": 1319, "humaneval": 164, "ifeval": 541}
    assert [n for n, t in TASKS.items() if t.sized_by_tokenizer] == ["retrieval", "ruler"]
    assert [n for n, t in TASKS.items() if t.sandbox] == ["humaneval"]
    assert [n for n, t in TABLES.items() if t.evictable] == ["gsm8k", "retrieval", "ruler"]
    modes = {n: task_mode(QualitySpec(task=n)) for n in SHIPPED}
    assert modes == {"gsm8k": "chat-0shot", "retrieval": "niah", "humaneval": "evalplus-chat"} | {
        "ifeval": "ifeval",
        "ruler": "ruler",
    }
    assert task_mode(QualitySpec(task="gsm8k", mode="lm-eval-5shot")) == "lm-eval-5shot"


# --- a new task: one module's worth of code, registered here, run end to end -------------------


def _toy_longest(q: QualitySpec) -> tuple[int, str]:
    return q.max_tokens + 300, "max_tokens + the toy's 300-token prompt"


@dataclass(frozen=True)
class Toy(Task):
    """Echo a word back: exact match strict, case-blind flexible."""

    def items(self, q, n=None, count_tokens=None):
        words = ["alpha", "beta", "gamma", "delta"][: n or q.n]
        return [
            QualityItem(f"toy/{i}", self.name, "echo", w, prompt=f"Say {w}.", max_tokens=self.max_tokens_of(q))
            for i, w in enumerate(words)
        ]

    def score(self, variant, output, target, stop):
        got = output.strip()
        return got, got.lower(), got == target, got.lower() == target

    def summary_extras(self, records):
        return {"toy_lowercase": sum(r.output.strip().islower() for r in records)}

    def summary_lines(self, study, summary):
        return [f"answers in lower case: {summary['toy_lowercase']}"]


TOY = Toy(TaskTable("toy", longest_request=_toy_longest), ("echo",), "exact echo", "toy", size=4, max_tokens=32)


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(TASKS, "toy", TOY)  # what registry.register does, undone after the test
    monkeypatch.setitem(TABLES, "toy", TOY.table)
    return TOY


def _echo_server(answers: dict[str, str]) -> httpx.MockTransport:
    async def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        text = next(v for k, v in answers.items() if k in body["prompt"])
        choice = {"index": 0, "finish_reason": "stop", "text": text, "logprobs": None}
        return httpx.Response(200, json={"choices": [choice], "usage": {"prompt_tokens": 4, "completion_tokens": 1}})

    return httpx.MockTransport(handler)


def test_a_new_task_module_runs_end_to_end_without_another_file(toy):
    # spec validation: the study names it, its longest request is held within engine.n_ctx
    study = parse_study(STUDY, "s.toml")
    q = study.quality
    assert q.task == "toy" and QualitySpec(tasks={"toy": 2}).tasks == {"toy": 2}
    with pytest.raises(StudyError, match=r"^s.toml: quality: max_tokens \+ the toy's 300-token prompt = 556 tokens"):
        parse_study(STUDY + "max_tokens = 256\n[engine]\nn_ctx = 512\n", "s.toml")
    # the campaign's questions of a task
    assert task_mode(q) == "echo" and max_tokens_for(q) == 32 and parse_n("all", "toy") == 4
    assert max_tokens_for(with_task(study, "toy", 64).quality) == 64
    assert qrun_id(study, study.baseline, 4) != qrun_id(with_task(study, "gsm8k"), study.baseline, 4)
    items = study_items(q, n=4)
    assert [it.target for it in items] == ["alpha", "beta", "gamma", "delta"]
    # the real runner asks a (fake) server and scores each answer through the registry
    answers = {"alpha": "alpha", "beta": "Beta", "gamma": "gamma", "delta": "epsilon"}
    run = asyncio.run(arun_items("http://fake:1/v1", items, transport=_echo_server(answers)))
    assert [r.correct_strict for r in run.records] == [True, False, True, False]
    assert [r.correct_flexible for r in run.records] == [True, True, True, False]
    # the summary: score with its interval, and the task's own parts and lines
    s = run.summary
    assert (s.task, s.variant, s.n, s.strict.k, s.flexible.k) == ("toy", "echo", 4, 2, 3)
    assert 0 < s.strict.lo < 0.5 < s.strict.hi < 1
    extras = task_extras(run.records)
    assert extras == {"toy_lowercase": 3} and task_lines(study, extras) == ["answers in lower case: 3"]
    assert rescore(run.records).summary == replace(s, wall_s=None)  # re-scoring from the saved records alone
    assert scorer_for("toy", "echo")(" gamma ", "gamma", ()) == ("gamma", "gamma", True, True)


def test_a_task_not_registered_is_refused_by_name():
    with pytest.raises(StudyError, match=r"^s.toml: quality.task: 'toy' is not allowed: Input should be 'gsm8k'"):
        parse_study(STUDY, "s.toml")
    with pytest.raises(ValueError, match="toy/echo is not supported"):
        scorer_for("toy", "echo")


def test_register_adds_the_task_and_its_table_once():
    other = Toy(TaskTable("toy2"), ("echo",), "exact echo", "toy2", size=4)
    try:
        registry.register(other)
        assert registry.task("toy2") is other and TABLES["toy2"] is other.table
        assert QualitySpec(task="toy2").task == "toy2"
        with pytest.raises(ValueError, match="'toy2' is already registered"):
            registry.register(other)
    finally:
        TASKS.pop("toy2", None)
        TABLES.pop("toy2", None)
    with pytest.raises(ValueError, match=r"'toy2' is not registered; registered: gsm8k, retrieval"):
        registry.task("toy2")


# --- no branching on a task's name outside its own module -------------------------------------

# Where a task's name may be a literal used to choose: its registry module, its implementation
# module (quality.<name>: its records are made there), and the spec tables.
OWN = {n: {f"quality/tasks/{n}.py", f"quality/{n}.py"} for n in SHIPPED}
ALLOWED = {"spec/study/tasks.py"}


def _choices(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of each task-name literal that chooses: compared, a dict's key, a member of a
    tuple/list/set, a subscript, or a match case. A default (`task="gsm8k"`) or a keyword is not one."""
    parents = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and node.value in SHIPPED):
            continue
        parent = parents.get(node)
        choosing = (
            isinstance(parent, (ast.Compare, ast.Tuple, ast.List, ast.Set, ast.MatchValue))
            or (isinstance(parent, ast.Dict) and any(k is node for k in parent.keys))
            or (isinstance(parent, ast.Subscript) and parent.slice is node)
        )
        if choosing:
            out.append((node.lineno, node.value))
    return sorted(out)


def branches_outside(root: Path) -> list[str]:
    bad = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel in ALLOWED:
            continue
        for line, name in _choices(ast.parse(path.read_text(), rel)):
            if rel not in OWN[name]:
                bad.append(f"{rel}:{line} branches on {name!r}")
    return bad


def test_no_task_name_is_branched_on_outside_its_module():
    bad = branches_outside(ROOT)
    assert not bad, "ask the registry (quality.tasks) instead:\n" + "\n".join(bad)


def test_the_branch_check_sees_each_form(tmp_path):
    (tmp_path / "stage.py").write_text(
        'def f(task, q, t="gsm8k"):\n'
        '    if task == "ruler":\n'
        "        pass\n"
        '    x = {"humaneval": 1}.get(task)\n'
        '    y = task in ("ifeval", "retrieval")\n'
        '    return TASKS["gsm8k"], g(task="gsm8k")\n'
    )
    (tmp_path / "quality").mkdir()
    (tmp_path / "quality" / "ruler.py").write_text('TASK = "ruler"\nok = r.task == "ruler"\n')
    assert branches_outside(tmp_path) == [
        "stage.py:2 branches on 'ruler'",
        "stage.py:4 branches on 'humaneval'",
        "stage.py:5 branches on 'ifeval'",
        "stage.py:5 branches on 'retrieval'",
        "stage.py:6 branches on 'gsm8k'",
    ]
