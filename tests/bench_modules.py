"""Import a script of benchmarks/ as a module, for tests of its non-timing pieces."""

import importlib.util
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(name: str):
    """benchmarks/<name>.py as a module (benchmarks/ on sys.path while it imports its siblings)."""
    saved = list(sys.path)
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module                     # dataclasses look their module up there
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
    return module
