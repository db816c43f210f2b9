"""A pretrained CLIP pair on disk: one safetensors file, its ClipConfig in the metadata; the encoder loads alone.

    clip.safetensors   tensors named as ClipModel's state dict ("vision.blocks.0.qkv.weight", "text.embed.weight",
                       "image_proj.weight", "logit_scale"); metadata: format "openafm-clip", format_version "1",
                       config (ClipConfig as JSON), and whatever the trainer records (steps, mask_ratio, ...)

    model = load_clip(path)                  # ClipModel, eval mode
    encoder = load_vision_encoder(path)      # just the VisionEncoder (the VLM stages start from it)
"""

from __future__ import annotations

import json
from pathlib import Path

from safetensors.torch import load_file

from openafm.checkpoint.atomic import save_safetensors_atomic
from openafm.checkpoint.tagged import read_tagged_metadata
from openafm.errors import CheckpointError
from openafm.models.clip import ClipConfig, ClipModel
from openafm.models.vision import VisionConfig, VisionEncoder

FORMAT = "openafm-clip"
FORMAT_VERSION = 1
VISION_PREFIX = "vision."


def save_clip(model: ClipModel, path: str | Path, **info: object) -> Path:
    """Write the pair atomically (a crash leaves the previous file); info values are recorded as strings."""
    meta = {"format": FORMAT, "format_version": str(FORMAT_VERSION), "config": json.dumps(model.config.to_dict())}
    meta.update({k: str(v) for k, v in info.items()})
    return save_safetensors_atomic(model.state_dict(), path, meta)


def read_clip_metadata(path: str | Path) -> dict[str, str]:
    return read_tagged_metadata(path, fmt=FORMAT, version=FORMAT_VERSION, what="CLIP checkpoint")


def clip_config(path: str | Path) -> ClipConfig:
    return ClipConfig.from_dict(json.loads(read_clip_metadata(path)["config"]))


def load_clip(path: str | Path) -> ClipModel:
    model = ClipModel(clip_config(path))
    _load_strict(model, load_file(str(path)), path)
    return model.eval()


def load_vision_encoder(path: str | Path) -> VisionEncoder:
    """The image tower of a CLIP checkpoint, without the text tower or the projections."""
    config: VisionConfig = clip_config(path).vision
    tensors = {k[len(VISION_PREFIX):]: v for k, v in load_file(str(path)).items() if k.startswith(VISION_PREFIX)}
    encoder = VisionEncoder(config)
    _load_strict(encoder, tensors, path)
    return encoder.eval()


def _load_strict(module, tensors: dict, path) -> None:
    missing, unexpected = module.load_state_dict(tensors, strict=False)
    if missing or unexpected:
        raise CheckpointError(f"{path}: tensors do not match the config: missing {sorted(missing)[:5]}, "
                              f"unexpected {sorted(unexpected)[:5]}")
