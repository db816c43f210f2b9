"""Vision weights: a trained vision tower (encoder + adapter) for a decoder, in one safetensors file and a sidecar.

A tower file holds the tower's weights in float16 (metadata: format tag, the tower config as JSON, the decoder
it was trained for); the sidecar `<name>.json` beside it records the exact command that made it and its
figures. The default model's tower ships inside this package (`vision_weights/`, a few MB), trained here by
`openafm vlm train` (the command is in the sidecar), so image prompts work without a download. A model with no
tower file has no vision input: `packaged_tower` returns None and the framework says what to run.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open

from openafm.checkpoint.atomic import save_safetensors_atomic
from openafm.checkpoint.packaged import BUNDLED, RAW_MODEL
from openafm.errors import CheckpointError
from openafm.models.vlm import VisionTower, VisionTowerConfig

FORMAT = "openafm.vision_tower"
VERSION = "1"
PACKAGED_DIR = Path(__file__).parent / "vision_weights"
PACKAGED_TOWERS = {RAW_MODEL: "smollm2-135m-instruct.safetensors"}     # decoder name -> file in PACKAGED_DIR
TRAIN_HINT = "make vision-weights   (runs `openafm vlm train`, a few minutes on a CPU)"


def save_tower(tower: VisionTower, path: str | Path, *, decoder: str, sidecar: dict) -> Path:
    """Write the tower (float16) and its sidecar JSON (what made it, its figures) next to it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().to(torch.float16).contiguous() for k, v in tower.state_dict().items()}
    meta = {"format": FORMAT, "version": VERSION, "decoder": decoder,
            "config": json.dumps(tower.config.to_dict())}
    save_safetensors_atomic(tensors, path, meta)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"decoder": decoder, **sidecar}, indent=2) + "\n")
    tmp.replace(path.with_suffix(".json"))
    return path


def load_tower(path: str | Path, *, decoder: str | None = None) -> VisionTower:
    """A tower from its file (float32, eval mode). decoder: the decoder it must have been trained for."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"vision tower file {path} does not exist")
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
        if meta.get("format") != FORMAT or meta.get("version") != VERSION:
            raise CheckpointError(f"{path} is not an openafm vision tower (format {meta.get('format')!r} version "
                                  f"{meta.get('version')!r}; expected {FORMAT!r} version {VERSION})")
        if decoder is not None and meta.get("decoder") != decoder:
            raise CheckpointError(f"{path} was trained for decoder {meta.get('decoder')!r}, not {decoder!r}")
        state = {k: f.get_tensor(k).float() for k in f.keys()}
    tower = VisionTower(VisionTowerConfig.from_dict(json.loads(meta["config"])))
    tower.load_state_dict(state, strict=True)
    return tower.eval().requires_grad_(False)


def tower_decoder(decoder: str) -> str:
    """The decoder a tower must have been trained for to serve `decoder`: a bundled model's towers are its base's
    (its adapter leaves the token embeddings, the space the tower projects into, unchanged)."""
    return BUNDLED[decoder].base if decoder in BUNDLED and decoder not in PACKAGED_TOWERS else decoder


def shipped_towers() -> list[str]:
    """The decoder names a shipped tower serves (each tower's decoder, and the models bundled on it)."""
    served = [d for d in PACKAGED_TOWERS if (PACKAGED_DIR / PACKAGED_TOWERS[d]).is_file()]
    return served + [name for name, b in BUNDLED.items() if b.base in served and name not in served]


def packaged_tower_path(decoder: str) -> Path | None:
    """The shipped tower file for a decoder name, or None where none ships (or it is not built yet)."""
    name = PACKAGED_TOWERS.get(tower_decoder(decoder))
    path = PACKAGED_DIR / name if name else None
    return path if path is not None and path.is_file() else None


def packaged_tower(decoder: str) -> VisionTower | None:
    path = packaged_tower_path(decoder)
    return load_tower(path, decoder=tower_decoder(decoder)) if path is not None else None
