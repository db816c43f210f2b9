"""CPU threads: openafm makes idle OpenMP workers sleep unless the environment chose, `--threads` sets torch's
thread count (a bad value is named), and the timing line says what was used."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from openafm.errors import ConfigError
from openafm.runtime.threads import set_threads, threads_summary, usable_cores


def _policy_after_import(env: dict) -> str:
    code = "import os, openafm; print(os.environ['OMP_WAIT_POLICY'])"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_wait_policy_defaults_to_passive_and_respects_the_environment():
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    assert _policy_after_import(env) == "PASSIVE"
    assert _policy_after_import({**env, "OMP_WAIT_POLICY": "ACTIVE"}) == "ACTIVE"


def test_set_threads_and_the_summary():
    before = torch.get_num_threads()
    try:
        assert set_threads(1) == 1 == torch.get_num_threads()
        assert threads_summary().startswith(f"threads 1 of {usable_cores()} usable, wait ")
        assert set_threads(None) == 1                       # None keeps the current choice
        for bad in (0, -2, True, 1.5):
            with pytest.raises(ConfigError, match=f"--threads {bad!r}"):
                set_threads(bad)
    finally:
        torch.set_num_threads(before)


def test_usable_cores_is_the_affinity():
    assert usable_cores() == len(os.sched_getaffinity(0)) >= 1
