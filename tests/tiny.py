"""Tiny models for tests: deterministic random weights scaled so activations stay O(1)."""

import dataclasses

import torch

from openafm.models.decoder import Decoder
from openafm.models.presets import get_preset

TINY_PRESETS = ["smollm2-tiny", "afm-ondevice-tiny", "afm-server-dense-tiny"]


def make_tiny(name: str, seed: int = 0, **changes) -> Decoder:
    """A tiny preset with weights scaled so activations stay O(1) (random init, deterministic)."""
    config = get_preset(name)
    if changes:
        config = dataclasses.replace(config, **changes)
    torch.manual_seed(seed)
    model = Decoder(config)
    with torch.no_grad():
        for name_, p in model.named_parameters():
            if p.ndim == 2:
                p.normal_(0, 0.5 / p.shape[1] ** 0.5 if "embed" not in name_ else 1.0)
            else:
                p.uniform_(0.8, 1.2)
    return model.eval()
