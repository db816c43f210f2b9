"""The Debian Developer's Reference as plain prose (Debian ``developers-reference``: its reStructuredText sources).

One Document per chapter (``_sources/*.rst.txt``; the index, a table of contents, is left out), its text the
chapter's paragraphs with the markup taken away (`rst_prose`): headings, directives (with their bodies), link
targets, comments, tables and literal blocks dropped; inline roles, literals, emphasis and links reduced to their
words; each paragraph on one line, a list one item per line. Modern technical English written by other hands than
the Debian Reference (the text whose perplexity measures drift, eval/texts.py), so a fine-tune can replay it as a
plain-text anchor without training on the text it is measured on. GPL-2.0-or-later (some sections MIT; see
debian/copyright).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from openafm.data.document import Document
from openafm.data.sources.base import Source, package_files, spread

PACKAGE = "developers-reference"
LICENCE = "GPL-2.0-or-later"

_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+.:_])\1{2,}\s*$")       # a heading's over- or underline
_ROLE = re.compile(r":[a-z:]+:`([^`<]*?)(?:\s*<[^>]*>)?`")        # :ref:`text <target>` -> text
_LINK = re.compile(r"`([^`<]+?)\s*<[^>]*>`_{1,2}")                 # `text <url>`_ -> text
_REF = re.compile(r"`([^`]+)`_{1,2}")                              # `text`_ -> text
_BULLET = re.compile(r"^([-*+]|\d+\.|#\.)\s+")
_LITERAL = re.compile(r"``(.+?)``")
_STRONG = re.compile(r"\*\*(.+?)\*\*")
_EMPHASIS = re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])")


def inline_text(line: str) -> str:
    """A line's inline markup reduced to its words (roles, links, literals, emphasis, escaped spaces)."""
    for pattern in (_ROLE, _LINK, _REF, _LITERAL, _STRONG, _EMPHASIS):
        line = pattern.sub(r"\1", line)
    return line.replace("\\ ", "")


def _items(lines: list[str]) -> list[list[str]]:
    """A paragraph's lines grouped into list items (a line starting "- ", "* " or "3. " opens one; "-  " -> "- ")."""
    items: list[list[str]] = []
    for ln in lines:
        bullet = _BULLET.match(ln.strip())
        if bullet or not items:
            items.append([])
        items[-1].append(f"{bullet.group(1)} {ln.strip()[bullet.end():]}" if bullet else ln.strip())
    return items


def rst_prose(text: str) -> str:
    """The paragraphs of a reStructuredText document, one per line (a list one item per line), blank lines between."""
    paragraphs, body = [], False            # body: indented blocks that follow belong to a literal or a directive
    for block in re.split(r"\n\s*\n", text):
        lines = [ln for ln in block.split("\n") if ln.strip()]
        if not lines:
            continue
        if body and lines[0][:1].isspace():
            continue
        body = False
        if lines[0].startswith(".."):        # directive, link target or comment: its indented body goes too
            body = True
            continue
        if lines[0].lstrip().startswith(("+-", "+=", "|")):           # a grid table or a line block
            continue
        lines = [ln for ln in lines if not _UNDERLINE.match(ln.strip())]
        if not lines or lines == ["::"]:
            body = lines == ["::"]
            continue
        if len(lines) == 1 and block.strip() != lines[0].strip():     # a heading: its line had an underline
            continue
        joined = "\n".join(inline_text(" ".join(item)) for item in _items(lines))    # a link may span lines
        body = joined.endswith("::")
        paragraphs.append(joined[:-1] if body else joined)
    return "\n\n".join(p for p in paragraphs if len(p.split()) >= 4)


def chapter_files() -> list[Path]:
    """The package's chapter sources (``_sources/*.rst.txt``), the index (a table of contents) left out."""
    return [p for p in package_files(PACKAGE) if p.name.endswith(".rst.txt") and p.name != "index.rst.txt"]


def _read(limit: int | None) -> Iterator[Document]:
    for path in spread(chapter_files(), limit):
        yield Document(id=f"{PACKAGE}:{path.name}", text=rst_prose(path.read_text(encoding="utf-8")),
                       source=PACKAGE, licence=LICENCE, domain="general", meta={"file": str(path)})


SOURCE = Source(name=PACKAGE, domain="general", licence=LICENCE, provided_by=f"apt: {PACKAGE}", read=_read,
                description="the Debian Developer's Reference as plain prose, one document per chapter")
