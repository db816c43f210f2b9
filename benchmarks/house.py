"""The state of the house, measured from the tree: README length, documentation build and snippets, long functions and
long parameter lists, helpers that exist more than once, and (with --suite) the test suite's wall time and split.

    python benchmarks/house.py --json                # ~1 min: AST counts, docs build, doc snippets
    python benchmarks/house.py --json --suite        # + the whole test suite (~9 min on 2 cores)

Functions are counted over src/openafm with `ast`: lines from `def` to the last line of the body (decorators
excluded), parameters as named in the signature (self/cls, *args and **kwargs not counted).
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, log, parser

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "openafm"
LONG_LINES, MANY_PARAMS = 80, 8


def functions() -> list[tuple[str, int, int]]:
    """(qualified name, lines, parameters) of every function and method under src/openafm."""
    found = []
    for file in sorted(SRC.rglob("*.py")):
        tree = ast.parse(file.read_text(encoding="utf-8"))
        module = ".".join(file.relative_to(SRC.parent).with_suffix("").parts)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")]
                found.append((f"{module}.{node.name}", node.end_lineno - node.lineno + 1, len(names)))
    return found


def repeated_helpers() -> dict[str, list[str]]:
    """Modules that define each helper the house keeps once: a Split enum, an atomic file write (a temporary file
    renamed into place), a JSON Lines parser (json.loads per line), a YAML file reader."""
    found: dict[str, list[str]] = {"split_enum": [], "atomic_write": [], "jsonl_parse": [], "read_yaml": []}
    for file in sorted(SRC.rglob("*.py")):
        text = file.read_text(encoding="utf-8")
        rel = str(file.relative_to(SRC.parent))
        if re.search(r"^class Split\b", text, re.M):
            found["split_enum"].append(rel)
        if re.search(r"\bos\.(replace|rename)\(", text) and re.search(r"tmp|temp", text):
            found["atomic_write"].append(rel)
        if re.search(r"json\.loads\((line|raw_line|x)\b", text) or re.search(r"map\(json\.loads", text):
            found["jsonl_parse"].append(rel)
        if re.search(r"yaml\.safe_load\(", text):
            found["read_yaml"].append(rel)
    return found


def docs_build() -> dict:
    """Build the site with --strict into a temporary folder: seconds and warnings (Material's banner about MkDocs 2
    is turned off, as in the doc tests: it is a notice about the future, not a warning about this site)."""
    with tempfile.TemporaryDirectory() as out:
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", out], cwd=ROOT,
                              capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
        seconds = time.perf_counter() - t
    warnings = [line for line in proc.stderr.splitlines() if "WARNING" in line]
    return {"docs_build_seconds": round(seconds, 1), "docs_warnings": len(warnings), "docs_build_ok": proc.returncode == 0,
            "docs_warning_lines": warnings[:20]}


def pytest_junit(args: list[str]) -> tuple[float, ET.Element]:
    """Run pytest with a JUnit XML report: (wall seconds, the report's root)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", *args],
                       cwd=ROOT, capture_output=True, text=True)
        return time.perf_counter() - t, ET.parse(report).getroot()


def outcomes(root: ET.Element) -> dict[str, int]:
    """passed / failed / skipped (strict xfails are reported as skipped in JUnit XML)."""
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for case in root.iter("testcase"):
        kinds = {child.tag for child in case}
        key = "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed"
        counts[key] += 1
    return counts


def doc_snippets() -> dict:
    sys.path.insert(0, str(ROOT / "tests"))
    from docs.snippets import collect       # the collector the doc tests use
    total = len(collect(["README.md", "docs"], root=ROOT))
    _, root = pytest_junit(["tests/docs/test_snippets.py"])
    ran = [c for c in root.iter("testcase") if c.get("name", "").startswith("test_snippet_runs[")]
    passed = sum(1 for c in ran if not {child.tag for child in c} & {"failure", "error", "skipped"})
    return {"doc_snippets_total": total, "doc_snippets_run": passed}


def real_model_ids() -> set[tuple[str, str]]:
    """(file stem, test name) of the tests marked real_model (they load the embedded model), from a collection."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "real_model", "-p",
                           "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True)
    ids = set()
    for line in proc.stdout.splitlines():
        if "::" in line:
            file, _, name = line.partition("::")
            ids.add((Path(file).stem, name.split("::")[-1]))
    return ids


def suite() -> dict:
    """The whole suite once, its time split by test folder and between tests that load the real model and not."""
    real = real_model_ids()
    seconds, root = pytest_junit(["--durations=0"])
    by_folder: dict[str, float] = {}
    real_s = other_s = 0.0
    for case in root.iter("testcase"):
        took = float(case.get("time", 0))
        module = case.get("classname", "")
        parts = module.split(".")          # tests.rl.test_pairs -> rl; tests.test_io -> (top)
        folder = parts[1] if len(parts) > 2 else "(top)"
        by_folder[folder] = by_folder.get(folder, 0.0) + took
        if (parts[-1], case.get("name", "")) in real:
            real_s += took
        else:
            other_s += took
    top = dict(sorted(((k, round(v)) for k, v in by_folder.items()), key=lambda kv: -kv[1]))
    failed = [f"{c.get('classname')}::{c.get('name')}" for c in root.iter("testcase")
              if {child.tag for child in c} & {"failure", "error"}]
    return {"suite_seconds": round(seconds), "suite_tests": outcomes(root), "suite_failed": failed,
            "suite_seconds_by_folder": top,
            "suite_seconds_real_model_tests": round(real_s), "suite_real_model_tests": len(real),
            "suite_seconds_other_tests": round(other_s)}


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--suite", action="store_true", help="also run the whole test suite and time it (~9 min)")
    args = p.parse_args()
    fns = functions()
    long_fns = sorted((name, n) for name, n, _ in fns if n > LONG_LINES)
    many = sorted((name, k) for name, _, k in fns if k > MANY_PARAMS)
    helpers = repeated_helpers()
    result = {
        "readme_lines": len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()),
        "functions": len(fns),
        "functions_over_80_lines": len(long_fns), "functions_over_80_lines_names": [f"{n} ({k})" for n, k in long_fns],
        "functions_over_8_params": len(many), "functions_over_8_params_names": [f"{n} ({k})" for n, k in many],
        "atomic_write_copies": len(helpers["atomic_write"]), "split_enum_copies": len(helpers["split_enum"]),
        "jsonl_parse_copies": len(helpers["jsonl_parse"]), "read_yaml_copies": len(helpers["read_yaml"]),
        "repeated_helper_modules": helpers,
    }
    log("building the docs site")
    result |= docs_build()
    log("running the doc snippets")
    result |= doc_snippets()
    if args.suite:
        log("running the whole test suite")
        result |= suite()
    emit(result, args.json)


if __name__ == "__main__":
    main()
