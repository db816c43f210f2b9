import dataclasses

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from openafm.errors import ConfigError
from openafm.models.vision import (CONFIG_ONLY, VISION_PRESETS, GridGroups, RegisterKind, VisionConfig, VisionEncoder,
                                   get_vision_preset, window_ids, window_merge, window_partition)


def tiny(**changes) -> VisionConfig:
    return dataclasses.replace(get_vision_preset("vision-tiny"), **changes)


def encoder(config: VisionConfig, seed: int = 0) -> VisionEncoder:
    torch.manual_seed(seed)
    return VisionEncoder(config).double().eval()


@pytest.mark.parametrize("name", sorted(VISION_PRESETS))
def test_param_count_formula_matches_module(name):
    config = get_vision_preset(name)
    model = VisionEncoder(config, device="meta")
    assert model.num_parameters() == config.param_count()


def test_report_scale_presets_have_the_reported_sizes():
    l_rw, g = get_vision_preset("vitdet-l-rw"), get_vision_preset("vit-g")
    assert 290e6 < l_rw.param_count() < 320e6 and len(l_rw.global_layers) == 3
    assert 0.95e9 < g.param_count() < 1.05e9 and g.global_layers == tuple(range(g.depth))
    assert g.mlp_hidden == 6144 and CONFIG_ONLY == {"vitdet-l-rw", "vit-g"}


def test_config_round_trips_through_dict():
    config = get_vision_preset("vision-small")
    assert VisionConfig.from_dict(config.to_dict()) == config


@pytest.mark.parametrize("bad, match", [
    (dict(global_layers=(1, 4)), r"global_layers=\(1, 4\)"),
    (dict(global_layers=(1, 1)), "distinct"),
    (dict(width=30, heads=4), "width=30 is not divisible by heads=4"),
    (dict(image_size=50), "image_size=50 is not a multiple of patch_size=14"),
    (dict(window=0), "window must be positive"),
])
def test_invalid_configs_raise_naming_the_value(bad, match):
    with pytest.raises(ConfigError, match=match):
        tiny(**bad)


@pytest.mark.parametrize("h, w, window", [(4, 6, 2), (5, 7, 3), (1, 1, 4)])
def test_window_partition_merge_round_trip_and_contents(h, w, window):
    x = torch.randn(2, h, w, 3)
    windows, valid = window_partition(x, window)
    per_row = -(-w // window)
    assert windows.shape == (2 * per_row * -(-h // window), window * window, 3)
    assert torch.equal(window_merge(windows, window, h, w), x)
    # window n of image b holds rows n // per_row * window.., cols n % per_row * window.., row-major, zero-padded
    for n in range(windows.shape[0] // 2):
        r0, c0 = n // per_row * window, n % per_row * window
        for j in range(window * window):
            r, c = r0 + j // window, c0 + j % window
            real = r < h and c < w
            expected = x[1, r, c] if real else torch.zeros(3)
            assert torch.equal(windows[windows.shape[0] // 2 + n, j], expected)
            assert (valid is None and real) or bool(valid[n, j]) == real
    ids = window_ids(h, w, window)
    assert ids.tolist() == [r // window * per_row + c // window for r in range(h) for c in range(w)]


def naive_register_window_layer(block, x, reg, window):
    """A windowed Register-Window layer as a Python loop over windows: each window's real patches with one
    register copy, attention inside it, then the copies averaged and both through the MLP."""
    b, h, w, _ = x.shape
    out, copies = torch.empty_like(x), []
    for r0 in range(0, h, window):
        for c0 in range(0, w, window):
            cells = [(r, c) for r in range(r0, min(r0 + window, h)) for c in range(c0, min(c0 + window, w))]
            tokens = torch.stack([reg] + [x[:, r, c] for r, c in cells], dim=1)     # [B, 1 + n, D]
            result = block.attend(tokens)
            copies.append(result[:, 0])
            for j, (r, c) in enumerate(cells):
                out[:, r, c] = result[:, 1 + j]
    return block.feed(out), block.feed(torch.stack(copies).mean(0))


@pytest.mark.parametrize("h, w", [(4, 4), (5, 3)])
def test_register_window_layer_matches_a_naive_per_window_loop(h, w):
    model = encoder(tiny(window=2))
    x, reg = torch.randn(2, h, w, 32, dtype=torch.float64), torch.randn(2, 32, dtype=torch.float64)
    got_x, got_reg = model.apply_layer(0, x, reg, GridGroups(h, w, 2))
    want_x, want_reg = naive_register_window_layer(model.blocks[0], x, reg, 2)
    torch.testing.assert_close(got_x, want_x, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got_reg, want_reg, rtol=1e-12, atol=1e-12)


def test_global_layer_register_attends_to_everything():
    model = encoder(tiny())
    x, reg = torch.randn(1, 4, 4, 32, dtype=torch.float64), torch.randn(1, 32, dtype=torch.float64)
    got_x, got_reg = model.apply_layer(1, x, reg, GridGroups(4, 4, 2))
    tokens = torch.cat([reg[:, None], x.reshape(1, 16, 32)], dim=1)
    full = model.blocks[1].attend(tokens)
    torch.testing.assert_close(got_reg, model.blocks[1].feed(full[:, 0]), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got_x, model.blocks[1].feed(full[:, 1:]).view(1, 4, 4, 32), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("register", list(RegisterKind))
def test_only_the_configured_layers_mix_across_windows(register):
    config = tiny(depth=5, global_layers=(0, 2, 4), register=register)
    model = encoder(config)
    x = torch.randn(1, 4, 4, 32, dtype=torch.float64)
    y = x.clone()
    y[0, 0, 0] += torch.randn(32, dtype=torch.float64)   # a patch of window 0 (not a constant: LayerNorm)
    reg = None if register is RegisterKind.NONE else torch.randn(1, 32, dtype=torch.float64)
    crossed = []
    for i in range(config.depth):
        out_x, _ = model.apply_layer(i, x, reg, GridGroups(4, 4, 2))
        out_y, _ = model.apply_layer(i, y, reg, GridGroups(4, 4, 2))
        changed = (out_x - out_y).abs().amax(-1)[0] > 0          # [4, 4]
        assert changed[:2, :2].all()                               # window 0 always sees its own patch
        if changed[2:, 2:].any():                                  # window 3 only in a global layer
            crossed.append(i)
    assert crossed == [0, 2, 4]


@pytest.mark.parametrize("size", [224, 448, 672, 70])
def test_accepts_several_sizes_and_pads_partial_windows(size):
    model = VisionEncoder(tiny()).eval()
    with torch.no_grad():
        out = model(torch.rand(2, 3, size, size))
    g = size // 14
    assert out.patches.shape == (2, g, g, 32) and out.register.shape == (2, 32)
    assert torch.isfinite(out.patches).all()


def test_padding_does_not_leak_into_patch_outputs():
    """A 5x5 grid with windows of 2 pads a row and a column; padded keys are masked, so the outputs equal the
    ones of a naive run that attends only real patches (checked through the full encoder's first layer)."""
    model = encoder(tiny(global_layers=(3,)))
    x, reg = torch.randn(1, 5, 5, 32, dtype=torch.float64), torch.randn(1, 32, dtype=torch.float64)
    got_x, got_reg = model.apply_layer(0, x, reg, GridGroups(5, 5, 2))
    want_x, want_reg = naive_register_window_layer(model.blocks[0], x, reg, 2)
    torch.testing.assert_close(got_x, want_x, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got_reg, want_reg, rtol=1e-12, atol=1e-12)


def test_keeping_every_patch_in_any_order_equals_the_unmasked_forward():
    model = encoder(tiny())
    pixels = torch.rand(2, 3, 56, 56, dtype=torch.float64)
    full = model(pixels)
    keep = torch.stack([torch.randperm(16), torch.randperm(16)])
    masked = model(pixels, keep=keep)
    want = torch.stack([full.patches[b].reshape(16, 32)[keep[b]] for b in range(2)])
    torch.testing.assert_close(masked.patches, want, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(masked.register, full.register, rtol=1e-10, atol=1e-10)


def test_dropped_patches_do_not_influence_the_kept_ones():
    model = encoder(tiny())
    pixels = torch.rand(1, 3, 56, 56, dtype=torch.float64)
    keep = torch.tensor([[0, 3, 8, 10]])               # one patch in each of the four 2x2 windows
    other = pixels.clone()
    other[:, :, :14, 14:28] = 0.5                      # patch 1 (dropped)
    a, b = model(pixels, keep=keep), model(other, keep=keep)
    assert a.patches.shape == (1, 4, 32)
    torch.testing.assert_close(a.patches, b.patches, rtol=0, atol=0)
    pixels[:, :, :14, 42:56] = 0.5                     # patch 3 (kept) changes the output
    assert not torch.allclose(model(pixels, keep=keep).patches, a.patches)


def test_unequal_windows_in_keep_raise():
    model = VisionEncoder(tiny())
    with pytest.raises(ConfigError, match="same number of patches in every window"):
        model(torch.rand(1, 3, 56, 56), keep=torch.tensor([[0, 1, 8, 10]]))
    with pytest.raises(ConfigError, match="0..15"):
        model(torch.rand(1, 3, 56, 56), keep=torch.tensor([[0, 16]]))


@pytest.mark.parametrize("config", [tiny(), tiny(register=RegisterKind.NONE), tiny(global_layers=(0, 1, 2, 3))])
def test_forward_flops_match_torch_flop_counter(config):
    model = VisionEncoder(config).eval()
    # the math backend runs attention as matmuls, which the counter sees (CPU's fused kernel it does not)
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(torch.rand(1, 3, 112, 112))
    assert config.forward_flops(112) == counter.get_total_flops()


def test_masked_forward_flops_match_torch_flop_counter():
    config = tiny()
    model = VisionEncoder(config).eval()
    ids = window_ids(8, 8, 2)
    keep = torch.stack([torch.nonzero(ids == n)[0] for n in range(16)], dim=1)   # [1, 16]: one per window
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(torch.rand(1, 3, 112, 112), keep=keep)
    assert config.forward_flops(112, n_kept=16) == counter.get_total_flops()
