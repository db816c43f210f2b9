"""Helpers of the trainer tests: tiny configs, and CLI runs in a subprocess that can be SIGKILLed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

SRC = str(Path(__file__).resolve().parents[2] / "src")


def tiny_config(run_dir, **changes) -> dict:
    config = dict(model="afm-ondevice-tiny", run_dir=str(run_dir), steps=24, batch_size=4, grad_accum=2, seq_len=32,
                  peak_flops=1e10, progress=False, checkpoint=dict(every=4, keep=2),
                  optimizer=dict(lr=3e-3), schedule=dict(kind="wsd", warmup_steps=3, decay_steps=6))
    config.update(changes)
    return config


def write_config(path, config: dict) -> Path:
    path = Path(path)
    path.write_text(yaml.safe_dump(config))
    return path


def env() -> dict:
    return dict(os.environ, PYTHONPATH=SRC, OMP_NUM_THREADS="1")


def train_cli(config_path, *extra: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "openafm.cli", "train", str(config_path), *extra], env=env(),
                          capture_output=True, text=True, timeout=timeout)


def count_lines(path: Path) -> int:
    try:
        return path.read_text().count("\n")
    except FileNotFoundError:
        return 0


def train_and_kill(config_path, metrics_path: Path, kill_at_line: int, timeout: float = 120) -> int:
    """Start `openafm train --resume`, SIGKILL it once the metrics file has kill_at_line lines.
    -> the line count seen when it died (the run may have got a little further than asked)."""
    proc = subprocess.Popen([sys.executable, "-m", "openafm.cli", "train", str(config_path), "--resume"], env=env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout
    while count_lines(metrics_path) < kill_at_line:
        if proc.poll() is not None:
            raise RuntimeError(f"training ended before line {kill_at_line} (rc {proc.returncode}): "
                               f"{proc.stderr.read()[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            raise TimeoutError("training did not reach the kill point")
        time.sleep(0.002)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return count_lines(metrics_path)
