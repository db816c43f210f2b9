"""Atomic file writes for every room: a temporary sibling, fsync, rename. A crash leaves the old file or the
new one under the real name, never half of one.

    write_text_atomic(path, json.dumps(report))
    atomic_write(path, lambda tmp: torch.save(state, tmp))      # any writer that takes a path
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def atomic_write(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Call write(tmp) on a temporary sibling of `path`, fsync it, and rename it onto `path` (parents made).
    On any failure the temporary file is removed and the old `path`, if any, is untouched."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write `text` (UTF-8) to `path` atomically."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
