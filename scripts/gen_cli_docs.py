"""Write docs/cli.md from the typer app itself, so the reference cannot drift from the commands.

python scripts/gen_cli_docs.py            # rewrite docs/cli.md
python scripts/gen_cli_docs.py --check    # exit 1 when docs/cli.md is stale (tests/unit/test_cli_docs.py)
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import typer

DOC = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def _text(s: str | None) -> str:
    # one paragraph per help text; rich markup's escaped brackets read as plain brackets here
    return " ".join(inspect.cleandoc(s or "").split()).replace("\\[", "[").replace("|", "\\|")


def _names(p) -> str:
    if p.param_type_name == "argument":
        return f"`{p.name.upper()}`"
    names = [*p.opts, *(p.secondary_opts or [])]
    return ", ".join(f"`{n}`" for n in names)


def _default(p) -> str:
    d = p.default
    if p.param_type_name == "argument" or d is None or d == [] or d == () or getattr(p, "multiple", False):
        return ""
    if isinstance(d, bool):
        return f"`{'yes' if d else 'no'}`"
    return f"`{d}`"


def render(app: typer.Typer) -> str:
    """The markdown reference: each visible command with its arguments and options, then the
    earlier names that still work."""
    from pareto_atlas.cli_aliases import RENAMED

    group = typer.main.get_command(app)
    ctx = typer.Context(group, info_name="pareto-atlas")
    shown = [(n, c) for n, c in group.commands.items() if not c.hidden]
    lines = [
        "# Command reference",
        "",
        "Generated from the command line itself by `scripts/gen_cli_docs.py`; "
        "`tests/unit/test_cli_docs.py` fails when it is stale. Every command that reads a study takes "
        "it as the positional `STUDY` (a TOML path or a built-in name; default: `default`) "
        "or as `--study` / `-s`.",
        "",
        _text(group.help),
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    lines += [f"| [`{n}`](#{n}) | {_text(c.short_help or (c.help or '').split('.')[0] + '.')} |" for n, c in shown]
    for name, cmd in shown:
        sub = typer.Context(cmd, info_name=name, parent=ctx)
        usage = " ".join(cmd.collect_usage_pieces(sub))
        lines += [
            "",
            f"## {name}",
            "",
            f"    pareto-atlas {name} {usage}",
            "",
            _text(cmd.help),
            "",
            "| argument or option | default | meaning |",
            "|---|---|---|",
        ]
        for p in cmd.params:
            if getattr(p, "hidden", False) or p.name == "help":
                continue
            lines.append(f"| {_names(p)} | {_default(p)} | {_text(getattr(p, 'help', None))} |")
    lines += [
        "",
        "## Earlier names",
        "",
        "These still work for one release, hidden from `--help`: each prints its new name on stderr "
        "and then does what it did.",
        "",
        "| earlier name | now |",
        "|---|---|",
    ]
    lines += [f"| `pareto-atlas {old}` | `{new}` |" for old, new in RENAMED.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    from pareto_atlas.cli import app

    text = render(app)
    if "--check" in argv:
        if not DOC.exists() or DOC.read_text(encoding="utf-8") != text:
            print(f"{DOC} is stale: run python scripts/gen_cli_docs.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text, encoding="utf-8")
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
