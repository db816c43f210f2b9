"""The unit every data stage passes along: one document with where it came from."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(kw_only=True)
class Document:
    """One document of a corpus.

    ``id`` is stable across runs (source name plus a path or key inside the source), so stages can
    resume and deduplicate by it. ``lang`` is an ISO 639-1 code where known ("en", "de", "zh"), else
    ``None`` until language identification sets it. ``domain`` is one of the mixture buckets:
    "general", "code", "math", "multilingual".
    """

    id: str
    text: str
    source: str                 # reader name, e.g. "bible-kjv-text", "udhr", "python-stdlib"
    licence: str                # SPDX id or a short licence statement of the source
    domain: str                 # "general" | "code" | "math" | "multilingual"
    lang: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    DOMAINS = ("general", "code", "math", "multilingual")

    def __post_init__(self) -> None:
        if self.domain not in self.DOMAINS:
            raise ValueError(f"Document {self.id!r}: domain {self.domain!r} is not one of {self.DOMAINS}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Document":
        return cls(**d)
