"""Corpus readers: each yields Documents with their origin and licence (report §3.1).

``SOURCES`` maps a source name to its :class:`Source`; ``get_source(name)`` raises naming the known ones.
(The UDHR reader, ``udhr.py``, is registered by its own module.)
"""

from __future__ import annotations

from openafm.data.sources import debian_reference, fortunes, kjv, manpages, python_stdlib, reasoning_gym_math, wordnet
from openafm.data.sources.base import MissingSourceError, Source, spread

SOURCES: dict[str, Source] = {s.name: s for s in [
    kjv.SOURCE, *fortunes.SOURCES, wordnet.SOURCE, *debian_reference.SOURCES, python_stdlib.SOURCE,
    *manpages.SOURCES, reasoning_gym_math.SOURCE,
]}


def get_source(name: str) -> Source:
    if name not in SOURCES:
        raise ValueError(f"unknown source {name!r}; known sources: {', '.join(sorted(SOURCES))}")
    return SOURCES[name]


__all__ = ["SOURCES", "MissingSourceError", "Source", "get_source", "spread"]
