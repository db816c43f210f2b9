"""The pieces the documentation tests and the site's hooks stand on: the snippet collector, the checked citations,
the results key paths and the package walk."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from docs.snippets import LOCAL_SERVER, collect, fenced_blocks

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "hooks"))     # the site's hooks are modules, not a package
import tree
from citations import agrees, problems
from results_data import ResultKeyError, at, flatten

PAGE = """# A page

```python
print("one")
```

1. A list item with a block:

    ```py
    x = 1
    ```

~~~bash
openafm demo
~~~

````markdown
```python
not a block of its own
```
````

```pycon
>>> 1 + 1
2
```
"""


def test_fenced_blocks_reads_languages_lines_and_indentation():
    blocks = fenced_blocks(PAGE)
    assert [(line, lang) for line, lang, _ in blocks] == [(3, "python"), (9, "py"), (13, "bash"), (17, "markdown"),
                                                        (23, "pycon")]
    assert blocks[1][2] == "x = 1\n"                          # dedented by the fence's indentation
    assert "not a block of its own" in blocks[3][2]           # a longer fence holds a shorter one


def test_an_unclosed_fence_raises_naming_its_line():
    with pytest.raises(ValueError, match="opened at line 2 is never closed"):
        fenced_blocks("text\n```python\nprint(1)\n")


def test_collect_keeps_python_blocks_with_their_ids(tmp_path):
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "page.md").write_text(PAGE, encoding="utf-8")
    (tmp_path / "guide" / "server.md").write_text(f'```python\nurl = "{LOCAL_SERVER}/v1"\n```\n', encoding="utf-8")
    snippets = collect(["guide"], root=tmp_path)
    assert [s.id for s in snippets] == ["guide/page.md:3", "guide/page.md:9", "guide/page.md:23", "guide/server.md:1"]
    assert [s.is_doctest for s in snippets] == [False, False, True, False]
    assert [s.uses_server for s in snippets] == [False, False, False, True]
    with pytest.raises(FileNotFoundError, match="nothing.md"):
        collect(["nothing.md"], root=tmp_path)


@pytest.mark.parametrize("typed, value, percent, expected", [
    ("0.90", 0.9021, False, True), ("0.91", 0.9021, False, False), ("1,513", 1512.775, False, True),
    ("+15.2", 15.1786, False, True), ("34.6", 0.346, True, True), ("35", 0.346, True, True),
    ("0.35", 0.346, False, True), ("0.3", 0.346, False, True), ("0.4", 0.346, False, False),
    ("1", True, False, False), ("2", "2", False, False)])
def test_agrees_rounds_to_the_typed_decimals(typed, value, percent, expected):
    assert agrees(typed, value, percent) is expected


def test_problems_name_the_line_and_what_is_wrong():
    value = at("decode_llama_bench.json", "llama_bench/q4_1/openafm_decode_ratio")     # the file as it is now
    page = (f"fine: **{value:.2f}×**<!-- result: decode_llama_bench.json llama_bench/q4_1/openafm_decode_ratio -->\n"
            f"wrong: {value + 0.1:.2f}×<!-- result: decode_llama_bench.json llama_bench/q4_1/openafm_decode_ratio -->\n"
            "no key: 1<!-- result: decode.json no/such/key -->\n"
            "no number: <!-- result: decode.json threads -->\n")
    found = problems(page)
    assert len(found) == 3, found
    assert found[0].startswith("line 4: a result citation without a number")
    assert f"line 2: {value + 0.1:.2f} does not agree with decode_llama_bench.json" in found[1]
    assert "line 3: decode.json: no key 'no'" in found[2]


def test_a_missing_key_path_names_the_file_and_where():
    assert at("serve_load.json", "batched/c16/concurrency") == 16
    with pytest.raises(ResultKeyError, match=r"serve_load.json: no key 'c17' under batched \(has \['c1', 'c16'"):
        at("serve_load.json", "batched/c17/tokens_per_s")


def test_flatten_lists_every_scalar_by_key_path():
    rows = dict(flatten({"a": {"b": 1.23456, "c": [1, 2]}, "d": [{"e": 1}] * 3, "f": list(range(20))}))
    assert rows == {"a/b": "1.235", "a/c": "[1, 2]", "d": "(3 records)", "f": "(20 values)"}


def test_the_package_walk_finds_every_package_and_module():
    packages = tree.packages()
    src = ROOT / "src" / "openafm"
    inits = sorted(src.rglob("__init__.py"))
    assert packages[0].name == "openafm" and len(packages) == len(inits)
    modules = sum(len(p.modules) for p in packages)
    assert modules == len(list(src.rglob("*.py"))) - len(inits)
    assert all(p.summary for p in packages), [p.name for p in packages if not p.summary]
