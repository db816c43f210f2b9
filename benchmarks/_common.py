"""Shared helpers of the benchmark scripts: argument parsing, interleaved timing, JSON output, another git
revision's sources to measure beside this tree's."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
QUIET_LOAD = 1.0     # below this the machine counts as quiet (2 cores; one busy core reads ~1)
SETTLE_S = 150.0


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--json", action="store_true", help="print one JSON object (and nothing else) to stdout")
    p.add_argument("--repeats", type=int, default=5, help="timed repetitions per variant (medians are reported)")
    return p


def add_settle(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The speed benchmarks' --settle option (see `settle`)."""
    p.add_argument("--settle", type=float, default=SETTLE_S, metavar="SECONDS",
                   help=f"speed benchmarks first wait up to this long for the 1-minute load average to fall below "
                        f"{QUIET_LOAD} (it lags: right after another 2-core run it reads ~1.5 for a minute); 0: start "
                        f"at once. The load at the start is recorded either way (default {SETTLE_S:g})")
    return p


def settle(wait_s: float, *, quiet: float = QUIET_LOAD, poll_s: float = 5.0) -> float:
    """Wait until the 1-minute load average is below `quiet`, at most `wait_s` seconds -> the load average then.
    Says on stderr what it waits for, and loudly when it gives up (the figures that follow are then taken under
    load: compare them with care)."""
    if wait_s < 0:
        raise ValueError(f"--settle {wait_s!r}: use a number of seconds >= 0")
    load, waited = os.getloadavg()[0], 0.0
    if load >= quiet and wait_s > 0:
        log(f"load average {load:.2f} >= {quiet}: waiting up to {wait_s:g} s for it to fall (--settle)")
    while load >= quiet and waited < wait_s:
        time.sleep(min(poll_s, wait_s - waited))
        waited += poll_s
        load = os.getloadavg()[0]
    if load >= quiet:
        log(f"WARNING: starting at load average {load:.2f} (>= {quiet}): another process is using the CPU, and "
            f"speed figures taken now are noise")
    return load


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


def revision_tree(rev: str, into: Path) -> Path:
    """REV's src/openafm unpacked under `into` (git archive) -> the directory to put on PYTHONPATH; SystemExit naming
    REV when git cannot give it. A worker importing openafm from there builds REV's kernels from REV's csrc."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src/openafm"], capture_output=True, check=False)
    if archive.returncode != 0:
        raise SystemExit(f"--against {rev!r}: git archive failed: {archive.stderr.decode()[-500:]}")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "src"
