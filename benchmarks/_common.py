"""Shared helpers of the benchmark scripts: argument parsing, interleaved timing, JSON output."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Callable


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--json", action="store_true", help="print one JSON object (and nothing else) to stdout")
    p.add_argument("--repeats", type=int, default=5, help="timed repetitions per variant (medians are reported)")
    return p


def interleaved(variants: dict[str, Callable[[], object]], repeats: int, warmup: int = 1) -> dict[str, list[float]]:
    """Run each variant once per round, round after round, so drift in machine speed hits all alike.
    Returns wall seconds per variant per round."""
    for _ in range(warmup):
        for fn in variants.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, fn in variants.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return times


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def emit(result: dict, as_json: bool) -> None:
    if as_json:
        json.dump(result, sys.stdout, indent=2)
        print()
    else:
        for key, value in _flatten(result):
            print(f"{key}: {value}")


def _flatten(d: dict, prefix: str = ""):
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            yield from _flatten(v, key + ".")
        else:
            yield key, (f"{v:.4g}" if isinstance(v, float) else v)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
