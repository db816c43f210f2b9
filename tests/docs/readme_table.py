"""The README's "What works, measured" table as data: rows with their measured value, target and cited source.

Row format (a Markdown table under the heading ``## What works, measured``):

    | what | measured | target | source |
    | ... | **0.90×** | ≥ 0.9: met | `decode_llama_bench.json` `llama_bench/q4_1/openafm_decode_ratio` |

The measured value is the first bold text of its cell: a number (with an optional %, read as the value × 100) or
yes/no for a boolean. The target is "—", or "≥ X", "≤ X" or "within ±X" followed by ": met" or ": missed". The
source cell names the results file and the key path, each in backticks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HEADING = "## What works, measured"
MEASURED = re.compile(r"\*\*(?P<value>[+-]?\d[\d,]*(?:\.\d+)?|yes|no)(?P<percent>%)?")
TARGET = re.compile(r"^(?:(?P<op>≥|≤|within ±)\s*(?P<bound>\d+(?:\.\d+)?)(?P<percent>%)?: "
                    r"(?P<verdict>met|missed)|—)$")
SOURCE = re.compile(r"^`(?P<file>[\w.-]+\.json)` `(?P<key>[^`]+)`$")


@dataclass(frozen=True)
class Row:
    what: str
    value: str          # as typed: "0.90", "+15.2", "yes"
    percent: bool
    target: str         # "≥", "≤", "within ±" or "" (no target)
    bound: float | None
    verdict: str        # "met", "missed" or ""
    file: str
    key: str


def table_lines(readme: str) -> list[str]:
    """The table rows under the heading (header and separator excluded)."""
    if HEADING not in readme:
        raise ValueError(f"the README has no {HEADING!r} section")
    lines = readme.split(HEADING, 1)[1].splitlines()
    rows = [line for line in lines[:next((i for i, l in enumerate(lines[1:], 1) if l.startswith("## ")), None)]
            if line.startswith("|")]
    return rows[2:]


def parse_row(line: str) -> Row:
    cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
    if len(cells) != 4:
        raise ValueError(f"a measured row needs 4 cells (what, measured, target, source), got {len(cells)}: {line}")
    what, measured, target, source = cells
    m, t, s = MEASURED.search(measured), TARGET.match(target), SOURCE.match(source)
    if not m:
        raise ValueError(f"no bold number or yes/no in the measured cell {measured!r}")
    if not t:
        raise ValueError(f"target {target!r} is not '—' or '≥ X: met|missed' / '≤ X: ...' / 'within ±X: ...'")
    if not s:
        raise ValueError(f"source {source!r} is not `file.json` `key/path`")
    bound = float(t["bound"]) if t["bound"] else None
    return Row(what, m["value"], bool(m["percent"]), t["op"] or "", bound, t["verdict"] or "", s["file"], s["key"])


def meets(row: Row, value: float) -> bool:
    """Whether the measured value meets the row's target."""
    shown = value * 100 if row.percent else value
    if row.target == "≥":
        return shown >= row.bound - 1e-9
    if row.target == "≤":
        return shown <= row.bound + 1e-9
    return abs(shown) <= row.bound
