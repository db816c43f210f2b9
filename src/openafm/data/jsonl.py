"""JSON Lines I/O between pipeline stages: one object per line; a bad line is an error naming file and line."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from openafm.data.document import Document
from openafm.io import atomic_write


class JsonlError(ValueError):
    """A JSONL file has a line that is not one JSON object (or not a Document where one is expected)."""


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield each line's object; a blank line or bad JSON raises JsonlError naming ``path:line``."""
    path = Path(path)
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                raise JsonlError(f"{path}:{lineno}: blank line (every line must be one JSON object)")
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise JsonlError(f"{path}:{lineno}: not valid JSON ({e.msg} at column {e.colno})") from None
            if not isinstance(obj, dict):
                raise JsonlError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
            yield obj


def read_documents(path: str | Path) -> Iterator[Document]:
    """Yield Documents; a line whose object is not a Document raises JsonlError naming ``path:line``."""
    for lineno, obj in enumerate(read_jsonl(path), start=1):
        try:
            yield Document.from_json(obj)
        except (TypeError, ValueError) as e:
            raise JsonlError(f"{path}:{lineno}: not a Document ({e})") from None


def write_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> int:
    """Write rows atomically (temp file + rename); returns the number written."""
    written = []

    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
                written.append(1)
    atomic_write(path, write)
    return len(written)


def write_documents(path: str | Path, docs: Iterable[Document]) -> int:
    return write_jsonl(path, (d.to_json() for d in docs))
