"""Real English text with a fixed train / held-out split, for compression and recovery experiments.

Source: the Debian Reference (Debian package ``debian-reference-en``, GPL-2.0+), modern technical English
prose, plain-text edition. It is cut at its numbered section headings ("4.6.2. Secure Shell"); a section
goes to the held-out split when the SHA-1 of its heading is 0 mod 5 (about a fifth of the sections), so
the split is stable across runs and machines and no held-out paragraph is ever trained on. The front
matter (table of contents, list of tables) is dropped.
"""

from __future__ import annotations

import gzip
import hashlib
import re
from pathlib import Path

from openafm.splits import Split

DEBIAN_REFERENCE_TXT = Path("/usr/share/debian-reference/debian-reference.en.txt.gz")
_HEADING = re.compile(r"^(\d+(?:\.\d+)+)\.[ \u00a0]+\S.*$", re.MULTILINE)  # NBSP after the number


def debian_reference_sections(path: Path = DEBIAN_REFERENCE_TXT) -> list[tuple[str, str]]:
    """[(heading, body)] in document order; raises naming the package when it is not installed."""
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: install the Debian package debian-reference-en "
                                f"(apt-get install debian-reference-en)")
    text = gzip.open(path, "rt", encoding="utf-8").read()
    heads = list(_HEADING.finditer(text))
    # The front matter (table of contents, list of tables "1.1. List of ...") numbers from 1.1 too: the body
    # starts at the last heading numbered 1.1.
    first = max((i for i, m in enumerate(heads) if m.group(1) == "1.1"), default=None)
    if first is None:
        raise ValueError(f"{path}: no section 1.1 heading found; not the Debian Reference plain-text layout")
    heads = heads[first:]
    sections = []
    for m, nxt in zip(heads, heads[1:] + [None]):
        body = text[m.end(): nxt.start() if nxt else len(text)].strip()
        if body:
            sections.append((m.group(0).strip(), body))
    return sections


def split_of(heading: str) -> Split:
    return Split.HELDOUT if int(hashlib.sha1(heading.encode()).hexdigest(), 16) % 5 == 0 else Split.TRAIN


def english_text(split: Split | str) -> str:
    """All sections of one split joined by blank lines (train ~0.6 MB, held-out ~0.15 MB)."""
    split = Split(split) if isinstance(split, str) else split
    return "\n\n".join(f"{h}\n{b}" for h, b in debian_reference_sections() if split_of(h) is split)
