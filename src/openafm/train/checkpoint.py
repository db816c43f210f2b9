"""Training checkpoints: everything a run needs to continue as if it had never stopped.

    RUN_DIR/checkpoints/step_00000100/
        model/               the weights as a native openafm checkpoint (`openafm.load` reads it)
        train_state.pt       step, optimizer state, schedule definition, RNG states (torch, numpy, python),
                             the trainer hooks' state (e.g. QAT's EMA averages)
        loader.json          the data loader's position
        train_config.json    the TrainConfig that wrote it (a resume with an incompatible config raises)

A checkpoint is written to a hidden temporary directory beside its final name, every file fsynced, then
renamed into place (and the parent directory fsynced): a kill at any moment leaves complete checkpoints and
at most a temporary directory, which the next save or resume removes. The newest `keep` are kept.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import re
import shutil
from pathlib import Path

import torch

from openafm.checkpoint.native import load_checkpoint, save_checkpoint
from openafm.errors import CheckpointError
from openafm.io import atomic_directory
from openafm.train.config import incompatible_keys

STEP_DIR = re.compile(r"^step_(\d{8})$")
MODEL, STATE, LOADER, CONFIG = "model", "train_state.pt", "loader.json", "train_config.json"


@dataclasses.dataclass
class TrainingState:
    step: int
    model_config: object
    model: dict[str, torch.Tensor]
    optimizer: dict
    schedule: dict
    rng: dict
    loader: dict
    config: dict
    path: Path | None                  # where it was read from (None: a state about to be saved)
    hooks: dict                        # {hook name: its state} (train/hooks.py); {} for a run without hooks


def checkpoints_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / "checkpoints"


def list_checkpoints(run_dir: str | Path) -> list[tuple[int, Path]]:
    """[(step, path)] of the complete checkpoints, oldest first."""
    root = checkpoints_dir(run_dir)
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := STEP_DIR.match(p.name)) and p.is_dir()]
    return sorted(found)


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    found = list_checkpoints(run_dir)
    return found[-1][1] if found else None


def remove_partial(run_dir: str | Path) -> None:
    """Delete temporary directories left by a save that was killed."""
    root = checkpoints_dir(run_dir)
    if root.is_dir():
        for p in root.iterdir():
            if p.name.startswith("."):
                shutil.rmtree(p, ignore_errors=True)


def save_training_checkpoint(run_dir: str | Path, state: TrainingState, *, keep: int) -> Path:
    """Write `state` atomically as run_dir/checkpoints/step_NNNNNNNN and keep only the newest `keep`."""
    root = checkpoints_dir(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    remove_partial(run_dir)
    final = root / f"step_{state.step:08d}"

    def write(tmp: Path) -> None:
        save_checkpoint(tmp / MODEL, state.model_config, state.model, extra={"trained_steps": state.step})
        torch.save({"step": state.step, "optimizer": state.optimizer, "schedule": state.schedule, "rng": state.rng,
                    "hooks": state.hooks}, tmp / STATE)
        (tmp / LOADER).write_text(json.dumps(state.loader))
        (tmp / CONFIG).write_text(json.dumps(state.config, indent=2))
    atomic_directory(final, write)     # the same step saved again (a resumed run re-reaching it) is replaced
    for _, old in list_checkpoints(run_dir)[:-keep]:
        shutil.rmtree(old)
    return final


def load_training_checkpoint(path: str | Path, current_config: dict | None = None) -> TrainingState:
    """Read a checkpoint; with current_config, first check that it can continue under that config."""
    path = Path(path)
    for name in (STATE, LOADER, CONFIG):
        if not (path / name).is_file():
            raise CheckpointError(f"{path / name}: missing (a training checkpoint holds {MODEL}/, {STATE}, "
                                  f"{LOADER} and {CONFIG})")
    saved_config = json.loads((path / CONFIG).read_text())
    if current_config is not None:
        diff = incompatible_keys(saved_config, current_config)
        if diff:
            raise CheckpointError(f"{path}: written by an incompatible config; differing keys: " + "; ".join(diff))
    model_config, model_state, _ = load_checkpoint(path / MODEL)
    try:                         # tensors, numbers, strings and containers only (see train/rng.py): no code runs
        state = torch.load(path / STATE, weights_only=True)
    except pickle.UnpicklingError as e:
        raise CheckpointError(f"{path / STATE}: holds objects other than tensors, numbers and strings (written by an "
                              f"openafm before 0.1's weights-only checkpoints, or not by openafm); it is not loaded, "
                              f"since unpickling them could run code ({str(e).splitlines()[0]})") from None
    return TrainingState(step=state["step"], model_config=model_config, model=model_state,
                         optimizer=state["optimizer"], schedule=state["schedule"], rng=state["rng"],
                         loader=json.loads((path / LOADER).read_text()), config=saved_config, path=path,
                         hooks=state.get("hooks", {}))
