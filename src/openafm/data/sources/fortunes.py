"""Fortune cookies (Debian ``fortunes`` in English; ``fortunes-{de,es,it,ru,pl,cs}`` in other languages).

strfile text format: entries are separated by lines holding only ``%``. The ``.dat`` index files and the
``.u8`` links are skipped; the file list comes from ``dpkg -L`` so each source reads exactly its package.
Files are UTF-8; a file that is not is decoded as Latin-1 and says so in ``meta["encoding"]``.
One Document per fortune.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from openafm.data.document import Document
from openafm.data.sources.base import Source, package_files, spread

MULTILINGUAL = ("de", "es", "it", "ru", "pl", "cs")


def parse_strfile(text: str) -> list[str]:
    """The entries of a strfile text: blocks between ``%`` lines, stripped of trailing space; empty ones dropped."""
    entries, cur = [], []
    for line in text.split("\n"):
        if line.rstrip("\r") == "%":
            entries.append("\n".join(cur))
            cur = []
        else:
            cur.append(line.rstrip())
    entries.append("\n".join(cur))
    return [e.strip("\n") for e in entries if e.strip()]


def _fortune_files(package: str) -> list[Path]:
    return [p for p in package_files(package) if "/games/fortunes" in str(p) and p.suffix not in (".dat", ".u8")]


def _read(package: str, lang: str, limit: int | None) -> Iterator[Document]:
    entries = []
    for path in _fortune_files(package):
        raw = path.read_bytes()
        try:
            text, encoding = raw.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            text, encoding = raw.decode("latin-1"), "latin-1"
        for i, entry in enumerate(parse_strfile(text)):
            entries.append((path, i, entry, encoding))
    domain = "general" if lang == "en" else "multilingual"
    for path, i, entry, encoding in spread(entries, limit):
        yield Document(id=f"{package}:{path.name}:{i}", text=entry, source=package, licence=_LICENCE,
                       domain=domain, meta={"file": str(path), "expected_lang": lang, "encoding": encoding})


_LICENCE = "fortune collections, freely redistributable (see /usr/share/doc/<package>/copyright)"


def _source(lang: str) -> Source:
    package = "fortunes" if lang == "en" else f"fortunes-{lang}"
    return Source(name=package, domain="general" if lang == "en" else "multilingual", licence=_LICENCE,
                  provided_by=f"apt: {package}", read=lambda limit: _read(package, lang, limit),
                  description=f"fortune cookies ({lang}), one document per fortune")


SOURCES = [_source("en")] + [_source(lang) for lang in MULTILINGUAL]
