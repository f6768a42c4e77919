"""One verb per job: `--help` lists at most 12 commands, every verb that reads a study takes it as a
positional STUDY (or --study / -s), and each name of an earlier release still works, hidden: it says
its new name in one line on stderr and then does what the new command does."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from pareto_atlas.cli import app
from pareto_atlas.cli_aliases import RENAMED

STUDY_VERBS = ("build", "measure", "quality", "calibrate", "simulate", "atlas", "pick", "report", "export", "check")


def _commands() -> dict:
    return typer.main.get_command(app).commands


def test_help_lists_at_most_twelve_commands_and_no_earlier_name():
    shown = [n for n, c in _commands().items() if not c.hidden]
    assert len(shown) <= 12 and set(STUDY_VERBS) <= set(shown)
    assert not set(RENAMED) & set(shown)
    text = CliRunner().invoke(app, ["--help"]).output
    assert all(f" {n} " in text for n in shown) and " kld " not in text and " doctor " not in text


def test_every_earlier_name_is_a_hidden_command():
    cmds = _commands()
    assert all(cmds[old].hidden for old in RENAMED)


@pytest.mark.parametrize("verb", STUDY_VERBS)
@pytest.mark.parametrize("how", [[], ["--study"], ["-s"]])
def test_every_verb_reads_the_study_it_is_given(verb: str, how: list[str], tmp_path: Path):
    missing = str(tmp_path / "nowhere.toml")
    res = CliRunner().invoke(app, [verb, *how, missing, "--out", str(tmp_path)])
    assert res.exit_code == 2 and "nowhere.toml" in res.output, res.output


@pytest.mark.parametrize("verb", STUDY_VERBS)
def test_two_different_studies_are_refused(verb: str, tmp_path: Path):
    res = CliRunner().invoke(app, [verb, "default", "--study", "tiny", "--out", str(tmp_path)])
    assert res.exit_code != 0 and "study given twice" in res.output


def test_a_constraint_given_alone_to_pick_is_the_constraint_not_a_study(tmp_path: Path):
    missing = str(tmp_path / "nowhere.toml")
    old = CliRunner().invoke(app, ["pick", "tpot_p99_ms<=40", "--study", missing, "--out", str(tmp_path)])
    new = CliRunner().invoke(app, ["pick", missing, "tpot_p99_ms<=40", "--out", str(tmp_path)])
    assert old.exit_code == new.exit_code == 2 and "nowhere.toml" in old.output and old.output == new.output


def _same(old: list[str], new: list[str], name: str) -> None:
    a, b = CliRunner().invoke(app, old), CliRunner().invoke(app, new)
    first, *rest = a.stderr.splitlines()
    assert first == f"pareto-atlas {name} is now: {RENAMED[name]}"
    assert (a.exit_code, "\n".join(rest), a.stdout) == (b.exit_code, b.stderr.rstrip("\n"), b.stdout)


def test_each_earlier_name_says_its_new_name_then_does_what_the_new_command_does(tmp_path: Path):
    missing = str(tmp_path / "nowhere.toml")
    out = ["--out", str(tmp_path)]
    _same(["kld", missing, *out], ["quality", missing, "--kind", "kld", *out], "kld")
    _same(["evict", missing, "--n", "3", *out], ["quality", missing, "--kind", "evict", "--n", "3", *out], "evict")
    files = [str(tmp_path / "bench.json")]
    _same(["import", *files, "--study", missing, *out], ["calibrate", missing, "--import", *files, *out], "import")
    _same(["published", "--study", missing, *out], ["calibrate", missing, "--published", *out], "published")
    _same(
        ["doctor", "--store", str(tmp_path / "no.duckdb")], ["check", "--store", str(tmp_path / "no.duckdb")], "doctor"
    )
    _same(
        ["published-quality", "--model", "qwen2.5-7b"],
        ["quality", "--kind", "published", "--model", "qwen2.5-7b"],
        "published-quality",
    )


@pytest.mark.parametrize(
    "args, says",
    [
        (["quality", "--kind", "kld", "--policies", "h2o"], "--policies applies to --kind evict, not kld"),
        (["quality", "--kind", "task", "--tokens", "100"], "--tokens applies to --kind kld, not task"),
        (["quality", "--kind", "evict", "--n", "all"], "--kind evict takes a whole number"),
        (
            ["quality", "--kind", "kld", "--allow-program", "llama-server"],
            "--allow-program applies to --kind task, not kld",
        ),
        (["quality", "--kind", "poetry"], "allowed: task, kld, evict, published"),
        (["quality", "tiny", "--kind", "published"], "--kind published reads no study"),
        (["calibrate", "--published", "--import", "x.json"], "not both"),
        (
            ["calibrate", "--published", "--knobs", "weights=FP8"],
            "--knobs applies to calibrate --import, not --published",
        ),
        (["calibrate", "--import", "x.json", "--hardware", "L4", "--hardware", "H100-SXM"], "one value with --import"),
    ],
)
def test_an_option_the_chosen_job_does_not_read_is_refused_in_one_line(args: list[str], says: str):
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2 and says in " ".join(res.output.replace("│", " ").split()), res.output
