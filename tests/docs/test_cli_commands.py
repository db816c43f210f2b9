"""Every `openafm ...` command line in a shell block of README.md and docs/**/*.md parses with the real command line
(the parser of `openafm --help`): the subcommand exists, and so do its sub-subcommand and options."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from docs.snippets import collect
from openafm.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
SHELL_LANGUAGES = {"bash", "sh", "shell", "console"}


def command_lines(code: str) -> list[str]:
    """The shell lines of a block that run `openafm` (continuations joined, comments and env assignments dropped)."""
    joined = code.replace("\\\n", " ")
    found = []
    for line in joined.splitlines():
        words = shlex.split(line.lstrip("$ "), comments=True)
        while words and "=" in words[0] and not words[0].startswith("-"):
            words = words[1:]                        # OMP_NUM_THREADS=1 openafm ...
        if words and words[0] == "openafm":
            found.append(shlex.join(words[1:]))
    return found


COMMANDS = [(f"{block.id}", line) for block in collect(["README.md", "docs"], SHELL_LANGUAGES, root=ROOT)
            for line in command_lines(block.code)]


def test_the_docs_show_many_commands():
    assert len(COMMANDS) >= 40, f"only {len(COMMANDS)} openafm command lines in the shell blocks"
    assert len({line.split()[0] for _, line in COMMANDS if line}) >= 15, "few distinct subcommands shown"


@pytest.mark.parametrize("where, line", COMMANDS, ids=[f"{where}: openafm {line}"[:120] for where, line in COMMANDS])
def test_command_parses(where, line, capsys):
    parser = build_parser()
    try:
        parser.parse_args(shlex.split(line))
    except SystemExit as exit_:
        pytest.fail(f"{where}: `openafm {line}` does not parse (exit {exit_.code}): {capsys.readouterr().err}")
