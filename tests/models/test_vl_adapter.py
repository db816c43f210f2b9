"""The vision-language adapter and the resolution modes: token counts per mode, compressors against references."""

import random

import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from openafm.errors import ConfigError
from openafm.models.image_views import ON_DEVICE, SERVER, ImageLoadError, Resolution, image_views, letterbox, load_image
from openafm.models.vl_adapter import AdapterConfig, AdapterKind, VLAdapter
from openafm.train.vision.mix import REPORT_DATA_MIX, DataMix, ExampleKind, ResolutionMix


@pytest.mark.parametrize("kind", list(AdapterKind))
@pytest.mark.parametrize("grid,tokens", [(42, 144), (14, 9), (28, 144), (16, 9)])
def test_adapter_gives_a_fixed_token_count(kind, grid, tokens):
    adapter = VLAdapter(AdapterConfig(in_dim=16, out_dim=24, kind=kind))
    out = adapter(torch.randn(2, grid, grid, 16), tokens)
    assert out.shape == (2, tokens, 24)


def test_avg_pool_adapter_is_pooling_then_mlp():
    torch.manual_seed(0)
    adapter = VLAdapter(AdapterConfig(in_dim=8, out_dim=8, kind=AdapterKind.AVG_POOL))
    patches = torch.randn(1, 6, 6, 8)
    # naive: the mean of each 2x2 block, row-major
    blocks = [patches[0, 2 * r:2 * r + 2, 2 * c:2 * c + 2].reshape(4, 8).mean(0) for r in range(3) for c in range(3)]
    expected = adapter.mlp(adapter.norm(torch.stack(blocks)))[None]
    torch.testing.assert_close(adapter(patches, 9), expected)


def test_pixel_shuffle_stacks_each_2x2_neighbourhood():
    adapter = VLAdapter(AdapterConfig(in_dim=2, out_dim=4, kind=AdapterKind.PIXEL_SHUFFLE))
    seen = {}
    adapter.norm.register_forward_hook(lambda m, i, o: seen.setdefault("x", i[0]))
    patches = torch.arange(6 * 6 * 2, dtype=torch.float).view(1, 6, 6, 2)
    adapter(patches, 9)
    x = seen["x"]                                                  # [1, 9, 8]
    # token (0, 0) holds channel 0 of the 2x2 block at rows 0-1, cols 0-1, then channel 1
    assert x[0, 0].tolist() == [patches[0, 0, 0, 0], patches[0, 0, 1, 0], patches[0, 1, 0, 0], patches[0, 1, 1, 0],
                                patches[0, 0, 0, 1], patches[0, 0, 1, 1], patches[0, 1, 0, 1], patches[0, 1, 1, 1]]


def test_c_abstractor_starts_as_pooled_projection():
    """Its conv blocks' last convolutions start at zero, so a fresh C-Abstractor = 1x1 projection, pool, MLP."""
    torch.manual_seed(0)
    adapter = VLAdapter(AdapterConfig(in_dim=8, out_dim=8, hidden=12, kind=AdapterKind.C_ABSTRACTOR))
    patches = torch.randn(1, 6, 6, 8)
    x = F.adaptive_avg_pool2d(adapter.proj_in(patches.permute(0, 3, 1, 2)), 3).flatten(2).transpose(1, 2)
    torch.testing.assert_close(adapter(patches, 9), adapter.mlp(adapter.norm(x)))


def test_non_square_token_count_raises():
    adapter = VLAdapter(AdapterConfig(in_dim=4, out_dim=4))
    with pytest.raises(ConfigError, match="perfect square"):
        adapter(torch.randn(1, 8, 8, 4), 10)


@pytest.mark.parametrize("mode,tokens,views,side", [(Resolution.HIGH, 720, 5, 672), (Resolution.BALANCED, 144, 1, 672),
                                                    (Resolution.RAPID, 9, 1, 224)])
def test_exact_image_tokens_per_mode(mode, tokens, views, side):
    assert ON_DEVICE.tokens(mode) == tokens
    pixels = image_views(Image.new("RGB", (300, 200), (10, 20, 30)), mode)
    assert pixels.shape == (views, 3, side, side)
    adapter = VLAdapter(AdapterConfig(in_dim=8, out_dim=8))
    per_view = ON_DEVICE.plan(mode)[2]
    grid = side // 16
    assert adapter(torch.randn(views, grid, grid, 8), per_view).reshape(-1, 8).shape[0] == tokens
    assert SERVER.plan(Resolution.BALANCED)[1:] == (448, 144)


def test_high_resolution_tiles_are_the_quadrants_of_the_doubled_image():
    img = Image.new("RGB", (20, 20), (255, 0, 0))
    img.paste((0, 0, 255), (10, 10, 20, 20))                        # bottom-right quadrant blue
    views = image_views(img, Resolution.HIGH)
    assert views[4, :, 300, 300].tolist() == [0.0, 0.0, 1.0]        # tile (1, 1): blue
    assert views[1, :, 300, 300].tolist() == [1.0, 0.0, 0.0]        # tile (0, 0): red
    assert views[0, :, 600, 600].tolist() == [0.0, 0.0, 1.0]        # overview, bottom right


def test_letterbox_keeps_aspect_on_white():
    box = letterbox(Image.new("RGB", (100, 50), (0, 0, 0)), 100)
    assert box.size == (100, 100)
    assert box.getpixel((50, 5)) == (255, 255, 255) and box.getpixel((50, 50)) == (0, 0, 0)


def test_load_image_errors_name_file_and_reason(tmp_path):
    with pytest.raises(ImageLoadError, match="no such file") as e:
        load_image(tmp_path / "missing.png")
    assert e.value.path.endswith("missing.png")
    bad = tmp_path / "notes.png"
    bad.write_text("not an image")
    with pytest.raises(ImageLoadError, match="notes.png.*format Pillow can decode"):
        load_image(bad)
    good = tmp_path / "ok.png"
    Image.new("RGB", (64, 64)).save(good)
    truncated = tmp_path / "cut.png"
    truncated.write_bytes(good.read_bytes()[:60])
    with pytest.raises(ImageLoadError, match="cut.png"):
        load_image(truncated)
    with pytest.raises(ImageLoadError, match="not a regular file"):
        load_image(tmp_path)
    rgba = tmp_path / "alpha.png"
    Image.new("RGBA", (4, 4), (0, 0, 0, 0)).save(rgba)
    assert load_image(rgba).getpixel((0, 0)) == (255, 255, 255)      # transparent -> white


def test_resolution_mix_proportions():
    mix = ResolutionMix()
    rng = random.Random(0)
    n = 20000
    for side, expect in ((64, {Resolution.RAPID: 0.5, Resolution.BALANCED: 0.1, Resolution.HIGH: 0.4}),
                         (1344, {Resolution.RAPID: 0.01, Resolution.BALANCED: 0.198, Resolution.HIGH: 0.792})):
        assert mix.probabilities(side) == pytest.approx(expect)
        draws = [mix.sample(side, rng) for _ in range(n)]
        for mode, p in expect.items():
            share = draws.count(mode) / n
            assert abs(share - p) < 4 * (p * (1 - p) / n) ** 0.5 + 1e-3, (side, mode, share, p)


def test_data_mix_proportions():
    mix = DataMix(seed=1)
    n = 20000
    draws = [mix.sample() for _ in range(n)]
    assert REPORT_DATA_MIX == {ExampleKind.TEXT: 0.6, ExampleKind.INTERLEAVED: 0.1, ExampleKind.CAPTION: 0.285,
                               ExampleKind.DOMAIN: 0.015}
    for kind, p in REPORT_DATA_MIX.items():
        assert abs(draws.count(kind) / n - p) < 4 * (p * (1 - p) / n) ** 0.5
