"""Every zip() in the tests says whether its sequences must be equally long: a plain zip stops at the shorter one,
so a check looping over zip(expected, got) passes without comparing anything when `got` comes back empty."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def zips_without_strict(root: Path) -> list[str]:
    """file:line of each zip(...) call under `root` without an explicit strict= keyword."""
    found = []
    for path in sorted(root.rglob("*.py")):
        lines = sorted(node.lineno for node in ast.walk(ast.parse(path.read_text(), filename=str(path)))
                       if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "zip"
                       and not any(k.arg == "strict" for k in node.keywords))
        found += [f"{path.relative_to(root.parent)}:{line}" for line in lines]
    return found


def test_every_zip_in_the_tests_says_strict():
    found = zips_without_strict(TESTS)
    assert not found, ("zip() without strict= (strict=True where the sequences must match, strict=False with a "
                       "comment where stopping at the shorter is meant):\n" + "\n".join(found))


def test_the_check_names_file_and_line_of_each_zip_without_strict(tmp_path):
    (tmp_path / "tests" / "sub").mkdir(parents=True)
    (tmp_path / "tests" / "sub" / "test_x.py").write_text(
        "a = zip([1], [2], strict=True)\nb = zip([1], [2])\nc = [zip(x, y, strict=False) for x, y in zip(p, q)]\n"
        "d = zip(*pairs, **options)\n")
    assert zips_without_strict(tmp_path / "tests") == ["tests/sub/test_x.py:2", "tests/sub/test_x.py:3",
                                                       "tests/sub/test_x.py:4"]
