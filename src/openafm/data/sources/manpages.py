"""Translated manual pages (Debian ``manpages-{de,fr,es,pl,ru}``) rendered to plain text.

Rendering: ``groff -k -T utf8 -mandoc -P-c -P-b -P-u`` (``-k`` runs preconv for the input encoding;
``-P-c -P-b -P-u`` make grotty print plain characters, no SGR escapes and no backspace overstrikes, so no
``col -b`` pass is needed), line length 78. Pages that are only an ``.so`` link to another page are not
documents and are skipped. One Document per page. The translations are GPL-3.0-or-later (manpages-l10n).
"""

from __future__ import annotations

import gzip
import subprocess
from collections.abc import Iterator

from openafm.data.document import Document
from openafm.data.sources.base import Source, package_files, require_program, spread

LANGS = ("de", "fr", "es", "pl", "ru")
LICENCE = "GPL-3.0-or-later"


def render_man(source: bytes, groff: str = "groff") -> str:
    """troff (man macros) -> plain UTF-8 text, trailing spaces and runs of blank lines removed."""
    proc = subprocess.run([groff, "-k", "-T", "utf8", "-mandoc", "-rLL=78n", "-P-c", "-P-b", "-P-u"],
                          input=source, capture_output=True, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    if proc.returncode != 0:
        raise RuntimeError(f"groff failed ({proc.returncode}): {proc.stderr.decode(errors='replace')[:200]}")
    lines = [ln.rstrip() for ln in proc.stdout.decode("utf-8").split("\n")]
    out: list[str] = []
    for ln in lines:
        if ln or (out and out[-1]):
            out.append(ln)
    return "\n".join(out).strip("\n")


def _is_link(page: bytes) -> bool:
    lines = [ln for ln in page.split(b"\n") if ln.strip() and not ln.startswith(b'.\\"')]
    return len(lines) <= 2 and any(ln.startswith(b".so ") for ln in lines)


def _read(lang: str, limit: int | None) -> Iterator[Document]:
    package = f"manpages-{lang}"
    groff = require_program("groff", "groff")
    pages = []
    for path in package_files(package):
        if f"/man/{lang}/man" in str(path) and path.name.endswith(".gz"):
            data = gzip.decompress(path.read_bytes())
            if not _is_link(data):
                pages.append(path)
    for path in spread(pages, limit):
        text = render_man(gzip.decompress(path.read_bytes()), groff)
        yield Document(id=f"{package}:{path.parent.name}/{path.name[:-3]}", text=text, source=package,
                       licence=LICENCE, domain="multilingual",
                       meta={"file": str(path), "format": "man", "expected_lang": lang})


def _source(lang: str) -> Source:
    return Source(name=f"manpages-{lang}", domain="multilingual", licence=LICENCE,
                  provided_by=f"apt: manpages-{lang} groff", read=lambda limit: _read(lang, limit),
                  description=f"manual pages ({lang}) rendered with groff, one document per page")


SOURCES = [_source(lang) for lang in LANGS]
