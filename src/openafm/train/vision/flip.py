"""FLIP masking (Li et al. 2023; report §5.1: CLIP pretraining drops a large share of patches): which to keep.

FLIP drops a random share of the image's patches before the encoder and trains on the rest: at 75% masking
an image costs about a quarter of the compute, so four times as many images pass in the same time.

With windowed attention the drop is stratified by window: every window keeps the same number of patches,
chosen uniformly at random inside it. The windowed layers then stay one batched attention over equal-sized
windows (no padding, no ragged batches), every region of the image keeps some patches, and the register
still meets every window. The other choice, dropping whole windows, would be block masking: at 75% on a
2x2-window grid it would keep a single quadrant, removing whole objects, where random patch masking (FLIP's
choice, which it found better than block masking) keeps a sparse view of all of them. A model whose every
layer is global has one window: the whole grid, i.e. FLIP's plain uniform masking.

    keep = window_keep(batch=8, grid=(8, 8), window=4, mask_ratio=0.75, generator=g)   # [8, 16]
    out = encoder(pixels, keep=keep)                                                  # patches [8, 16, D]
"""

from __future__ import annotations

import torch

from openafm.errors import ConfigError
from openafm.models.vision import VisionConfig


def kept_per_window(window_patches: int, mask_ratio: float) -> int:
    """Patches each window keeps; the ratio must leave a whole number (raises naming the ratio otherwise)."""
    if not 0 <= mask_ratio < 1:
        raise ConfigError(f"flip: mask_ratio={mask_ratio} must lie in [0, 1)")
    kept = window_patches * (1 - mask_ratio)
    if abs(kept - round(kept)) > 1e-6 or round(kept) < 1:
        raise ConfigError(f"flip: mask_ratio={mask_ratio} keeps {kept:g} of each window's {window_patches} patches; "
                          f"choose a multiple of 1/{window_patches} that keeps at least one")
    return round(kept)


def flip_window(config: VisionConfig, grid: tuple[int, int]) -> tuple[int, int]:
    """(window side, windows) FLIP stratifies over: the config's window, or the whole grid when every layer
    is global."""
    h, w = grid
    if len(config.global_layers) == config.depth:
        return max(h, w), 1
    if h % config.window or w % config.window:
        raise ConfigError(f"flip: a {h}x{w} grid is not divisible into {config.window}x{config.window} windows")
    return config.window, (h // config.window) * (w // config.window)


def window_keep(*, batch: int, grid: tuple[int, int], window: int, mask_ratio: float,
                generator: torch.Generator | None = None) -> torch.Tensor:
    """[batch, n_kept] flat (row-major) indices of kept patches, the same number in every window, each window's
    chosen uniformly at random; sorted ascending. A window of the whole grid gives plain uniform masking."""
    h, w = grid
    if window >= max(h, w):
        cells = torch.arange(h * w)[None]                                    # [1, h*w]: one window
    else:
        if h % window or w % window:
            raise ConfigError(f"flip: a {h}x{w} grid is not divisible into {window}x{window} windows")
        rows = torch.arange(h).view(h // window, 1, window, 1)
        cols = torch.arange(w).view(1, w // window, 1, window)
        cells = (rows * w + cols).reshape(-1, window * window)               # [nW, window²] patch indices
    k = kept_per_window(cells.shape[1], mask_ratio)
    noise = torch.rand(batch, *cells.shape, generator=generator)            # [B, nW, P]
    choice = noise.argsort(dim=-1)[..., :k]                                  # [B, nW, k] random positions
    kept = torch.gather(cells.expand(batch, -1, -1), 2, choice)              # [B, nW, k] patch indices
    return kept.reshape(batch, -1).sort(dim=1).values


def keep_for(config: VisionConfig, *, batch: int, image_size: int, mask_ratio: float,
             generator: torch.Generator | None = None) -> torch.Tensor | None:
    """The kept patches for a batch of image_size images under config (None when mask_ratio is 0)."""
    if mask_ratio == 0:
        return None
    g = image_size // config.patch_size
    window, _ = flip_window(config, (g, g))
    return window_keep(batch=batch, grid=(g, g), window=window, mask_ratio=mask_ratio, generator=generator)
