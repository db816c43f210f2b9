"""Hugging Face checkpoints of the supported families: a directory with config.json and (sharded) safetensors."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from openafm.checkpoint.families import GEMMA, config_from_hf
from openafm.checkpoint.family_weights import NormWeights, state_dict_from_hf
from openafm.errors import CheckpointError
from openafm.models.plan import DecoderConfig


def is_hf_checkpoint(directory: Path) -> bool:
    return (directory / "config.json").is_file() and (
        (directory / "model.safetensors").is_file() or (directory / "model.safetensors.index.json").is_file())


def load_hf(directory: str | Path) -> tuple[DecoderConfig, dict[str, torch.Tensor]]:
    """-> (the decoder plan, openafm state dict) of a Hugging Face checkpoint directory."""
    directory = Path(directory)
    config_path = directory / "config.json"
    try:
        hf_config = json.loads(config_path.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{config_path}: missing") from None
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{config_path}: not valid JSON ({e})") from None
    config = config_from_hf(hf_config, str(config_path))
    index = directory / "model.safetensors.index.json"
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.is_file() else ["model.safetensors"]
    hf_sd: dict[str, torch.Tensor] = {}
    for name in files:
        path = directory / name
        try:
            hf_sd.update(load_file(str(path)))
        except (SafetensorError, OSError) as e:
            raise CheckpointError(f"{path}: cannot be read as safetensors ({e})") from None
    norms = NormWeights.OFFSET_FROM_ONE if hf_config["model_type"] in GEMMA else NormWeights.AS_USED
    state, _ = state_dict_from_hf(hf_sd, config, str(directory), norms)
    return config, {k: v.float() if v.is_floating_point() else v for k, v in state.items()}
