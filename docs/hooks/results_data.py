"""Reading docs/results/*.json for the site: files by name, values by key path, Markdown tables, numbers.

A key path is the keys from the top of a file down to a value, joined by "/" ("llama_bench/q4_1/decode_ratio");
list items are addressed by their index. Every miss raises naming the file and the key, so a benchmark that renames
a field breaks the build instead of leaving a stale number on the site.
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[1] / "results"


class ResultKeyError(LookupError):
    """A key path that a results file does not have."""


@cache
def load(name: str) -> Any:
    path = RESULTS / name
    if not path.is_file():
        raise FileNotFoundError(f"no results file {name!r} in {RESULTS}")
    return json.loads(path.read_text(encoding="utf-8"))


def at(name: str, key_path: str) -> Any:
    """The value at `key_path` in results file `name`."""
    value = load(name)
    for i, key in enumerate(key_path.split("/")):
        if isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        elif isinstance(value, dict) and key in value:
            value = value[key]
        else:
            where = "/".join(key_path.split("/")[:i]) or "the top level"
            keys = sorted(value) if isinstance(value, dict) else f"a {type(value).__name__}"
            raise ResultKeyError(f"{name}: no key {key!r} under {where} (has {keys})")
    return value


def num(value: Any, spec: str = ".2f", suffix: str = "") -> str:
    """A number for a table cell: formatted with `spec`, "—" for a missing value, yes/no for a boolean."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)):
        return f"{value:{spec}}{suffix}"
    return str(value)


def interval(value: float, ci: list[float] | None, spec: str = ".2f") -> str:
    """A value with its 95% interval: 0.30 [0.11, 0.60]."""
    if not ci:
        return num(value, spec)
    return f"{value:{spec}} [{ci[0]:{spec}}, {ci[1]:{spec}}]"


def table(headers: list[str], rows: list[list[str]], align: str | None = None) -> str:
    """A Markdown table; `align` is one letter per column (l, r, c), left by default."""
    if any(len(row) != len(headers) for row in rows):
        raise ValueError(f"a row's length differs from the headers' ({len(headers)}): {rows}")
    marks = {"l": "---", "r": "---:", "c": ":---:"}
    align = align or "l" * len(headers)
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(marks[a] for a in align) + " |"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def flatten(value: Any, prefix: str = "", short_list: int = 8) -> list[tuple[str, str]]:
    """(key path, shown value) for every scalar of a file; lists of scalars up to `short_list` items are shown whole,
    longer lists and lists of records as a count."""
    if isinstance(value, dict):
        out = []
        for key, item in value.items():
            out += flatten(item, f"{prefix}/{key}" if prefix else str(key), short_list)
        return out
    if isinstance(value, list):
        scalars = all(not isinstance(v, (dict, list)) for v in value)
        if scalars and len(value) <= short_list:
            return [(prefix, "[" + ", ".join(scalar(v) for v in value) + "]")]
        kind = "values" if scalars else "records"
        return [(prefix, f"({len(value)} {kind})")]
    return [(prefix, scalar(value))]


def scalar(value: Any) -> str:
    """A JSON scalar as the file has it (floats to 4 significant digits), long strings cut at 120 characters."""
    text = f"{value:.4g}" if isinstance(value, float) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 120 else text[:117] + "…"
