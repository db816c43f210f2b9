"""The run's metrics as JSONL: one object per logged step, appended and flushed line by line, so a killed run
keeps every line it wrote. On resume the lines past the checkpoint's step are dropped (that work is redone).

Fields: step, loss, lr, grad_norm, tokens (in the step, all ranks), the objective's metrics, and the timing
fields of TIMING_KEYS (which differ between runs of the same computation).
"""

from __future__ import annotations

import json
from pathlib import Path

from openafm.io import read_jsonl_log, write_text_atomic

TIMING_KEYS = ("step_s", "tokens_per_s", "mfu", "elapsed_s")


def read_metrics(path: str | Path) -> list[dict]:
    """The logged steps; a last line cut short by a kill is dropped (that step is redone on resume)."""
    return read_jsonl_log(path)


def without_timing(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in records]


class MetricsLog:
    def __init__(self, path: str | Path, *, keep_through_step: int | None = None):
        """Open for appending. keep_through_step=s (resume): first drop the lines with step > s.
        None: a fresh run, the file must not hold lines yet."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        existing = read_metrics(self.path)
        if keep_through_step is None and existing:
            raise FileExistsError(f"{self.path} already holds {len(existing)} metric lines; resume the run "
                                  f"(--resume) or use a new run_dir")
        if keep_through_step is not None:
            kept = [r for r in existing if r["step"] <= keep_through_step]
            write_text_atomic(self.path, "".join(json.dumps(r) + "\n" for r in kept))
        self._file = open(self.path, "a")

    def write(self, record: dict) -> None:
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()            # in the kernel's hands: survives the process being killed

    def close(self) -> None:
        self._file.close()
