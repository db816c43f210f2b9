"""Griffe extension: openafm's plain-prose docstrings read as Markdown by the API reference.

The docstrings are prose with doctest sessions (``>>>`` lines, which are also the doctests) and a few
reStructuredText roles (``:class:`X```). Read as Markdown, a doctest line such as ``d["properties"]["age"]`` is a
reference-style link, which autorefs then tries to resolve; so every doctest session at the start of a line
(indented ones are Markdown code blocks already) is put into a ``pycon`` fence, and each role becomes a code
span. The text itself is not changed otherwise.
"""

from __future__ import annotations

import re

from griffe import Extension

ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj|const):`~?([^`]+)`")
PROMPT = ">>>"


def fence_doctests(text: str) -> str:
    """Each doctest session (a ``>>>`` line at column 0 up to the next blank line) inside a pycon fence."""
    out: list[str] = []
    inside = False
    for line in text.split("\n"):
        if not inside and line.startswith(PROMPT):
            if out and out[-1].strip():
                out.append("")
            out.append("```pycon")
            inside = True
        elif inside and not line.strip():
            out.append("```")
            inside = False
        out.append(line)
    if inside:
        out.append("```")
    return "\n".join(out)


def as_markdown(text: str) -> str:
    return fence_doctests(ROLE.sub(r"`\1`", text))


class DocstringsAsMarkdown(Extension):
    """Rewrites every docstring griffe loads with as_markdown."""

    def on_instance(self, *, obj, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = as_markdown(obj.docstring.value)
