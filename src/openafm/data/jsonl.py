"""Documents as JSON Lines between pipeline stages: one Document per line; a bad line is an error naming file and line
(the line format itself is openafm.io's)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from openafm.data.document import Document
from openafm.io import JsonlError, read_jsonl, write_jsonl


def read_documents(path: str | Path) -> Iterator[Document]:
    """Yield Documents; a line whose object is not a Document raises JsonlError naming ``path:line``."""
    for lineno, obj in enumerate(read_jsonl(path), start=1):
        try:
            yield Document.from_json(obj)
        except (TypeError, ValueError) as e:
            raise JsonlError(f"{path}:{lineno}: not a Document ({e})") from None


def write_documents(path: str | Path, docs: Iterable[Document]) -> int:
    return write_jsonl(path, (d.to_json() for d in docs))
