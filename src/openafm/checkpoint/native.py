"""openafm's native checkpoint: a directory with model.safetensors, config.json and the tokenizer.

Writes are atomic: everything goes to a temporary sibling directory that is renamed into place, so a
crash leaves either the old checkpoint or the new one, never a mix.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from openafm.errors import CheckpointError
from openafm.io import atomic_directory
from openafm.models.build import ModelConfig, config_from_dict, model_kind

FORMAT = "openafm-decoder"
FORMAT_VERSION = 1
WEIGHTS, CONFIG = "model.safetensors", "config.json"


def save_checkpoint(directory: str | Path, config: ModelConfig, state_dict: dict[str, torch.Tensor],
                    tokenizer=None, extra: dict | None = None) -> Path:
    tensors = {k: v.detach().contiguous().cpu() for k, v in state_dict.items()}
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "model_kind": model_kind(config),
            "config": config.to_dict(), **(extra or {})}

    def write(tmp: Path) -> None:
        save_file(tensors, str(tmp / WEIGHTS), metadata={"format": FORMAT})
        (tmp / CONFIG).write_text(json.dumps(meta, indent=2) + "\n")
        if tokenizer is not None:
            tokenizer.save(tmp)
    return atomic_directory(directory, write)


def is_native_checkpoint(directory: Path) -> bool:
    """Whether directory holds an openafm config.json (a config.json that is not JSON raises)."""
    if not (directory / CONFIG).is_file():
        return False
    return _read_json(directory / CONFIG).get("format") == FORMAT


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def load_checkpoint(directory: str | Path) -> tuple[ModelConfig, dict[str, torch.Tensor], dict]:
    """-> (config, state dict, the whole config.json). Missing or corrupt files raise naming the file."""
    directory = Path(directory)
    config_path, weights_path = directory / CONFIG, directory / WEIGHTS
    for path in (config_path, weights_path):
        if not path.is_file():
            raise CheckpointError(f"{path}: missing (a native checkpoint holds {CONFIG} and {WEIGHTS})")
    meta = _read_json(config_path)
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{config_path}: format {meta.get('format')!r} is not {FORMAT!r}")
    if meta.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(f"{config_path}: format_version {meta.get('format_version')!r} is not supported "
                              f"(this openafm reads version {FORMAT_VERSION})")
    config = config_from_dict(meta.get("model_kind", "decoder"), meta["config"], str(config_path))
    try:
        state = load_file(str(weights_path))
    except (SafetensorError, OSError) as e:
        raise CheckpointError(f"{weights_path}: cannot be read as safetensors ({e})") from None
    return config, state, meta
