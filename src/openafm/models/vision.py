"""The vision encoder (report §2.3): a ViTDet whose windowed layers carry a Register-Window token.

Most layers attend inside non-overlapping windows of `window` x `window` patches; the layers named in
`global_layers` attend across the whole image (the report's ViTDet-L has three). With
`RegisterKind.WINDOW` a learned register (class) token rides along, in our reading of the report's
Register-Window: in a windowed layer a copy of the register is appended to every window, attends to and
is attended by that window's patches only, and the per-window copies are then averaged into one register;
in a global layer the register attends to, and is attended by, every patch. With `RegisterKind.NONE` the
encoder is the plain windowed ViTDet and `VisionOutput.register` is the mean of the final patches. Making
every layer global gives the plain ViT (the report's server encoder).

Choices where the report is silent:
- Positions: a learned absolute table at the grid of `image_size`, bicubically interpolated to other grids
  (ViTDet's and CLIP's recipe for running a ViT pretrained at one size at another; the report pretrains at
  448 and runs 672). It is added before FLIP drops patches, so kept patches keep their positions, and the
  window attention needs no per-token position bookkeeping (2D RoPE would have to be gathered per window).
- The register's per-window copies are averaged after the attention residual (r + mean_w attn_w), then the
  one register goes through the MLP: one MLP call, not one per window.
- A grid not divisible by the window is padded bottom/right as ViTDet does, but the padding is masked out
  of the attention (ViTDet lets the zero pads be keys), so a patch's output does not depend on the padding.
- Patches are embedded by a linear map of unfolded pixels (the same parameters as the usual stride-p
  convolution), gathered before the map, so FLIP's dropped patches cost nothing from the first layer on.
- FLIP masking (`keep`) must keep the same number of patches in every window (see train/vision/flip.py), so
  windows stay equal-sized batched attention; it needs a grid divisible by the window.
"""

from __future__ import annotations

import dataclasses
import enum
import typing

import torch
from torch import nn
from torch.nn import functional as F

from openafm import config as cfg
from openafm.errors import ConfigError

# CLIP's pixel statistics: the encoder normalises [0, 1] pixels itself.
PIXEL_MEAN = (0.48145466, 0.4578275, 0.40821073)
PIXEL_STD = (0.26862954, 0.26130258, 0.27577711)


class RegisterKind(enum.Enum):
    NONE = "none"          # plain windowed ViTDet; the output register is the mean of the final patches
    WINDOW = "window"      # the report's Register-Window: a register joins every window, then its copies average


@dataclasses.dataclass(frozen=True, kw_only=True)
class VisionConfig:
    image_size: int                     # the size the position table is learned at (other sizes interpolate it)
    patch_size: int
    width: int
    depth: int
    heads: int
    mlp_ratio: float = 4.0
    window: int                         # patches per window side in the windowed layers
    global_layers: tuple[int, ...]      # indices of the cross-window (global) attention layers
    register: RegisterKind = RegisterKind.WINDOW
    norm_eps: float = 1e-6

    def __post_init__(self) -> None:
        object.__setattr__(self, "global_layers", tuple(self.global_layers))
        if isinstance(self.register, str):
            object.__setattr__(self, "register", RegisterKind(self.register))
        for name in ("image_size", "patch_size", "width", "depth", "heads", "window"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"vision: {name} must be positive, got {getattr(self, name)}")
        if self.image_size % self.patch_size:
            raise ConfigError(f"vision: image_size={self.image_size} is not a multiple of patch_size={self.patch_size}")
        if self.width % self.heads:
            raise ConfigError(f"vision: width={self.width} is not divisible by heads={self.heads}")
        if self.mlp_ratio <= 0:
            raise ConfigError(f"vision: mlp_ratio must be positive, got {self.mlp_ratio}")
        bad = [i for i in self.global_layers if not 0 <= i < self.depth]
        if bad or len(set(self.global_layers)) != len(self.global_layers):
            raise ConfigError(f"vision: global_layers={self.global_layers} must be distinct layer indices in "
                              f"0..{self.depth - 1}")

    @property
    def grid(self) -> int:
        """Patches per side at image_size (the learned position table's grid)."""
        return self.image_size // self.patch_size

    @property
    def mlp_hidden(self) -> int:
        return round(self.width * self.mlp_ratio)

    def is_global(self, layer: int) -> bool:
        return layer in self.global_layers

    def to_dict(self) -> dict:
        return cfg.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "VisionConfig":
        return cfg.from_dict(cls, data)

    def param_count(self) -> int:
        """Parameters of the VisionEncoder this config builds (closed form, checked against the module)."""
        d, h = self.width, self.mlp_hidden
        total = 3 * self.patch_size ** 2 * d + d            # patch embedding (weight, bias)
        total += self.grid ** 2 * d                          # position table
        total += d if self.register is RegisterKind.WINDOW else 0
        block = 2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (d * h + h) + (h * d + d)  # 2 LN, qkv, proj, MLP
        return total + self.depth * block + 2 * d          # + final LayerNorm

    def forward_flops(self, image_size: int, n_kept: int | None = None) -> int:
        """Multiply-adds x 2 of one image's forward at image_size (closed form; attention included).
        n_kept: patches kept by FLIP (None: all)."""
        g = image_size // self.patch_size
        n = g * g if n_kept is None else n_kept
        d, h, r = self.width, self.mlp_hidden, int(self.register is RegisterKind.WINDOW)
        flops = 2 * n * 3 * self.patch_size ** 2 * d
        for i in range(self.depth):
            if self.is_global(i):
                groups, length = 1, n + r
            else:
                per_side = -(-g // self.window)
                groups = per_side * per_side
                length = (self.window ** 2 if n_kept is None else n // groups) + r
            flops += 2 * groups * length * 4 * d * d       # qkv, proj (each register copy too)
            flops += 2 * groups * 2 * length * length * d   # QK^T and AV
            flops += 2 * (n + r) * 2 * d * h                # MLP (the averaged register once)
        return flops


# --- presets: report scale (config only) and the small ones that train here -------------------------

def vitdet_l_rw() -> VisionConfig:
    """The on-device encoder at report scale (config only, ~300M): ViT-L/14 widths, windows of 16x16
    patches (672/14 = a 48x48 grid, 3x3 windows), three global layers at the end of each third."""
    return VisionConfig(image_size=448, patch_size=14, width=1024, depth=24, heads=16, mlp_ratio=4.0,
                        window=16, global_layers=(7, 15, 23), register=RegisterKind.WINDOW)


def vit_g() -> VisionConfig:
    """The server encoder at report scale (config only, ~1B): the plain ViT-g/14 (width 1408, depth 40,
    MLP 6144), every layer global; 448/14 = a 32x32 grid."""
    return VisionConfig(image_size=448, patch_size=14, width=1408, depth=40, heads=16, mlp_ratio=6144 / 1408,
                        window=32, global_layers=tuple(range(40)), register=RegisterKind.WINDOW)


def vision_small() -> VisionConfig:
    """Trains here in minutes (~3.1M). A 28-pixel patch so that 224 -> 8x8, 448 -> 16x16, 672 -> 24x24
    patches; windows of 4x4 patches, three global layers. Pretrained at 224 (see train/vision/clip.py)."""
    return VisionConfig(image_size=224, patch_size=28, width=192, depth=6, heads=3, mlp_ratio=4.0,
                        window=4, global_layers=(1, 3, 5), register=RegisterKind.WINDOW)


def vision_micro() -> VisionConfig:
    """For the benchmarks on a shared 2-core CPU (~0.3M): 128 -> an 8x8 grid of 16-pixel patches (the same
    token layout as vision-small at 224: 4 windows of 4x4, three global layers), a quarter of its width."""
    return VisionConfig(image_size=128, patch_size=16, width=64, depth=6, heads=2, mlp_ratio=4.0,
                        window=4, global_layers=(1, 3, 5), register=RegisterKind.WINDOW)


def vision_tiny() -> VisionConfig:
    """For tests: 56x56 -> a 4x4 grid of 14-pixel patches, windows of 2x2, layers 1 and 3 global."""
    return VisionConfig(image_size=56, patch_size=14, width=32, depth=4, heads=2, mlp_ratio=2.0,
                        window=2, global_layers=(1, 3), register=RegisterKind.WINDOW)


VISION_PRESETS: dict[str, typing.Callable[[], VisionConfig]] = {
    "vitdet-l-rw": vitdet_l_rw, "vit-g": vit_g, "vision-small": vision_small, "vision-micro": vision_micro,
    "vision-tiny": vision_tiny}
CONFIG_ONLY = frozenset({"vitdet-l-rw", "vit-g"})


def get_vision_preset(name: str) -> VisionConfig:
    if name not in VISION_PRESETS:
        raise ConfigError(f"unknown vision preset {name!r}; known: {sorted(VISION_PRESETS)}")
    return VISION_PRESETS[name]()


# --- windows -------------------------------------------------------------------------------------------

def window_partition(x: torch.Tensor, window: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """[B, h, w, D] -> ([B * nW, window², D], valid [nW, window²] or None): pad bottom/right to multiples of
    the window (ViTDet), cut windows row-major. valid marks real patches (None when nothing was padded)."""
    b, h, w, d = x.shape
    ph, pw = -h % window, -w % window
    if ph or pw:
        x = F.pad(x, (0, 0, 0, pw, 0, ph))
    hp, wp = h + ph, w + pw
    x = x.view(b, hp // window, window, wp // window, window, d).permute(0, 1, 3, 2, 4, 5)
    windows = x.reshape(-1, window * window, d)
    if not (ph or pw):
        return windows, None
    real = torch.zeros(hp, wp, dtype=torch.bool, device=x.device)
    real[:h, :w] = True
    valid = real.view(hp // window, window, wp // window, window).permute(0, 2, 1, 3).reshape(-1, window * window)
    return windows, valid


def window_merge(windows: torch.Tensor, window: int, h: int, w: int) -> torch.Tensor:
    """Inverse of window_partition: [B * nW, window², D] -> [B, h, w, D] (padding dropped)."""
    hp, wp = h + (-h % window), w + (-w % window)
    d = windows.shape[-1]
    x = windows.view(-1, hp // window, wp // window, window, window, d).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, hp, wp, d)[:, :h, :w]


def window_ids(h: int, w: int, window: int, device=None) -> torch.Tensor:
    """[h * w] the window (row-major over windows) of each patch (row-major over the grid)."""
    rows = torch.arange(h, device=device) // window
    cols = torch.arange(w, device=device) // window
    return (rows[:, None] * (-(-w // window)) + cols[None, :]).reshape(-1)


# --- the encoder ---------------------------------------------------------------------------------------

@dataclasses.dataclass
class VisionOutput:
    patches: torch.Tensor      # [B, h, w, D], or [B, n_kept, D] (in keep's order) when FLIP dropped patches
    register: torch.Tensor     # [B, D]


class Block(nn.Module):
    """Pre-norm ViT block; attention over whatever groups of tokens it is handed (windows, whole images, texts)."""

    def __init__(self, width: int, heads: int, mlp_hidden: int, eps: float, device=None):
        super().__init__()
        d = width
        self.heads = heads
        self.norm1 = nn.LayerNorm(d, eps=eps, device=device)
        self.qkv = nn.Linear(d, 3 * d, device=device)
        self.proj = nn.Linear(d, d, device=device)
        self.norm2 = nn.LayerNorm(d, eps=eps, device=device)
        self.fc1 = nn.Linear(d, mlp_hidden, device=device)
        self.fc2 = nn.Linear(mlp_hidden, d, device=device)

    def attend(self, x: torch.Tensor, key_valid: torch.Tensor | None = None) -> torch.Tensor:
        """x + attention(norm(x)) within each group: [G, L, D]; key_valid [G, L] bool (None: all keys)."""
        g, length, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(g, length, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        mask = None if key_valid is None else key_valid[:, None, None, :]      # [G, 1, 1, L]
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)           # [G, H, L, Dh]
        return x + self.proj(out.transpose(1, 2).reshape(g, length, d))

    def feed(self, x: torch.Tensor) -> torch.Tensor:  # [..., D] -> [..., D]
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class VisionEncoder(nn.Module):
    def __init__(self, config: VisionConfig, device=None):
        super().__init__()
        self.config = config
        d, p = config.width, config.patch_size
        self.patch_embed = nn.Linear(3 * p * p, d, device=device)
        self.pos = nn.Parameter(torch.randn(1, config.grid, config.grid, d, device=device) * 0.02)
        self.register_token = (nn.Parameter(torch.randn(1, d, device=device) * 0.02)
                               if config.register is RegisterKind.WINDOW else None)
        self.blocks = nn.ModuleList(Block(d, config.heads, config.mlp_hidden, config.norm_eps, device=device)
                                    for _ in range(config.depth))
        self.norm = nn.LayerNorm(d, eps=config.norm_eps, device=device)
        self.register_buffer("pixel_mean", torch.tensor(PIXEL_MEAN, device=device).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("pixel_std", torch.tensor(PIXEL_STD, device=device).view(1, 3, 1, 1), persistent=False)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def grid_for(self, height: int, width: int) -> tuple[int, int]:
        p = self.config.patch_size
        if height % p or width % p:
            raise ConfigError(f"vision: an image of {height}x{width} is not a whole number of {p}-pixel patches")
        return height // p, width // p

    def positions(self, h: int, w: int) -> torch.Tensor:
        """[h, w, D] the position table, bicubically interpolated when the grid differs from the learned one."""
        pos = self.pos
        if (h, w) != (self.config.grid, self.config.grid):
            pos = F.interpolate(pos.permute(0, 3, 1, 2), size=(h, w), mode="bicubic",
                                align_corners=False).permute(0, 2, 3, 1)
        return pos[0]

    def embed(self, pixels: torch.Tensor) -> torch.Tensor:
        """[B, 3, H, W] in [0, 1] -> [B, h, w, 3 p²] normalised, unfolded patches."""
        if pixels.dim() != 4 or pixels.shape[1] != 3:
            raise ConfigError(f"vision: pixels must be [B, 3, H, W], got {tuple(pixels.shape)}")
        p = self.config.patch_size
        h, w = self.grid_for(pixels.shape[2], pixels.shape[3])
        x = (pixels - self.pixel_mean) / self.pixel_std
        x = x.view(x.shape[0], 3, h, p, w, p).permute(0, 2, 4, 1, 3, 5)       # [B, h, w, 3, p, p]
        return x.reshape(x.shape[0], h, w, 3 * p * p)

    def forward(self, pixels: torch.Tensor, keep: torch.Tensor | None = None) -> VisionOutput:
        """pixels [B, 3, H, W] in [0, 1]; keep [B, n_kept] flat (row-major) indices of the patches FLIP keeps."""
        patches = self.embed(pixels)                                          # [B, h, w, 3p²]
        b, h, w, _ = patches.shape
        pos = self.positions(h, w)                                            # [h, w, D]
        reg = None if self.register_token is None else self.register_token.expand(b, -1)   # [B, D]
        if keep is None:
            x = self.patch_embed(patches) + pos                               # [B, h, w, D]
            grouping = GridGroups(h, w, self.config.window)
        else:
            grouping = KeptGroups(keep, h, w, self.config)
            flat = patches.reshape(b, h * w, -1)
            x = grouping.gather(self.patch_embed(grouping.take(flat)) + pos.reshape(h * w, -1)[grouping.order])
        for i in range(self.config.depth):
            x, reg = self.apply_layer(i, x, reg, grouping)
        x = self.norm(grouping.output(x))
        register = self.norm(reg) if reg is not None else x.reshape(b, -1, x.shape[-1]).mean(1)
        return VisionOutput(patches=x, register=register)

    def apply_layer(self, index: int, x: torch.Tensor, reg: torch.Tensor | None,
                    grouping: "GridGroups | KeptGroups") -> tuple[torch.Tensor, torch.Tensor | None]:
        """One block: attention within windows (or over the image for a global layer), the register joining
        each group and its copies averaged, then the MLP on every token and the register."""
        block, is_global = self.blocks[index], self.config.is_global(index)
        groups, valid = grouping.split(x, is_global)                          # [B * nG, L, D], [B * nG, L]
        n_groups = groups.shape[0] // x.shape[0]
        if reg is not None:
            copies = reg.repeat_interleave(n_groups, dim=0)[:, None]          # [B * nG, 1, D]
            groups = torch.cat([copies, groups], dim=1)
            if valid is not None:
                valid = torch.cat([valid.new_ones(valid.shape[0], 1), valid], dim=1)
        out = block.attend(groups, valid)
        if reg is not None:
            reg = out[:, 0].view(x.shape[0], n_groups, -1).mean(1)            # [B, D]: the copies averaged
            out = out[:, 1:]
        x = block.feed(grouping.join(out, x.shape[0]))
        return x, (block.feed(reg) if reg is not None else None)


class GridGroups:
    """All patches, kept as [B, h, w, D]; windowed layers partition (with padding masked) and merge."""

    def __init__(self, h: int, w: int, window: int):
        self.h, self.w, self.window = h, w, window
        self.padded = bool(h % window or w % window)
        self.is_global = False

    def split(self, x: torch.Tensor, is_global: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        self.is_global = is_global
        if is_global:
            return x.reshape(x.shape[0], self.h * self.w, -1), None
        windows, valid = window_partition(x, self.window)
        if valid is not None:
            valid = valid.repeat(x.shape[0], 1)                               # [B * nW, window²]
        return windows, valid

    def join(self, groups: torch.Tensor, b: int) -> torch.Tensor:
        if self.is_global:
            return groups.reshape(b, self.h, self.w, -1)
        return window_merge(groups, self.window, self.h, self.w)

    def output(self, x: torch.Tensor) -> torch.Tensor:
        return x


class KeptGroups:
    """FLIP's kept patches, held sorted by window as [B, nW, k, D] (k kept per window); the output puts them
    back in keep's order."""

    def __init__(self, keep: torch.Tensor, h: int, w: int, config: VisionConfig):
        if keep.dim() != 2 or keep.dtype not in (torch.int64, torch.int32):
            raise ConfigError(f"vision: keep must be [B, n_kept] integer indices, got {keep.dtype} "
                              f"{tuple(keep.shape)}")
        if keep.numel() and (keep.min() < 0 or keep.max() >= h * w):
            raise ConfigError(f"vision: keep indices must lie in 0..{h * w - 1} for a {h}x{w} grid")
        windowed = len(config.global_layers) < config.depth
        self.n_windows = (h // config.window) * (w // config.window) if windowed else 1
        if windowed and (h % config.window or w % config.window):
            raise ConfigError(f"vision: FLIP masking needs a grid divisible by the window; {h}x{w} patches, "
                              f"window {config.window}")
        ids = window_ids(h, w, config.window, keep.device)[keep.long()] if windowed else torch.zeros_like(keep)
        counts = torch.stack([torch.bincount(row, minlength=self.n_windows) for row in ids])   # [B, nW]
        if windowed and (counts != counts[:, :1]).any():
            raise ConfigError("vision: FLIP masking must keep the same number of patches in every window "
                              f"(use train.flip.window_keep); got per-window counts {counts[0].tolist()}")
        self.sort = torch.argsort(ids, dim=1, stable=True)                   # [B, n]: window-major order
        self.order = torch.gather(keep.long(), 1, self.sort)                  # [B, n]: patch index, sorted
        self.k = keep.shape[1] // self.n_windows
        self.is_global = False

    def take(self, flat: torch.Tensor) -> torch.Tensor:  # [B, h*w, F] -> [B, n, F] sorted kept patches
        return torch.gather(flat, 1, self.order[..., None].expand(-1, -1, flat.shape[-1]))

    def gather(self, x: torch.Tensor) -> torch.Tensor:   # [B, n, D] -> [B, nW, k, D]
        return x.view(x.shape[0], self.n_windows, self.k, -1)

    def split(self, x: torch.Tensor, is_global: bool) -> tuple[torch.Tensor, None]:
        self.is_global = is_global
        b = x.shape[0]
        return (x.reshape(b, -1, x.shape[-1]) if is_global else x.reshape(b * self.n_windows, self.k, -1)), None

    def join(self, groups: torch.Tensor, b: int) -> torch.Tensor:
        return groups.reshape(b, self.n_windows, self.k, -1)

    def output(self, x: torch.Tensor) -> torch.Tensor:  # [B, nW, k, D] -> [B, n, D] in keep's order
        flat = x.reshape(x.shape[0], -1, x.shape[-1])
        return torch.empty_like(flat).scatter_(1, self.sort[..., None].expand_as(flat), flat)
