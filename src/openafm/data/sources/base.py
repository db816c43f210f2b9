"""What every corpus reader shares: the Source record, package checks, and an even spread under a limit."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from openafm.data.document import Document

T = TypeVar("T")


class MissingSourceError(RuntimeError):
    """A corpus is not installed; the message names the Debian or PyPI package that provides it."""


@dataclass(kw_only=True, frozen=True)
class Source:
    """A named corpus: ``read(limit)`` yields at most ``limit`` Documents (all of them for None)."""

    name: str
    domain: str                 # Document.DOMAINS
    licence: str
    provided_by: str            # "apt: bible-kjv" / "pip: reasoning-gym": what to install when it is missing
    description: str
    read: Callable[[int | None], Iterator[Document]]


def spread(items: Sequence[T], limit: int | None) -> list[T]:
    """At most ``limit`` items evenly spaced over ``items`` (deterministic), so a cap samples the whole corpus."""
    if limit is None or limit >= len(items):
        return list(items)
    if limit < 0:
        raise ValueError(f"limit must be >= 0 or None, got {limit}")
    return [items[(i * len(items)) // limit] for i in range(limit)]


def package_files(package: str) -> list[Path]:
    """Regular files a Debian package installed (``dpkg -L``); raises naming the package when it is absent."""
    if shutil.which("dpkg") is None:
        raise MissingSourceError(f"dpkg not found: the {package} corpus is read from the Debian package {package}")
    proc = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True)
    if proc.returncode != 0:
        raise MissingSourceError(f"Debian package {package} is not installed "
                                 f"(apt-get install -y --no-install-recommends {package})")
    return sorted(p for p in map(Path, proc.stdout.split("\n")) if str(p).startswith("/") and p.is_file()
                  and not p.is_symlink())


def require_program(program: str, package: str) -> str:
    path = shutil.which(program)
    if path is None:
        raise MissingSourceError(f"program {program!r} not found: install the Debian package {package} "
                                 f"(apt-get install -y --no-install-recommends {package})")
    return path


def require_path(path: Path, package: str) -> Path:
    if not path.exists():
        raise MissingSourceError(f"{path} not found: install the Debian package {package} "
                                 f"(apt-get install -y --no-install-recommends {package})")
    return path
