import dataclasses

import pytest
import torch

from openafm.errors import ConfigError
from openafm.models.vision import VisionEncoder, get_vision_preset, window_ids
from openafm.train.vision.flip import flip_window, keep_for, kept_per_window, window_keep


@pytest.mark.parametrize("ratio, per_window", [(0.0, 16), (0.5, 8), (0.75, 4), (0.9375, 1)])
def test_each_window_keeps_the_same_share(ratio, per_window):
    keep = window_keep(batch=5, grid=(8, 12), window=4, mask_ratio=ratio, generator=torch.Generator().manual_seed(0))
    assert keep.shape == (5, 6 * per_window)                         # 2x3 windows of 16 patches
    ids = window_ids(8, 12, 4)
    for row in keep:
        assert torch.equal(row, row.sort().values) and len(set(row.tolist())) == len(row)
        assert 0 <= row.min() and row.max() < 96
        assert torch.bincount(ids[row], minlength=6).tolist() == [per_window] * 6


def test_kept_patches_are_uniform_within_each_window_and_differ_per_image():
    keep = window_keep(batch=4000, grid=(4, 4), window=2, mask_ratio=0.75, generator=torch.Generator().manual_seed(1))
    share = torch.bincount(keep.reshape(-1), minlength=16).float() / 4000
    torch.testing.assert_close(share, torch.full((16,), 0.25), atol=0.03, rtol=0)
    assert len({tuple(r.tolist()) for r in keep[:50]}) > 40


def test_a_window_of_the_whole_grid_is_plain_uniform_masking():
    keep = window_keep(batch=3, grid=(6, 6), window=6, mask_ratio=0.75, generator=torch.Generator().manual_seed(2))
    assert keep.shape == (3, 9)
    config = dataclasses.replace(get_vision_preset("vision-tiny"), global_layers=(0, 1, 2, 3))
    assert flip_window(config, (6, 6)) == (6, 1)
    assert keep_for(config, batch=2, image_size=84, mask_ratio=0.75).shape == (2, 9)


def test_ratios_that_split_a_window_unevenly_raise():
    with pytest.raises(ConfigError, match="mask_ratio=0.6 keeps 6.4 of each window's 16"):
        kept_per_window(16, 0.6)
    with pytest.raises(ConfigError, match=r"mask_ratio=1 must lie in \[0, 1\)"):
        kept_per_window(16, 1)
    with pytest.raises(ConfigError, match="not divisible into 2x2 windows"):
        keep_for(get_vision_preset("vision-tiny"), batch=1, image_size=70, mask_ratio=0.5)


def test_the_encoder_sees_exactly_the_kept_patches():
    config = get_vision_preset("vision-tiny")
    torch.manual_seed(0)
    model = VisionEncoder(config).double().eval()
    keep = keep_for(config, batch=2, image_size=56, mask_ratio=0.5, generator=torch.Generator().manual_seed(3))
    pixels = torch.rand(2, 3, 56, 56, dtype=torch.float64)
    out = model(pixels, keep=keep)
    assert keep.shape == (2, 8) and out.patches.shape == (2, 8, 32)
    dropped = [p for p in range(16) if p not in keep[0].tolist()]
    changed = pixels.clone()
    for p in dropped:                                                # repaint every dropped patch of image 0
        r, c = divmod(p, 4)
        changed[0, :, 14 * r:14 * r + 14, 14 * c:14 * c + 14] = 0.3
    torch.testing.assert_close(model(changed, keep=keep).patches, out.patches, rtol=0, atol=0)
