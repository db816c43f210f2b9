"""ASTC weight compression: footprints, tile layout, the per-tile fp16 minimum, size accounting, error."""

import numpy as np
import pytest
import torch

from openafm.compress.astc import (
    LEGAL_BLOCKS_2D, Channels, Profile, Quality, Scale, TexelRange, astc_compress_model, compress_weight,
    fp16_ceil, fp16_floor, parse_block, relative_error, total_size,
)
from tiny import make_tiny

FAST = Quality.FASTEST


def test_parse_block_accepts_the_legal_footprints_and_names_them_when_rejecting():
    assert parse_block("6x6") == (6, 6)
    assert parse_block((12, 10)) == (12, 10)
    assert len(LEGAL_BLOCKS_2D) == 14
    with pytest.raises(ValueError, match=r"'7x7'.*legal: 4x4, 5x4, 5x5, 6x5, 6x6, 8x5.*12x12"):
        parse_block("7x7")
    with pytest.raises(ValueError, match="'6x6x6'"):
        compress_weight(torch.zeros(6, 6), "hdr", "6x6x6")


def test_bad_kinds_raise():
    with pytest.raises(ValueError, match="'none'"):
        compress_weight(torch.zeros(6, 6), "ldr", "6x6", scale="none")
    with pytest.raises(ValueError, match="'octave'"):
        compress_weight(torch.zeros(6, 6), "ldr", "6x6", texel_range="octave")
    with pytest.raises(ValueError, match="'xdr'"):
        compress_weight(torch.zeros(6, 6), "xdr", "6x6")


def test_fp16_floor_and_ceil_bracket_the_value():
    x = np.random.default_rng(0).standard_normal(1000).astype(np.float32) * 0.05
    lo, hi = fp16_floor(x).astype(np.float32), fp16_ceil(x).astype(np.float32)
    assert (lo <= x).all() and (hi >= x).all()
    assert (hi - lo <= np.abs(np.spacing(x.astype(np.float16))).astype(np.float32) + 0).all()


def _piecewise_constant(rows, cols, block, seed=0):
    """Each footprint tile holds one fp16-representable value (distinct per tile)."""
    bx, by = block
    g = torch.Generator().manual_seed(seed)
    values = (torch.randn(-(-rows // by), -(-cols // bx), generator=g) * 0.05).half().float()
    return values.repeat_interleave(by, 0).repeat_interleave(bx, 1)[:rows, :cols]


@pytest.mark.parametrize("channels", list(Channels))
@pytest.mark.parametrize("profile,scale,texel_range", [
    ("hdr", "none", "zero"), ("hdr", "block", "octave"), ("ldr", "block", "zero"), ("ldr", "tensor", "zero")])
def test_tile_layout_roundtrips_piecewise_constant_weights_exactly(channels, profile, scale, texel_range):
    # Ragged shape: 20 x 27 with 6x5 blocks pads both dimensions (and the tile row for RGB/RGBA packing).
    w = _piecewise_constant(20, 27, (6, 5))
    aw = compress_weight(w, profile, "6x5", channels=channels, scale=scale, texel_range=texel_range, quality=FAST)
    # Each tile is constant, so its minimum is its value: the min subtraction leaves zeros, which every
    # profile encodes exactly; a wrong tile -> block -> channel mapping would put values in the wrong place.
    assert torch.equal(aw.decode(), w)


@pytest.mark.parametrize("profile,scale,texel_range", [
    ("hdr", "none", "zero"), ("hdr", "tensor", "octave"), ("ldr", "block", "zero")])
def test_minimum_is_the_fp16_floor_of_the_tile_minimum_and_exactly_what_decode_adds(profile, scale, texel_range):
    w = torch.randn(18, 24, generator=torch.Generator().manual_seed(1)) * 0.03
    aw = compress_weight(w, profile, "6x6", scale=scale, texel_range=texel_range, quality=FAST)
    tile_min = w.view(3, 6, 4, 6).amin(dim=(1, 3)).numpy()                          # [3, 4]
    assert aw.minimum.dtype == np.float16
    np.testing.assert_array_equal(aw.minimum, fp16_floor(tile_min))
    assert (aw.minimum.astype(np.float32) <= tile_min).all()
    # decode = codec texels (minus the constant offset) * scale + m, with m exactly the stored fp16 value
    x = aw.decoded_texels() - np.float32(aw.texel_range.offset)
    if aw.scale is Scale.BLOCK:
        x = x * aw.tile_scale.astype(np.float32)[:, :, None, None]
    elif aw.scale is Scale.TENSOR:
        x = x * np.float32(aw.tensor_scale)
    expect = (x + aw.minimum.astype(np.float32)[:, :, None, None]).transpose(0, 2, 1, 3).reshape(18, 24)
    np.testing.assert_array_equal(aw.decode().numpy(), expect)
    # and the texels handed to the codec were non-negative: decoded texels (before offset) stay >= offset
    assert (aw.decoded_texels() >= aw.texel_range.offset - 1e-3).all()


def test_size_accounting_follows_the_formula():
    w = torch.randn(12, 18) * 0.02
    hdr = compress_weight(w, "hdr", "6x6", quality=FAST).size()
    assert hdr.astc_bits == 6 * 128 and hdr.minimum_bits == 6 * 16 and hdr.scale_bits == 0
    assert hdr.bits_per_weight == pytest.approx((128 + 16) / 36)
    ldr = compress_weight(w, "ldr", "6x6", scale="block", quality=FAST).size()
    assert ldr.bits_per_weight == pytest.approx((128 + 32) / 36)
    rgb = compress_weight(w, "hdr", "6x6", channels="rgb", scale="tensor", quality=FAST).size()
    assert rgb.astc_bits == 2 * 128 and rgb.minimum_bits == 6 * 16 and rgb.scale_bits == 32
    # ragged: 13 x 19 with 6x6 -> 3 x 4 tiles, all stored, over 247 real weights
    ragged = compress_weight(torch.randn(13, 19), "hdr", "6x6", scale="tensor", quality=FAST).size()
    assert ragged.bits == 12 * (128 + 16) + 32 and ragged.weights == 13 * 19


def test_error_falls_with_bits_and_smooth_weights_compress_well():
    g = torch.Generator().manual_seed(0)
    noise = torch.randn(96, 96, generator=g) * 0.02
    errs = {b: relative_error(noise, compress_weight(noise, "ldr", b, quality=FAST).decode())
            for b in ("4x4", "6x6", "12x12")}
    assert errs["4x4"] < errs["6x6"] < errs["12x12"] < 1.0
    assert 0.05 < errs["6x6"] < 0.35          # ~3.6 bits on i.i.d. Gaussian (0.20 measured)
    t = torch.linspace(0, 3, 96)
    smooth = 0.02 * torch.outer(torch.sin(t), torch.cos(t)) + 0.01
    for profile, tr in (("ldr", "zero"), ("hdr", "octave")):
        scale = "block"
        err = relative_error(smooth, compress_weight(smooth, profile, "6x6", scale=scale, texel_range=tr,
                                                     quality=FAST).decode())
        assert err < 0.01, (profile, err)


def test_octave_texels_beat_zero_based_texels_in_hdr():
    w = torch.randn(60, 60, generator=torch.Generator().manual_seed(3)) * 0.02
    zero = relative_error(w, compress_weight(w, "hdr", "6x6", scale="block", texel_range="zero", quality=FAST).decode())
    octave = relative_error(w, compress_weight(w, "hdr", "6x6", scale="block", texel_range="octave",
                                               quality=FAST).decode())
    assert octave < 0.7 * zero


def test_model_pass_writes_reconstructions_and_sums_sizes():
    model = make_tiny("smollm2-tiny")
    before = {n: m.weight.detach().clone() for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    records = astc_compress_model(model, "ldr", "6x6", scale="tensor", quality=FAST, progress=False)
    assert [r.name for r in records] == list(before)
    for r in records:
        module = model.get_submodule(r.name)
        assert torch.equal(module.weight.detach(), r.residual.decode())
        assert r.relative_error == pytest.approx(relative_error(before[r.name], module.weight), rel=1e-5)
    total = total_size(records)
    assert total.bits == sum(r.size().bits for r in records)
    assert total.weights == sum(w.numel() for w in before.values())
    with pytest.raises(ValueError, match="no nn.Linear"):
        astc_compress_model(model, include=lambda name: False, progress=False)


def test_compressing_leaves_python_string_constants_alone():
    # regression: the binding's ASTCSwizzle.from_str upper-cases the interned "rgba" constant in place
    compress_weight(torch.zeros(6, 24), "hdr", "6x6", channels="rgba", quality=FAST)
    assert "rgba" == "".join(["r", "g", "b", "a"])
    assert Channels("rgba") is Channels.RGBA and Channels.RGBA.value == "".join(["r", "g", "b", "a"])
