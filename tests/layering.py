"""The layering rule of src/openafm, read from the source: who may import whom, and the checks that enforce it.

The spine runs one way, each layer importing only layers below it:

    foundation (errors, config, io, splits) ◀ nn, tokenizer ◀ models ◀ checkpoint ◀ runtime ◀ fm ◀ front door (api, cli,
    commands, serve, the package root)

Beside the spine sit data, train, compress, eval, rl, distributed and pipelines: they import the spine (up to
fm, never the front door) and each other only along SIDE_MAY_IMPORT; the spine never imports them. Nothing
imports the front door but the front door itself; within it, nothing imports cli (it only dispatches) and only
commands import serve (`openafm serve` lives in commands/serve.py).

Inside a layer, some rooms are ordered too (ROOMS): a room imports only rooms of a lower rank in its layer, and
never a sibling of the same rank, except for the modules named in ROOM_EXCEPTIONS. Imports are read with `ast`
(module level and inside functions alike), so the rules hold for lazy imports too.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

FRONT = 6
SPINE_RANK = {"errors": 0, "config": 0, "io": 0, "splits": 0, "nn": 1, "tokenizer": 1, "models": 2, "checkpoint": 3, "runtime": 4,
              "fm": 5, "api": FRONT, "cli": FRONT, "commands": FRONT, "serve": FRONT, "": FRONT}
SIDE_MAY_IMPORT = {
    "distributed": set(),
    "data": set(),
    "eval": {"data"},
    "train": {"data", "distributed", "eval"},
    "compress": {"data", "eval", "train"},
    "rl": {"compress", "data", "eval", "train"},
    "pipelines": {"compress", "data", "distributed", "eval", "rl", "train"},
}

# Rooms inside a layer, by rank: the key is the package path under openafm ("rl" is rl's own modules, the
# algorithm); a room may import rooms of lower rank only.
ROOMS = {
    "rl": {"rl.rewards": 0, "rl.preference": 1, "rl.synthesis": 1, "rl": 2, "rl.system": 3},
    "train": {"train": 0, "train.vision": 1},
    "fm": {"fm.jsonschema": 0, "fm": 1},
}
# The few modules of a higher room a lower one may still import: the compiler of JSON Schemas raises the SDK's
# error types and checks patterns with the guides' regex engine.
ROOM_EXCEPTIONS = {"fm.jsonschema": {"openafm.fm.errors", "openafm.fm.guide"}}


@dataclasses.dataclass(frozen=True)
class Import:
    file: Path          # the importing file
    line: int
    importer: str       # dotted module name of the importing file
    target: str         # dotted module name imported (a module or a package)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.importer} imports {self.target}"


def module_name(root: Path, file: Path) -> str:
    parts = file.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def resolve(root: Path, dotted: str) -> str:
    """The longest prefix of `dotted` that is a module or package under root (so `from p import name` of a
    function resolves to p, and of a submodule to p.name)."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        base = root.joinpath(*parts[:n])
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            return ".".join(parts[:n])
    return parts[0]


def read_imports(root: Path, package: str = "openafm") -> list[Import]:
    """Every import of `package` by a file under root/package (root: the directory holding the package)."""
    found = []
    for file in sorted((root / package).rglob("*.py")):
        importer = module_name(root, file)
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"), str(file))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                if name == package or name.startswith(package + "."):
                    found.append(Import(file, node.lineno, importer, resolve(root, name)))
    return found


def layer(module: str) -> str:
    """openafm.fm.session -> "fm"; openafm.api -> "api"; openafm -> "" (the package root)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def room(module: str) -> str | None:
    """openafm.rl.system.buffer -> "rl.system"; openafm.rl.run -> "rl"; None for a layer without ROOMS."""
    parts = module.split(".")[1:]
    rooms = ROOMS.get(parts[0]) if parts else None
    if rooms is None:
        return None
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in rooms:
            return ".".join(parts[:n])
    return None


def room_violation(imp: Import) -> str | None:
    """Why an import inside one layer breaks the order of its rooms, or None."""
    src, dst = room(imp.importer), room(imp.target)
    if src is None or dst is None or src == dst or imp.target in ROOM_EXCEPTIONS.get(src, ()):
        return None
    ranks = ROOMS[layer(imp.importer)]
    if ranks[dst] >= ranks[src]:
        return f"the room {src} (rank {ranks[src]}) must not import {dst} (rank {ranks[dst]}): rooms import only " \
               f"rooms of a lower rank"
    return None


def violation(imp: Import) -> str | None:
    """Why this import breaks the layering, or None."""
    src, dst = layer(imp.importer), layer(imp.target)
    if src == dst:
        return room_violation(imp)
    for name in (src, dst):
        if name not in SPINE_RANK and name not in SIDE_MAY_IMPORT:
            return f"{name!r} is in no layer: add it to the spine or beside it in tests/layering.py"
    if SPINE_RANK.get(src) == FRONT:
        if dst == "cli":
            return "nothing imports the entry point cli"
        if dst == "serve" and src != "commands":
            return f"only commands import serve (the server's subcommand), not {src or 'openafm'}"
        return None
    if SPINE_RANK.get(dst) == FRONT:
        return f"{src} must not import the front door ({dst or 'openafm'}): load models through " \
               f"openafm.checkpoint.load"
    if src in SPINE_RANK:
        if dst in SIDE_MAY_IMPORT:
            return f"the spine ({src}) must not import {dst}, which sits beside it"
        if SPINE_RANK[dst] > SPINE_RANK[src]:
            return f"{src} (layer {SPINE_RANK[src]}) must not import {dst} (layer {SPINE_RANK[dst]}), a layer above it"
        return None
    if dst in SIDE_MAY_IMPORT and dst not in SIDE_MAY_IMPORT[src]:
        return f"{src} may import {sorted(SIDE_MAY_IMPORT[src]) or 'no other side package'}, not {dst}"
    return None


def violations(imports: list[Import]) -> list[str]:
    return [f"{imp}: {why}" for imp in imports if (why := violation(imp)) is not None]


def cycles(imports: list[Import]) -> list[list[str]]:
    """Import cycles between files (a package's __init__ counts as the package's file); each as a path a -> ... -> a.
    Tarjan's strongly connected components, each non-trivial one reported with one cycle through it."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        if imp.target != imp.importer:
            graph.setdefault(imp.importer, set()).add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(set(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_one_cycle(graph, c) for c in components]


def _one_cycle(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, ())):
                if w == start:
                    return paths[v] + [start]
                if w in component and w not in paths:
                    paths[w] = paths[v] + [w]
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle through {start} in {sorted(component)}")
