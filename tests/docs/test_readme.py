"""The README: at most 200 lines, no tracker numbers, a stack picture true to the package's rooms, links that
resolve, and a measured table whose every number is the value at the results file and key its row cites (and
whose met / missed verdicts follow from those values)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from docs.readme_table import meets, parse_row, table_lines

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "hooks"))     # the site's hooks are modules, not a package
from citations import agrees
from results_data import at

README = (ROOT / "README.md").read_text(encoding="utf-8")
ROWS = [parse_row(line) for line in table_lines(README)]
TRACKER = re.compile(r"\b(issue|task)\s+#?\d+", re.IGNORECASE)


def test_the_readme_is_short():
    lines = README.count("\n")
    assert 100 <= lines <= 200, f"README.md has {lines} lines (at most 200)"


@pytest.mark.parametrize("path", ["README.md", *sorted(p.relative_to(ROOT).as_posix()
                                                       for p in (ROOT / "docs").rglob("*.md"))])
def test_no_tracker_numbers_where_users_read(path):
    found = TRACKER.findall((ROOT / path).read_text(encoding="utf-8"))
    assert not found, f"{path} mentions {found}"


def test_the_measured_table_has_its_rows():
    assert len(ROWS) >= 12, f"only {len(ROWS)} rows in the measured table"
    assert {row.verdict for row in ROWS} >= {"met", "missed"}


@pytest.mark.parametrize("row", ROWS, ids=[row.key for row in ROWS])
def test_each_measured_number_is_its_results_value(row):
    value = at(row.file, row.key)
    if row.value in ("yes", "no"):
        assert value is (row.value == "yes"), f"{row.what}: README says {row.value}, {row.file} has {value!r}"
        return
    assert agrees(row.value, value, row.percent), f"{row.what}: README says {row.value}, {row.file} has {value!r}"
    if row.target:
        verdict = "met" if meets(row, value) else "missed"
        assert row.verdict == verdict, f"{row.what}: {value!r} against {row.target} {row.bound} is {verdict}"


def stack_rooms(markdown: str) -> set[str]:
    """The rooms named in the first ```text block: the names before the description on each line."""
    block = markdown.split("```text\n", 1)[1].split("```", 1)[0]
    rooms = set()
    for line in block.splitlines():
        if not line.strip() or line.lstrip().startswith("▲"):
            continue
        names = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
        rooms |= {name.strip() for name in names.split("·")}
    return rooms


@pytest.mark.parametrize("path", ["README.md", "docs/index.md"])
def test_the_stack_picture_names_every_room_and_no_other(path):
    package = ROOT / "src" / "openafm"
    real = {p.name for p in package.iterdir() if (p / "__init__.py").is_file()}
    real |= {p.stem for p in package.glob("*.py") if p.name != "__init__.py"}
    drawn = stack_rooms((ROOT / path).read_text(encoding="utf-8"))
    assert drawn == real, f"{path}: drawn but not in src/openafm: {drawn - real}; missing: {real - drawn}"


def test_relative_links_resolve():
    links = re.findall(r"\]\(((?!https?:)[^)#]+)(?:#[^)]*)?\)", README)
    assert len(links) >= 15, links
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, f"README links to missing files: {missing}"


def test_the_readme_keeps_the_set_up_commands():
    assert "make demo   # creates .venv" in README and "make test   # same set-up" in README
    assert "make docs" in README
