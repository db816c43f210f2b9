"""Python source code: the standard library of the running interpreter (``sysconfig`` ``stdlib`` path).

Every ``*.py`` file under it except test suites (``test/``, ``tests/``, ``idle_test/``) and installed
third-party packages (``site-packages/``, ``dist-packages/``). One Document per file. PSF-2.0.
"""

from __future__ import annotations

import sysconfig
from collections.abc import Iterator
from pathlib import Path

from openafm.data.document import Document
from openafm.data.sources.base import MissingSourceError, Source, spread

SKIP_DIRS = frozenset({"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"})


def stdlib_files(root: Path | None = None) -> list[Path]:
    root = Path(root or sysconfig.get_paths()["stdlib"])
    if not root.is_dir():
        raise MissingSourceError(f"Python standard library sources not found at {root} "
                                 f"(install the Debian package libpython3-stdlib / python3)")
    return sorted(p for p in root.rglob("*.py") if not SKIP_DIRS.intersection(p.relative_to(root).parts[:-1]))


def _read(limit: int | None) -> Iterator[Document]:
    root = Path(sysconfig.get_paths()["stdlib"])
    for path in spread(stdlib_files(root), limit):
        rel = str(path.relative_to(root))
        yield Document(id=f"python-stdlib:{rel}", text=path.read_text(encoding="utf-8", errors="strict"),
                       source="python-stdlib", licence="PSF-2.0", domain="code",
                       meta={"file": rel, "programming_language": "python"})


SOURCE = Source(name="python-stdlib", domain="code", licence="PSF-2.0", provided_by="the Python installation",
                read=_read, description="Python standard library sources, one document per file")
