"""The Python code blocks of the documentation, collected so that every one of them runs as a test.

``collect(paths)`` reads Markdown files (a folder stands for every ``*.md`` under it, generated pages are not on
disk and hold no examples) and returns one ``Snippet(path, line, code)`` per fenced block whose language is
``python``, ``py`` or ``pycon``, in file order; ``line`` is the line of the opening fence, so a test id reads
``docs/guides/framework.md:42``. A block indented inside a list is dedented by its fence's indentation.

How tests/docs/test_snippets.py runs them:

- Every block is a complete program and runs alone, in a fresh namespace (``exec``), with a temporary folder as
  the working directory, so files a snippet writes (an image, an adapter) are its own. Blocks of one page do not
  share names: each can be copied out and run as it is. Asynchronous examples are written as programs with
  ``asyncio.run(main())``, as a user runs them.
- A block whose first line starts with ``>>>`` is a doctest session: it runs with ``doctest`` and its printed
  outputs are compared.
- A block that talks to ``openafm serve`` uses the address a user types, ``http://localhost:8000`` (``/v1`` for
  the ``openai`` client); the test starts a live server on a free port and substitutes that address
  (``LOCAL_SERVER``) before running the block.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

PYTHON_LANGUAGES = {"python", "py", "pycon"}
LOCAL_SERVER = "http://localhost:8000"
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+-]*)(?P<rest>.*)$")


@dataclass(frozen=True)
class Snippet:
    path: Path        # as given to collect (relative paths stay relative, for readable test ids)
    line: int         # 1-based line of the opening fence
    code: str
    language: str = "python"

    @property
    def id(self) -> str:
        return f"{self.path.as_posix()}:{self.line}"

    @property
    def is_doctest(self) -> bool:
        return self.code.lstrip().startswith(">>>")

    @property
    def uses_server(self) -> bool:
        return LOCAL_SERVER in self.code


def markdown_files(paths: list[Path | str], root: Path | None = None) -> list[Path]:
    """The Markdown files named by `paths` (files as given, folders searched), sorted, each once; relative paths
    are read under `root` (the working directory by default) and returned relative to it."""
    base = Path(root) if root is not None else Path()
    found: list[Path] = []
    for path in map(Path, paths):
        full = base / path
        if full.is_dir():
            found += sorted(p.relative_to(base) if not path.is_absolute() else p for p in full.rglob("*.md"))
        elif full.is_file():
            found.append(path)
        else:
            raise FileNotFoundError(f"no Markdown file or folder at {full}")
    return list(dict.fromkeys(found))


def fenced_blocks(text: str) -> list[tuple[int, str, str]]:
    """(line of the opening fence, language, code) for every fenced block of a Markdown text."""
    blocks, lines = [], text.split("\n")
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence, start = match["indent"], match["fence"], i
        body, i = [], i + 1
        while i < len(lines):
            closing = FENCE.match(lines[i])
            if closing and closing["fence"][0] == fence[0] and len(closing["fence"]) >= len(fence) \
                    and not closing["lang"] and not closing["rest"].strip():
                break
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        else:
            raise ValueError(f"fenced block opened at line {start + 1} is never closed")
        blocks.append((start + 1, match["lang"].lower(), "\n".join(body) + "\n"))
        i += 1
    return blocks


def collect(paths: list[Path | str], languages: set[str] = PYTHON_LANGUAGES, root: Path | None = None
            ) -> list[Snippet]:
    """Every fenced block of `languages` in the Markdown files under `paths` (relative ones under `root`), in file
    order."""
    base = Path(root) if root is not None else Path()
    snippets = []
    for path in markdown_files(paths, root):
        try:
            blocks = fenced_blocks((base / path).read_text(encoding="utf-8"))
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from None
        snippets += [Snippet(path, line, code, lang) for line, lang, code in blocks if lang in languages]
    return snippets
