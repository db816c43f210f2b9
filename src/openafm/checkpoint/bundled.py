"""Models openafm ships as a LoRA adapter over a packaged base: the base's GGUF file with the adapter folded into
its weights at load, so the model runs as fast as its base (no adapter path at decode time).

The adapter file and its sidecar JSON (the command, data and figures that made it) live in this package's data
folder model_weights/; the sidecar records the sha256 of the base GGUF the adapter was trained on, and loading
refuses any other base file. Folding: float weights get W += scale * B A; weights kept in a GGUF block format
(weights='native') are dequantized, merged and quantized again, one matrix at a time (~2 s for the 135M model), to
Q8_0 when their own format is coarser: an SFT update is small beside a 4-bit step, and re-quantizing to Q4_1 rounded
most of it away (held-out perplexity 18.05 against 19.04 with float weights and 18.01 for the raw model), while Q8_0
keeps it (19.09), at 1.7x the bytes of the adapted matrices.

    model = load_model("openafm-135m").model         # through checkpoint/load.py, like every other source
    sidecar("openafm-135m")["figures"]                # what its recipe measured
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np
import torch
from torch import nn

from openafm.checkpoint.adapter import AdapterFile, read_adapter
from openafm.checkpoint.gguf import GGMLType
from openafm.checkpoint.gguf.quantize import quantize
from openafm.errors import CheckpointError
from openafm.nn.block_linear import BlockLinear
from openafm.nn.packed_kernel import WeightFormat
from openafm.nn.packed_model import set_module

BUNDLE_DIR = Path(__file__).parent / "model_weights"
HOLDS_AN_UPDATE = frozenset({WeightFormat.Q8_0, WeightFormat.F16, WeightFormat.BF16})   # block formats kept as they are
SIDECAR_FORMAT = "openafm-bundled-model"


@dataclasses.dataclass(frozen=True)
class Bundled:
    name: str            # what openafm.load accepts
    base: str            # the packaged base model it adapts (checkpoint/packaged.py)
    describe: str

    @property
    def adapter_path(self) -> Path:
        return BUNDLE_DIR / f"{self.name}.safetensors"

    @property
    def sidecar_path(self) -> Path:
        return BUNDLE_DIR / f"{self.name}.json"


def sidecar(bundle: Bundled) -> dict:
    """The bundle's sidecar: format, base, base_gguf_sha256, command, data, figures."""
    if not bundle.sidecar_path.is_file() or not bundle.adapter_path.is_file():
        raise CheckpointError(f"model {bundle.name!r}: its files {bundle.adapter_path.name} and "
                              f"{bundle.sidecar_path.name} are not in {BUNDLE_DIR}; reinstall openafm (`make setup`)")
    meta = json.loads(bundle.sidecar_path.read_text())
    if meta.get("format") != SIDECAR_FORMAT or meta.get("name") != bundle.name:
        raise CheckpointError(f"{bundle.sidecar_path}: not the sidecar of {bundle.name!r} (format "
                              f"{meta.get('format')!r}, name {meta.get('name')!r})")
    return meta


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def bundled_adapter(bundle: Bundled, base_gguf: Path) -> AdapterFile:
    """The bundle's adapter, after checking that `base_gguf` is the file it was trained on."""
    expected = sidecar(bundle)["base_gguf_sha256"]
    actual = file_sha256(Path(base_gguf))
    if actual != expected:
        raise CheckpointError(f"model {bundle.name!r}: its adapter was trained on a base GGUF with sha256 {expected}, "
                              f"but {base_gguf} has {actual}; install the base it names ({bundle.base})")
    return read_adapter(bundle.adapter_path)


def fold_adapter(model: nn.Module, adapter: AdapterFile) -> int:
    """Fold every adapted layer's update into `model`'s weights in place -> how many layers."""
    scale = adapter.alpha / adapter.rank
    names = sorted({k.rsplit(".", 1)[0] for k in adapter.tensors})
    for name in names:
        a, b = adapter.tensors[f"{name}.lora_A"].float(), adapter.tensors[f"{name}.lora_B"].float()  # [r, in], [out, r]
        try:
            layer = model.get_submodule(name)
        except AttributeError:
            raise CheckpointError(f"{adapter.path}: adapted layer {name!r} is not in this model") from None
        delta = scale * (b @ a)                                                                        # [out, in]
        if isinstance(layer, nn.Linear):
            if layer.weight.shape != delta.shape:
                raise CheckpointError(f"{adapter.path}: layer {name!r} is {tuple(layer.weight.shape)}, the adapter's "
                                      f"update {tuple(delta.shape)}")
            with torch.no_grad():
                layer.weight += delta.to(layer.weight.dtype)
        elif isinstance(layer, BlockLinear):
            set_module(model, name, _requantized(layer, delta, name))
        else:
            raise CheckpointError(f"{adapter.path}: layer {name!r} is a {type(layer).__name__}; an adapter folds into "
                                  f"nn.Linear or BlockLinear layers only")
    return len(names)


def fold_format(fmt: WeightFormat) -> WeightFormat:
    """The block format a folded matrix is stored in: its own where that is fine enough, else Q8_0."""
    return fmt if fmt in HOLDS_AN_UPDATE else WeightFormat.Q8_0


def _requantized(layer: BlockLinear, delta: torch.Tensor, name: str) -> BlockLinear:
    if tuple(delta.shape) != (layer.out_features, layer.in_features):
        raise CheckpointError(f"layer {name!r} is {layer.out_features}x{layer.in_features}, the adapter's update "
                              f"{tuple(delta.shape)}")
    merged = (layer.weight_dequantized() + delta).numpy().astype(np.float32)                       # [out, in]
    fmt = fold_format(layer.format)
    blocks = torch.from_numpy(quantize(merged, GGMLType[fmt.name]))                                 # [out, row bytes]
    return BlockLinear(blocks, fmt, layer.in_features, layer.activations)

