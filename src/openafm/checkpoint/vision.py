"""Vision weights: a trained vision tower (encoder + adapter) for a decoder, in one safetensors file and a sidecar.

A tower file holds the tower's weights in float16 (metadata: format tag, the tower config as JSON, the decoder
it was trained for); the sidecar `<name>.json` beside it records the exact command that made it and its
figures. The default model's tower ships inside this package (`vision_weights/`, a few MB), trained here by
`openafm pipeline recipes/vision-default.yaml` (the command is in the sidecar), so image prompts work without a
download; the raw base model, whose token embeddings are the same, uses it too. A model with no
tower file has no vision input: `packaged_tower` returns None and the framework says what to run.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open

from torch import nn

from openafm.checkpoint.atomic import save_safetensors_atomic
from openafm.checkpoint.fingerprint import embedding_fingerprint
from openafm.checkpoint.packaged import BUNDLED, BUNDLED_MODEL, PACKAGED_GGUF
from openafm.errors import CheckpointError
from openafm.models.vlm import VisionTower, VisionTowerConfig

FORMAT = "openafm.vision_tower"
VERSION = "1"
PACKAGED_DIR = Path(__file__).parent / "vision_weights"
PACKAGED_TOWERS = {BUNDLED_MODEL: "openafm-135m.safetensors"}     # decoder name -> file in PACKAGED_DIR
TRAIN_HINT = ("make vision-weights   (runs `openafm pipeline recipes/vision-default.yaml`, about 2.4 CPU-hours: "
              "1.2 hours on 2 cores)")


def save_tower(tower: VisionTower, path: str | Path, *, decoder: str, sidecar: dict,
               fingerprint_of: nn.Module | None = None) -> Path:
    """Write the tower (float16) and its sidecar JSON (what made it, its figures) next to it. fingerprint_of: the
    decoder module it was trained against; its weights fingerprint is recorded and checked where it loads."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().to(torch.float16).contiguous() for k, v in tower.state_dict().items()}
    meta = {"format": FORMAT, "version": VERSION, "decoder": decoder,
            "config": json.dumps(tower.config.to_dict())}
    if fingerprint_of is not None:
        meta["decoder_fingerprint"] = embedding_fingerprint(fingerprint_of)
    save_safetensors_atomic(tensors, path, meta)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"decoder": decoder, "decoder_fingerprint": meta.get("decoder_fingerprint"), **sidecar},
                              indent=2) + "\n")
    tmp.replace(path.with_suffix(".json"))
    return path


def load_tower(path: str | Path, *, decoder: str | None = None, decoder_model: nn.Module | None = None) -> VisionTower:
    """A tower from its file (float32, eval mode). decoder: the name of the decoder it must have been trained for;
    decoder_model: the decoder itself, whose token-embedding fingerprint must match the one the file records."""
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
        recorded = meta.get("decoder_fingerprint")
        actual = embedding_fingerprint(decoder_model) if decoder_model is not None and recorded else None
        if actual is not None and actual != recorded:
            raise CheckpointError(f"{path} was trained against a decoder whose token embeddings are {recorded[:19]}..., "
                                  f"not these ({actual[:19]}...): its image tokens would mean nothing to this decoder; "
                                  f"train a tower for it (openafm pipeline recipes/vision-default.yaml)")
        state = {k: f.get_tensor(k).float() for k in f.keys()}
    tower = VisionTower(VisionTowerConfig.from_dict(json.loads(meta["config"])))
    tower.load_state_dict(state, strict=True)
    return tower.eval().requires_grad_(False)


def tower_decoder(decoder: str) -> str:
    """The decoder whose shipped tower serves `decoder`: its own, else its kin's — a bundled model and its base share
    token embeddings (the space a tower projects into; load_tower checks their fingerprint), so each can use the
    other's tower, at the quality of a tower trained against the other's layers."""
    if decoder in PACKAGED_TOWERS:
        return decoder
    kin = [BUNDLED[decoder].base] if decoder in BUNDLED else [b.name for b in BUNDLED.values() if b.base == decoder]
    return next((k for k in kin if k in PACKAGED_TOWERS), decoder)


def shipped_towers() -> list[str]:
    """The decoder names a shipped tower serves (each tower's decoder, and its kin: see tower_decoder)."""
    names = sorted({*PACKAGED_GGUF, *BUNDLED, *PACKAGED_TOWERS})
    return [d for d in names if tower_decoder(d) in PACKAGED_TOWERS
            and (PACKAGED_DIR / PACKAGED_TOWERS[tower_decoder(d)]).is_file()]


def packaged_tower_path(decoder: str) -> Path | None:
    """The shipped tower file for a decoder name, or None where none ships (or it is not built yet)."""
    name = PACKAGED_TOWERS.get(tower_decoder(decoder))
    path = PACKAGED_DIR / name if name else None
    return path if path is not None and path.is_file() else None


def packaged_tower(decoder: str, model: nn.Module | None = None) -> VisionTower | None:
    """The shipped tower serving `decoder` (None where none ships); with `model`, its embeddings are checked."""
    path = packaged_tower_path(decoder)
    return load_tower(path, decoder=tower_decoder(decoder), decoder_model=model) if path is not None else None
