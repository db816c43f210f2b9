"""The King James Bible (Debian ``bible-kjv-text``, read through the ``bible`` program of ``bible-kjv``).

The text package stores the Bible in its own compressed format (/usr/lib/bible.data); the ``bible``
program is its reader. ``bible -f Ge1:1-Re22:21`` prints one verse a line as ``Ge1:1 In the beginning ...``.
One Document per chapter (1,189), verses one a line. Public domain.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

from openafm.data.document import Document
from openafm.data.sources.base import Source, require_path, require_program, spread

_VERSE = re.compile(r"^(\d?[A-Z][A-Za-z]*?)(\d+):(\d+) (.*)$")


def parse_verses(text: str) -> list[tuple[str, list[str]]]:
    """[(chapter reference "Ge1", [verse text, ...])] from ``bible -f`` output, in order."""
    chapters: list[tuple[str, list[str]]] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        m = _VERSE.match(line)
        if m is None:
            raise ValueError(f"bible output line {lineno}: not 'BookChapter:Verse text': {line[:80]!r}")
        ref = m.group(1) + m.group(2)
        if not chapters or chapters[-1][0] != ref:
            chapters.append((ref, []))
        chapters[-1][1].append(m.group(4).strip())
    return chapters


def read_kjv(limit: int | None = None) -> Iterator[Document]:
    require_path(Path("/usr/lib/bible.data"), "bible-kjv-text")
    program = require_program("bible", "bible-kjv")
    out = subprocess.run([program, "-f", "-l0", "Ge1:1-Re22:21"], capture_output=True, text=True, check=True,
                         env={"COLUMNS": "0", "PATH": "/usr/bin:/bin"}).stdout
    for ref, verses in spread(parse_verses(out), limit):
        yield Document(id=f"bible-kjv-text:{ref}", text="\n".join(verses), source="bible-kjv-text",
                       licence="public-domain", domain="general", meta={"chapter": ref, "verses": len(verses)})


SOURCE = Source(name="bible-kjv-text", domain="general", licence="public-domain",
                provided_by="apt: bible-kjv-text bible-kjv", read=read_kjv,
                description="King James Bible, one document per chapter (1,189)")
