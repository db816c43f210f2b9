"""The Debian Reference as HTML (Debian ``debian-reference-{en,de,es,fr,it,ja,pt,zh-cn}``).

One Document per chapter/appendix file (``ch01.en.html`` ... ``apa.en.html``), its text the raw HTML with
``meta["format"] = "html"``: the pipeline's extraction stage turns it into main text. GPL-2.0-or-later.
"""

from __future__ import annotations

from collections.abc import Iterator

from openafm.data.document import Document
from openafm.data.sources.base import Source, package_files, spread

LANGS = ("en", "de", "es", "fr", "it", "ja", "pt", "zh-cn")
LICENCE = "GPL-2.0-or-later"


def iso_lang(code: str) -> str:
    """Debian Reference language code -> ISO 639-1 ("zh-cn" -> "zh")."""
    return code.split("-")[0]


def _read(lang: str, limit: int | None) -> Iterator[Document]:
    package = f"debian-reference-{lang}"
    files = [p for p in package_files(package) if p.name.endswith(f".{lang}.html") and p.name != "index.html"]
    for path in spread(files, limit):
        yield Document(id=f"{package}:{path.name}", text=path.read_text(encoding="utf-8"), source=package,
                       licence=LICENCE, domain="general" if lang == "en" else "multilingual",
                       meta={"format": "html", "file": str(path), "expected_lang": iso_lang(lang)})


def _source(lang: str) -> Source:
    return Source(name=f"debian-reference-{lang}", domain="general" if lang == "en" else "multilingual",
                  licence=LICENCE, provided_by=f"apt: debian-reference-{lang}",
                  read=lambda limit: _read(lang, limit),
                  description=f"Debian Reference ({lang}) HTML, one document per chapter")


SOURCES = [_source(lang) for lang in LANGS]
