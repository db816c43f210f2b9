"""Every Python code block of README.md and docs/**/*.md runs (how: tests/docs/snippets.py's docstring).

There is no skip list: the number of tests is the number of blocks, and a block that cannot run fails. Blocks that
load the embedded default model are marked real_model; they take seconds each (small token budgets).
"""

from __future__ import annotations

import doctest
import io
from pathlib import Path

import pytest

import openafm
from docs.snippets import LOCAL_SERVER, collect
from live_server import live_server
from openafm.runtime.engine import EngineConfig

ROOT = Path(__file__).resolve().parents[2]
SNIPPETS = collect(["README.md", "docs"], root=ROOT)
REAL_MODEL_HINTS = ("openafm.load(", "LanguageModelSession", "SystemLanguageModel", LOCAL_SERVER)


def loads_model(code: str) -> bool:
    return any(hint in code for hint in REAL_MODEL_HINTS)


PARAMS = [pytest.param(s, id=s.id, marks=[pytest.mark.real_model] if loads_model(s.code) else [])
          for s in SNIPPETS]


@pytest.fixture(scope="module")
def server_url():
    with live_server(openafm.load(), EngineConfig(max_batch=4)) as (url, _):
        yield url


def run_doctest(code: str, name: str) -> None:
    test = doctest.DocTestParser().get_doctest(code, {"__name__": "__main__"}, name, name, 0)
    report = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    result = runner.run(test, out=report.write)
    assert result.attempted > 0, f"{name}: a doctest block with no examples"
    assert result.failed == 0, report.getvalue()


def test_every_page_with_examples_is_collected():
    pages = {s.path.as_posix() for s in SNIPPETS}
    assert "README.md" in pages and "docs/guides/framework.md" in pages, sorted(pages)
    assert len(SNIPPETS) >= 30, f"only {len(SNIPPETS)} Python blocks found in README.md and docs/"
    assert sum(s.uses_server for s in SNIPPETS) >= 1, "no snippet talks to `openafm serve`"


@pytest.mark.parametrize("snippet", PARAMS)
def test_snippet_runs(snippet, tmp_path, monkeypatch, request):
    monkeypatch.chdir(tmp_path)
    code = snippet.code
    if snippet.uses_server:
        code = code.replace(LOCAL_SERVER, request.getfixturevalue("server_url"))
    if snippet.is_doctest:
        run_doctest(code, snippet.id)
    else:
        padded = "\n" * snippet.line + code           # tracebacks give the Markdown file's own line numbers
        exec(compile(padded, str(snippet.path), "exec"), {"__name__": "__main__"})  # noqa: S102  (it is the test)
