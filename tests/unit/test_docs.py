"""The documentation says what the code does: the metric definitions and the study's fields as the
code has them, the README within its bar, links that resolve, docstrings citing pages that exist."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from pareto_atlas.measure.metrics import CI_METHOD
from pareto_atlas.report.definitions import METRIC_DEFINITIONS, PERCENTILE_METHOD
from pareto_atlas.spec.study import Study

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


@pytest.mark.parametrize("name", sorted(METRIC_DEFINITIONS))
def test_each_metric_definition_is_in_the_metrics_page_verbatim(name):
    page = (DOCS / "metrics.md").read_text()
    assert f"- **{name}**: {METRIC_DEFINITIONS[name]}" in page, f"docs/metrics.md lacks {name}'s definition as written"


def test_the_percentile_method_is_in_the_metrics_page_verbatim():
    page = (DOCS / "metrics.md").read_text()
    assert PERCENTILE_METHOD in page and CI_METHOD in page


def _fields(model: type[BaseModel], prefix: str = "") -> list[str]:
    out = []
    for name, f in model.model_fields.items():
        out.append(prefix + name)
        for a in (f.annotation, *typing.get_args(f.annotation)):
            for sub in (a, *typing.get_args(a)):
                if isinstance(sub, type) and issubclass(sub, BaseModel):
                    out += _fields(sub, f"{prefix}{name}.")
    return list(dict.fromkeys(out))


def test_every_study_field_is_in_the_study_reference():
    page = (DOCS / "study.md").read_text()
    fields = _fields(Study)
    assert len(fields) > 90
    missing = [f for f in fields if not any(f"`{form}`" in page for form in (f, f"[{f}]", f"[[{f}]]"))]
    assert not missing, f"docs/study.md does not name: {missing}"


def test_readme_is_a_users_guide_that_opens_on_its_two_commands():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250
    commands = [ln.split("#")[0].strip() for ln in lines if ln.startswith("make ")]
    assert commands[:2] == ["make atlas", "make test"]
    first_screen = "\n".join(lines[:25])
    assert "make atlas" in first_screen and "make test" in first_screen


def test_every_result_opens_with_its_machine_commit_and_command():
    results = sorted(p for p in (DOCS / "results").glob("*.md") if p.name != "README.md")
    assert results
    for p in results:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}-[a-z0-9-]+\.md", p.name), p.name
        head = p.read_text().splitlines()[:8]
        for key in ("**Machine**", "**Commit**", "**Command"):  # "**Command**" or "**Commands**"
            assert any(ln.startswith(f"- {key}") for ln in head), f"{p.name} does not open with {key}"


def test_relative_links_resolve():
    broken = []
    for page in [ROOT / "README.md", *DOCS.rglob("*.md")]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target or target == "docs/cli.md":  # docs/cli.md is generated from the CLI
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_docstrings_cite_pages_that_exist():
    cited = set()
    for p in (ROOT / "src").rglob("*.py"):
        # this repository's pages: docs/<page>.md and docs/results/<page>.md (another project's
        # docs/source/... path cited as a source is not one of them)
        cited |= set(re.findall(r"\b(?:docs/(?:results/)?[\w.-]+\.md|DESIGN\.md)", p.read_text()))
    missing = [c for c in sorted(cited) if not (ROOT / c).exists()]
    assert not missing, f"cited but not in the repository: {missing}"
