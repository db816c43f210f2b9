"""Fault tolerance: a training run SIGKILLed 3 times at random steps (seeded) and resumed each time with
`openafm train --resume`, against the same run uninterrupted (both as CLI subprocesses). Reports the max abs
difference of the loss (and lr, grad-norm) curves — 0.0 means bit-identical — and
goodput = useful steps / steps executed, where the steps redone after each kill count as waste.

    python benchmarks/fault_tolerance.py --json
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, log, parser  # noqa: E402

from openafm.train.checkpoint import list_checkpoints
from openafm.train.metrics import read_metrics

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")


def _cmd(config: Path) -> list[str]:
    return [sys.executable, "-m", "openafm.cli", "train", str(config), "--resume"]


def _lines(path: Path) -> int:
    return path.read_text().count("\n") if path.exists() else 0


def run_with_kills(config: Path, run_dir: Path, kill_steps: list[int]) -> tuple[int, list[dict]]:
    """-> (steps executed over all attempts, one record per attempt)."""
    metrics = run_dir / "metrics.jsonl"
    executed, attempts = 0, []
    for kill_at in kill_steps + [None]:
        found = list_checkpoints(run_dir)
        start = found[-1][0] if found else 0
        proc = subprocess.Popen(_cmd(config), env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if kill_at is None:
            _, err = proc.communicate()
            if proc.returncode:
                raise RuntimeError(f"final attempt failed: {err[-2000:]}")
            reached = _lines(metrics)
        else:
            while _lines(metrics) < kill_at:
                if proc.poll() is not None:
                    raise RuntimeError(f"run ended before step {kill_at}: {proc.stderr.read()[-2000:]}")
                time.sleep(0.001)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            reached = _lines(metrics)      # steps logged when it died (a step in flight is not counted)
        executed += reached - start
        attempts.append({"resumed_from": start, "killed_after_step": reached if kill_at else None,
                         "steps_executed": reached - start})
        log(f"attempt {len(attempts)}: from step {start} to {reached}" + (" (SIGKILL)" if kill_at else ""))
    return executed, attempts


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--preset", default="afm-ondevice-tiny")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--every", type=int, default=10, help="checkpoint every N steps")
    p.add_argument("--kills", type=int, default=3)
    p.add_argument("--seed", type=int, default=0, help="seed of the kill steps")
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="fault-tolerance-"))

    def config(name: str) -> Path:
        run = tmp / name
        c = dict(model=args.preset, run_dir=str(run), steps=args.steps, batch_size=4, grad_accum=2, seq_len=64,
                 peak_flops=1e10, progress=False, checkpoint=dict(every=args.every, keep=2),
                 optimizer=dict(lr=3e-3), schedule=dict(kind="warmup-cosine", warmup_steps=5))
        path = tmp / f"{name}.yaml"
        path.write_text(yaml.safe_dump(c))
        return path

    log("uninterrupted run")
    subprocess.run(_cmd(config("clean")), env=_env(), check=True, capture_output=True)
    kill_steps = sorted(random.Random(args.seed).sample(range(2, args.steps - 1), args.kills))
    log(f"killed run: SIGKILL after steps {kill_steps}")
    executed, attempts = run_with_kills(config("killed"), tmp / "killed", kill_steps)
    clean, killed = read_metrics(tmp / "clean" / "metrics.jsonl"), read_metrics(tmp / "killed" / "metrics.jsonl")
    if [r["step"] for r in killed] != [r["step"] for r in clean]:
        raise RuntimeError(f"the resumed run logged steps {[r['step'] for r in killed]}")
    diff = {k: max(abs(a[k] - b[k]) for a, b in zip(clean, killed)) for k in ("loss", "lr", "grad_norm")}
    emit({
        "preset": args.preset, "steps": args.steps, "checkpoint_every": args.every, "kill_seed": args.seed,
        "kill_after_steps": kill_steps, "attempts": attempts,
        "max_abs_diff": diff, "bit_identical": all(v == 0.0 for v in diff.values()),
        "useful_steps": args.steps, "steps_executed": executed, "goodput": args.steps / executed,
        "final_loss": killed[-1]["loss"],
    }, args.json)


if __name__ == "__main__":
    main()
