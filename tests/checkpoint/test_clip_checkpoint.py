import pytest
import torch
from safetensors.torch import save_file

from openafm.checkpoint.clip import load_clip, load_vision_encoder, read_clip_metadata, save_clip
from openafm.errors import CheckpointError
from openafm.models.clip import ClipConfig, ClipModel, TextConfig
from openafm.models.vision import get_vision_preset


def test_save_load_round_trip_and_the_encoder_alone(tmp_path):
    torch.manual_seed(0)
    model = ClipModel(ClipConfig(vision=get_vision_preset("vision-tiny"), text=TextConfig(width=32, heads=2),
                                 embed_dim=16)).eval()
    path = save_clip(model, tmp_path / "clip.safetensors", steps=12, mask_ratio=0.75)
    assert read_clip_metadata(path)["mask_ratio"] == "0.75" and not list(tmp_path.glob(".*tmp*"))
    pixels = torch.rand(2, 3, 56, 56)
    loaded = load_clip(path)
    with torch.no_grad():
        torch.testing.assert_close(loaded.encode_image(pixels), model.encode_image(pixels), rtol=0, atol=0)
        encoder = load_vision_encoder(path)
        torch.testing.assert_close(encoder(pixels).register, model.vision(pixels).register, rtol=0, atol=0)
    assert loaded.config == model.config


def test_a_file_of_another_format_raises_naming_it(tmp_path):
    path = tmp_path / "other.safetensors"
    save_file({"x": torch.zeros(1)}, str(path), metadata={"format": "openafm-lora-adapter"})
    with pytest.raises(CheckpointError, match="format 'openafm-lora-adapter' is not 'openafm-clip'"):
        load_vision_encoder(path)
