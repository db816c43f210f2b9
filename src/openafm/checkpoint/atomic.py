"""Write one safetensors file atomically: a temporary sibling, fsync, rename. A crash leaves the old file or
the new one, never a half-written file under the real name."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from openafm.io import atomic_write


def save_safetensors_atomic(tensors: dict[str, torch.Tensor], path: str | Path, metadata: dict[str, str]) -> Path:
    cpu = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    return atomic_write(path, lambda tmp: save_file(cpu, str(tmp), metadata=metadata))
