"""Every subcommand names its study the same way: `evict` and `kld` take it as an argument and as
--study / -s, like build, measure and quality; two different studies are refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from pareto_atlas.cli import app


@pytest.mark.parametrize("cmd", ["evict", "kld"])
@pytest.mark.parametrize("how", [["--study"], ["-s"], []])
def test_the_study_is_an_argument_or_an_option(cmd: str, how: list[str], tmp_path: Path):
    missing = str(tmp_path / "nowhere.toml")
    res = CliRunner().invoke(app, [cmd, *how, missing, "--out", str(tmp_path)])
    assert res.exit_code != 0
    assert "nowhere.toml" in res.output  # the study it was given, whichever way, is the one read


@pytest.mark.parametrize("cmd", ["evict", "kld"])
def test_two_different_studies_are_refused(cmd: str, tmp_path: Path):
    res = CliRunner().invoke(app, [cmd, "default", "--study", "tiny", "--out", str(tmp_path)])
    assert res.exit_code != 0 and "study given twice" in res.output
