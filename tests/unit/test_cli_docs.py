"""docs/cli.md is generated from the command line (scripts/gen_cli_docs.py) and fails here when stale."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_cli_docs", ROOT / "scripts" / "gen_cli_docs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_docs_cli_md_is_what_the_app_generates():
    from pareto_atlas.cli import app

    gen = _generator()
    assert (ROOT / "docs" / "cli.md").read_text(encoding="utf-8") == gen.render(app), (
        "docs/cli.md is stale: run python scripts/gen_cli_docs.py"
    )


def test_the_reference_names_every_visible_command_and_option():
    import typer

    from pareto_atlas.cli import app

    text = _generator().render(app)
    for name, cmd in typer.main.get_command(app).commands.items():
        if cmd.hidden:
            assert f"`pareto-atlas {name}`" in text  # listed under the earlier names
            continue
        assert f"\n## {name}\n" in text
        for p in cmd.params:
            if p.param_type_name == "option" and not p.hidden:
                assert f"`{p.opts[0]}`" in text.split(f"\n## {name}\n")[1].split("\n## ")[0]
