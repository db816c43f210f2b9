"""A bundled model's adapter folded into its base: into float weights exactly as the attached adapter computes,
into GGUF block weights as close as re-quantizing the merged weight allows; and a bundle is refused on another
base file, or when its files are missing, with errors naming what is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from openafm.checkpoint import bundled
from openafm.checkpoint.adapter import AdapterFile, attach_adapter, read_adapter, save_adapter
from openafm.checkpoint.bundled import (
    SIDECAR_FORMAT,
    Bundled,
    bundled_adapter,
    file_sha256,
    fold_adapter,
    fold_format,
)
from openafm.checkpoint.fingerprint import weights_fingerprint
from openafm.checkpoint.gguf import GGMLType
from openafm.checkpoint.gguf.quantize import quantize
from openafm.errors import CheckpointError
from openafm.nn.block_linear import BlockLinear
from openafm.nn.lora import apply_lora
from openafm.nn.packed_kernel import WeightFormat
from tiny import make_tiny


def _adapter(tmp_path, model: nn.Module, targets=("qkv", "down")):
    adapted = make_tiny("smollm2-tiny")
    apply_lora(adapted, rank=4, alpha=8, targets=targets)
    with torch.no_grad():
        for name, p in adapted.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05, generator=torch.Generator().manual_seed(len(name)))
    path = save_adapter(tmp_path / "a.safetensors", adapted, base_name="tiny", base_fingerprint=weights_fingerprint(model))
    return read_adapter(path)


def test_folding_into_float_weights_gives_the_attached_adapters_outputs(tmp_path):
    base = make_tiny("smollm2-tiny")
    adapter = _adapter(tmp_path, base)
    ids = torch.randint(0, base.config.vocab_size, (2, 7))
    expected = attach_adapter(base, adapter)(ids)
    assert fold_adapter(base, adapter) == 2 * base.config.n_layers
    torch.testing.assert_close(base(ids), expected, rtol=1e-5, atol=1e-5)


def test_folding_into_4_bit_blocks_requantizes_the_merged_weight_to_q8_0():
    torch.manual_seed(0)
    weight = torch.randn(64, 128)                                                          # [out, in]
    blocks = torch.from_numpy(quantize(weight.numpy(), GGMLType.Q4_1))
    model = nn.Sequential(BlockLinear(blocks, WeightFormat.Q4_1, 128))
    a, b = torch.randn(4, 128) * 0.3, torch.randn(64, 4) * 0.3                                # [r, in], [out, r]
    adapter = AdapterFile(path=Path("toy.safetensors"), rank=4, alpha=8.0, targets=("0",), base_name="toy",
                          base_fingerprint="-", tensors={"0.lora_A": a, "0.lora_B": b})
    merged = model[0].weight_dequantized() + 2.0 * (b @ a)
    assert fold_adapter(model, adapter) == 1
    layer = model[0]
    assert isinstance(layer, BlockLinear) and layer.format is WeightFormat.Q8_0
    error = (layer.weight_dequantized() - merged).abs().mean()
    requant = torch.from_numpy(quantize(merged.numpy(), GGMLType.Q8_0))
    reference = (BlockLinear(requant, WeightFormat.Q8_0, 128).weight_dequantized() - merged).abs().mean()
    assert error == reference and error < 0.01 * merged.abs().mean()      # 256 levels a block
    assert fold_format(WeightFormat.Q4_K) is WeightFormat.Q8_0 and fold_format(WeightFormat.F16) is WeightFormat.F16


def _bundle(tmp_path, monkeypatch, base_file, sha: str | None = None) -> Bundled:
    monkeypatch.setattr(bundled, "BUNDLE_DIR", tmp_path / "weights")
    (tmp_path / "weights").mkdir()
    b = Bundled("toy-bundle", "smollm2-135m-instruct", "a toy")
    base = make_tiny("smollm2-tiny")
    src = _adapter(tmp_path, base)
    save_adapter(b.adapter_path, attach_adapter(base, src), base_name="tiny", base_fingerprint=src.base_fingerprint)
    b.sidecar_path.write_text(json.dumps({"format": SIDECAR_FORMAT, "name": b.name,
                                          "base_gguf_sha256": sha or file_sha256(base_file)}))
    return b


def test_a_bundle_loads_only_on_the_base_file_it_was_trained_on(tmp_path, monkeypatch):
    base_file = tmp_path / "base.gguf"
    base_file.write_bytes(b"the base")
    b = _bundle(tmp_path, monkeypatch, base_file)
    assert bundled_adapter(b, base_file).rank == 4
    other = tmp_path / "other.gguf"
    other.write_bytes(b"another base")
    with pytest.raises(CheckpointError, match=f"trained on a base GGUF with sha256 {file_sha256(base_file)}"):
        bundled_adapter(b, other)


def test_a_bundle_whose_files_are_missing_says_to_reinstall(tmp_path, monkeypatch):
    monkeypatch.setattr(bundled, "BUNDLE_DIR", tmp_path / "nowhere")
    with pytest.raises(CheckpointError, match="toy-bundle.*reinstall openafm"):
        bundled_adapter(Bundled("toy-bundle", "smollm2-135m-instruct", "a toy"), tmp_path / "x.gguf")
