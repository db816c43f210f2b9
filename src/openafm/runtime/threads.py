"""CPU threads for inference: how many torch uses, and whether idle OpenMP workers spin or sleep.

OpenMP's default lets an idle worker spin for a while before it sleeps. On a machine where another CPU-bound
process runs (a test run, a second model, the other half of an RL job, CI), spinning workers take the cores the
busy thread needs. Measured here with `openafm generate --chat ... --max-tokens 64` on the 2-core machine, decode
tokens/s (two runs each):

                          quiet         beside one CPU-bound process
    default (spinning)    22.2, 23.0    9.4, 9.3
    OMP_WAIT_POLICY=PASSIVE  22.6, 22.0    21.3, 24.0
    OMP_NUM_THREADS=1     23.5, 23.4    24.5, 24.6

So openafm sets OMP_WAIT_POLICY=PASSIVE when the environment does not choose (openafm/__init__.py, before torch
loads OpenMP; it reads the variable once, at load), and `--threads N` sets torch's intra-op threads. The timing
line says what was used: `threads 2 of 2 usable, wait passive`.
"""

from __future__ import annotations

import os

import torch

from openafm.errors import ConfigError

WAIT_ENV = "OMP_WAIT_POLICY"
DEFAULT_WAIT = "PASSIVE"


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), not the machine's count."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def wait_policy() -> str:
    """What OpenMP was told (the environment at torch's load): 'passive', 'active', or 'default'."""
    return os.environ.get(WAIT_ENV, "default").lower()


def set_threads(threads: int | None) -> int:
    """Use `threads` intra-op threads (None: keep torch's choice). -> the count in use."""
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ConfigError(f"--threads {threads!r}: use an integer >= 1 (this process may use {usable_cores()} "
                              f"cores)")
        torch.set_num_threads(threads)
    return torch.get_num_threads()


def threads_summary() -> str:
    return f"threads {torch.get_num_threads()} of {usable_cores()} usable, wait {wait_policy()}"
