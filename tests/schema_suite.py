"""The official JSON-Schema-Test-Suite for tests: its schemas and instances as a module fixture, read by the
benchmark that owns where the suite is cached (benchmarks/schema_coverage.py). `make test`'s set-up caches it; a
test using the fixture skips, saying so, where it is missing (tests make no network calls)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "schema_coverage.py"


def benchmark_module():
    """benchmarks/schema_coverage.py, which owns where the suite is cached and how it is read."""
    saved = list(sys.path)
    spec = importlib.util.spec_from_file_location("schema_coverage_benchmark", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # dataclasses look their module up while the file executes
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved           # the script puts benchmarks/ on sys.path for its own imports
    return module


@pytest.fixture(scope="module")
def cases():
    bench = benchmark_module()
    directory = bench.suite_dir()
    if not Path(directory).is_dir():
        pytest.skip(f"the JSON-Schema-Test-Suite is not cached at {directory}; run "
                    f"`python benchmarks/schema_coverage.py` once to download it (tests make no network calls)")
    found = bench.load_suite(directory)
    assert len(found) > 300, f"only {len(found)} schemas under {directory}: a partial cache?"
    return found


