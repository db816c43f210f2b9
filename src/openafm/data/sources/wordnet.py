"""WordNet 3.0 glosses (Debian ``wordnet-base``): definitions and usage examples of English words.

Each ``/usr/share/wordnet/data.{noun,verb,adj,adv}`` line is one synset:
``offset lex_filenum ss_type w_cnt word lex_id [word lex_id ...] p_cnt [pointers ...] | gloss``
(w_cnt is hexadecimal; lines starting with two spaces are the licence header). A synset becomes the line
``word, other word (noun): gloss``; 50 consecutive synsets of one part of speech make one Document.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from openafm.data.document import Document
from openafm.data.sources.base import Source, require_path, spread

WORDNET_DIR = Path("/usr/share/wordnet")
POS = ("noun", "verb", "adj", "adv")
SYNSETS_PER_DOC = 50


def parse_synset(line: str) -> tuple[list[str], str]:
    """(words, gloss) of one data-file line."""
    head, sep, gloss = line.partition(" | ")
    if not sep:
        raise ValueError(f"WordNet data line has no ' | ' gloss separator: {line[:80]!r}")
    fields = head.split()
    n_words = int(fields[3], 16)
    words = [fields[4 + 2 * i].replace("_", " ") for i in range(n_words)]
    words = [w.split("(")[0] for w in words]  # adjective markers like "big(a)"
    return words, gloss.strip()


def _read(limit: int | None) -> Iterator[Document]:
    groups = []
    for pos in POS:
        path = require_path(WORDNET_DIR / f"data.{pos}", "wordnet-base")
        lines = []
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("  "):
                    continue
                words, gloss = parse_synset(line)
                lines.append(f"{', '.join(words)} ({pos}): {gloss}")
        for k in range(0, len(lines), SYNSETS_PER_DOC):
            groups.append((pos, k // SYNSETS_PER_DOC, lines[k:k + SYNSETS_PER_DOC]))
    for pos, k, lines in spread(groups, limit):
        yield Document(id=f"wordnet-base:{pos}:{k}", text="\n".join(lines), source="wordnet-base",
                       licence=_LICENCE, domain="general", meta={"pos": pos, "synsets": len(lines)})


_LICENCE = "WordNet 3.0 licence (Princeton University; permissive, see /usr/share/doc/wordnet-base/copyright)"

SOURCE = Source(name="wordnet-base", domain="general", licence=_LICENCE, provided_by="apt: wordnet-base",
                read=_read, description="WordNet glosses, 50 synsets per document")
