"""Files for every room, written so a crash never leaves half of one and read so a bad line is named: atomic file
and directory writes (a temporary sibling, fsync, rename), JSON Lines (strict files and append-only logs), YAML.

    write_text_atomic(path, json.dumps(report))
    atomic_write(path, lambda tmp: torch.save(state, tmp))      # any writer that takes a path
    atomic_directory(out, lambda tmp: write_files_into(tmp))     # a directory appears whole or not at all
    for row in read_jsonl(path): ...                             # a bad line raises JsonlError naming path:line
    records = read_jsonl_log(metrics_path)                       # a line torn by a kill at the end is dropped
    config = read_yaml(path, "RL config")                        # unreadable or bad YAML names the file
"""

from __future__ import annotations

import enum
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from openafm.errors import ConfigError


class JsonlError(ValueError):
    """A JSON Lines file has a line that is not one JSON object (the message names ``path:line``)."""


class Blank(enum.Enum):
    """What a blank line in a JSON Lines file is."""
    ERROR = "error"      # files openafm writes: every line is one object
    SKIP = "skip"        # files others write (BFCL's data ends some files with an empty line)


# --- writing ---------------------------------------------------------------------------------------------------

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


def write_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> int:
    """Write one JSON object per line, atomically; returns the number written."""
    written = []

    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
                written.append(1)
    atomic_write(path, write)
    return len(written)


def atomic_directory(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Call write(tmp) on a temporary sibling directory, fsync every file in it, and put it in place of `path`
    (an existing directory is moved aside first, then removed). On failure `path` is untouched."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    try:
        write(tmp)
        fsync_tree(tmp)
        replace_directory(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def replace_directory(new: Path, target: Path) -> None:
    """Rename directory `new` to `target`, replacing an existing `target` (moved aside, then removed), and fsync
    the parent so the rename itself survives a crash."""
    if target.exists():
        old = target.with_name(f".{target.name}.old-{uuid.uuid4().hex[:8]}")
        os.replace(target, old)
        os.replace(new, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(new, target)
    fsync_path(target.parent)


def fsync_tree(directory: Path) -> None:
    """fsync every file under `directory`, then the directories themselves (deepest first)."""
    for root, _, files in os.walk(directory, topdown=False):
        for name in files:
            fsync_path(Path(root) / name)
        fsync_path(Path(root))


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- reading ---------------------------------------------------------------------------------------------------

def json_line(line: str | bytes, where: str, error: type[Exception] = JsonlError) -> Any:
    """One JSON Lines line -> its value; bad JSON raises `error` naming `where` (``path:line``)."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as e:
        raise error(f"{where}: not valid JSON ({e.msg} at column {e.colno})") from None


def json_object(line: str | bytes, where: str, error: type[Exception] = JsonlError) -> dict[str, Any]:
    """One JSON Lines line -> its object; anything else raises `error` naming `where` (``path:line``)."""
    obj = json_line(line, where, error)
    if not isinstance(obj, dict):
        raise error(f"{where}: expected a JSON object, got {type(obj).__name__}")
    return obj


def read_jsonl(path: str | Path, blank: Blank = Blank.ERROR) -> Iterator[dict[str, Any]]:
    """Yield each line's object; a bad line (or, with Blank.ERROR, a blank one) raises JsonlError naming path:line."""
    path = Path(path)
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                if blank is Blank.SKIP:
                    continue
                raise JsonlError(f"{path}:{lineno}: blank line (every line must be one JSON object)")
            yield json_object(line, f"{path}:{lineno}")


def read_jsonl_log(path: str | Path, *, cut_torn_tail: bool = False) -> list[dict[str, Any]]:
    """The records of an append-only JSON Lines log (metrics, eval records); [] if there is none. A last line cut
    short by a kill is dropped (and, with cut_torn_tail, truncated from the file so appends continue cleanly); a
    bad line before the last means the file is damaged and raises JsonlError naming path:line."""
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_bytes().split(b"\n")
    records, good = [], 0
    for i, line in enumerate(lines):
        if line.strip():
            try:
                records.append(json_object(line, f"{path}:{i + 1}"))
            except JsonlError:
                if i < len(lines) - 1:
                    raise JsonlError(f"{path}:{i + 1}: not a JSON record and not the last line: the file is "
                                     f"damaged (delete it to start over)") from None
                if cut_torn_tail:
                    with open(path, "r+b") as f:
                        f.truncate(good)
                break
        good += len(line) + 1
    return records


def read_yaml(path: str | Path, what: str) -> Any:
    """The parsed YAML file; an unreadable file or bad YAML raises ConfigError naming the file (and `what`)."""
    path = Path(path)
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the {what} ({e.strerror})") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML ({e})") from None
