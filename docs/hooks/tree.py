"""The package tree of src/openafm as data: each package, its summary line and its modules' summary lines.

Read with ``ast`` (no import: the build needs neither torch nor the C++ kernels), walked afresh on every build so
the API reference and the layout page follow whatever the tree holds when the site is built. A package is a
folder with an ``__init__.py``; a module is any other ``.py`` file in it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
ROOT_PACKAGE = "openafm"


@dataclass(frozen=True)
class Module:
    name: str          # dotted: openafm.fm.session
    summary: str       # the docstring's first paragraph on one line ("" when it has none)


@dataclass(frozen=True)
class Package:
    name: str                       # dotted: openafm.fm
    path: Path                      # its folder
    summary: str
    modules: list[Module] = field(default_factory=list)

    @property
    def depth(self) -> int:
        return self.name.count(".")


def summary(path: Path) -> str:
    """The first paragraph of a file's module docstring, on one line; "" when the file has no docstring."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    doc = ast.get_docstring(tree)
    if not doc:
        return ""
    return " ".join(doc.strip().split("\n\n", 1)[0].split())


def packages(src: Path = SRC, root: str = ROOT_PACKAGE) -> list[Package]:
    """Every package under src/<root>, parents before children, siblings by name."""
    top = src / root
    if not (top / "__init__.py").is_file():
        raise FileNotFoundError(f"no package {root!r} under {src}: {top / '__init__.py'} is missing")
    found = []
    for init in sorted(top.rglob("__init__.py")):
        folder = init.parent
        if any(part.startswith((".", "_")) for part in folder.relative_to(src).parts):
            continue
        name = ".".join(folder.relative_to(src).parts)
        modules = [Module(f"{name}.{py.stem}", summary(py)) for py in sorted(folder.glob("*.py"))
                   if py.name != "__init__.py"]
        found.append(Package(name, folder, summary(init), modules))
    return sorted(found, key=lambda p: p.name.split("."))
