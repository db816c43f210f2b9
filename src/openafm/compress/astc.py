"""ASTC block compression of weight matrices (report §6), through the real ARM codec (`astc-encoder-py`).

A weight matrix W [out, in] is cut into tiles of the ASTC footprint (block "6x6": 6 columns x 6 rows).
Per tile, its minimum is subtracted so the texels are non-negative, and that minimum is stored as fp16;
on load the codec decodes the block and the minimum is added back.

The minimum property (tested): the stored fp16 minimum ``m`` is the largest fp16 value <= the tile's true
minimum, and it is *exactly* the value subtracted before encoding and added after decoding. So texels are
>= 0 (what unsigned texel formats need) and ``decode() - m`` is exactly what the codec returned. Whether
the minimum element itself decodes to ``m`` exactly depends on the codec's endpoint choice (it does for a
constant tile; the benchmark counts how often it does for real weights).

Kinds explored (benchmarks/astc.py prints them):

- ``Profile.HDR``: fp16 texels, the HDR profile (endpoints in a log-like domain). ``Profile.LDR``: 8-bit
  unorm texels in [0, 1], the LDR linear profile; LDR needs a ``Scale`` that maps each tile into [0, 1].
- ``Channels``: REPLICATED puts one weight tile in a block (R = G = B = tile, A = 1): 128 bits per
  bx*by weights. RGB / RGBA pack 3 / 4 neighbouring tiles (along the row) into the colour channels of one
  block: 128 bits per 3*bx*by / 4*bx*by weights, at the cost of channels sharing the block's partitions
  and weight grid.
- ``Scale``: NONE (texel = W - m), BLOCK (texel = (W - m) / s, s an fp16 per tile, rounded up so texels
  stay <= 1), TENSOR (one fp32 s per matrix: the largest tile range).
- ``TexelRange``: ZERO (texels start at 0, the literal recipe) or OCTAVE (HDR only: 1 is added after the
  scale so texels lie in [1, 2], where the HDR codec's log-like steps are nearly uniform).
- ``Quality``: the encoder's search presets (speed vs error).

Bits per weight count everything stored: 128 bits per ASTC block, 16 per tile minimum, the scales, over
padded tiles when a dimension is not a multiple of the footprint (`CompressedSize`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import Enum
from typing import Callable, Iterator

import astc_encoder as ae
import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from openafm.compress.svd_pullout import pull_out

LEGAL_BLOCKS_2D: tuple[tuple[int, int], ...] = (
    (4, 4), (5, 4), (5, 5), (6, 5), (6, 6), (8, 5), (8, 6), (8, 8),
    (10, 5), (10, 6), (10, 8), (10, 10), (12, 10), (12, 12),
)
ASTC_BLOCK_BITS = 128
FP16_BITS = 16
FP32_BITS = 32


class Profile(Enum):
    HDR = "hdr"     # fp16 texels, HDR RGBA profile
    LDR = "ldr"     # 8-bit unorm texels, LDR linear profile


class Channels(Enum):
    REPLICATED = "replicated"   # one tile per block, R = G = B = tile, A = 1
    RGB = "rgb"                 # three tiles per block, A = 1
    RGBA = "rgba"               # four tiles per block

    @property
    def tiles_per_block(self) -> int:
        return {Channels.REPLICATED: 1, Channels.RGB: 3, Channels.RGBA: 4}[self]


class Scale(Enum):
    NONE = "none"       # texel = W - m               (HDR only)
    BLOCK = "block"     # texel = (W - m) / s_tile    (fp16 per tile)
    TENSOR = "tensor"   # texel = (W - m) / s         (one fp32 per matrix)


class TexelRange(Enum):
    ZERO = "zero"       # texel = (W - m) / s, in [0, range]
    OCTAVE = "octave"   # texel = 1 + (W - m) / s, in [1, 1 + range]: HDR only. The HDR codec works in a
                        # log-like domain and weighs error relatively, so texels near 0 soak up its
                        # precision; inside one octave its steps are nearly uniform. The 1 is a constant,
                        # not stored.

    @property
    def offset(self) -> float:
        return 0.0 if self is TexelRange.ZERO else 1.0


class Quality(Enum):
    FASTEST = "fastest"
    FAST = "fast"
    MEDIUM = "medium"
    THOROUGH = "thorough"
    EXHAUSTIVE = "exhaustive"


def parse_block(block: str | tuple[int, int]) -> tuple[int, int]:
    """"6x6" or (6, 6) -> (bx, by); anything that is not a legal ASTC 2D footprint raises."""
    if isinstance(block, str):
        parts = block.lower().split("x")
        try:
            parsed = tuple(int(p) for p in parts)
        except ValueError:
            parsed = None
    else:
        parsed = tuple(block)
    if parsed not in LEGAL_BLOCKS_2D:
        legal = ", ".join(f"{x}x{y}" for x, y in LEGAL_BLOCKS_2D)
        raise ValueError(f"ASTC block {block!r} is not a legal 2D footprint; legal: {legal}")
    return parsed  # type: ignore[return-value]


def block_name(block: tuple[int, int]) -> str:
    return f"{block[0]}x{block[1]}"


@dataclass(frozen=True)
class CompressedSize:
    """What one compressed matrix stores, in bits, and over how many original weights."""
    weights: int            # original out * in
    astc_bits: int          # 128 per ASTC block
    minimum_bits: int       # fp16 per tile
    scale_bits: int         # fp16 per tile (BLOCK), fp32 per matrix (TENSOR), 0 (NONE)
    adapter_bits: int = 0   # LoRA factors of an SVD pull-out (fp16), 0 without

    @property
    def bits(self) -> int:
        return self.astc_bits + self.minimum_bits + self.scale_bits + self.adapter_bits

    @property
    def bits_per_weight(self) -> float:
        return self.bits / self.weights

    @property
    def bits_per_weight_without_adapter(self) -> float:
        return (self.bits - self.adapter_bits) / self.weights

    def __add__(self, other: "CompressedSize") -> "CompressedSize":
        return CompressedSize(weights=self.weights + other.weights, astc_bits=self.astc_bits + other.astc_bits,
                              minimum_bits=self.minimum_bits + other.minimum_bits,
                              scale_bits=self.scale_bits + other.scale_bits,
                              adapter_bits=self.adapter_bits + other.adapter_bits)


# ---- the codec -----------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=32)
def _context(profile: Profile, block: tuple[int, int], quality: Quality):

    ae_profile = {Profile.HDR: ae.ASTCProfile.HDR, Profile.LDR: ae.ASTCProfile.LDR}[profile]
    preset = getattr(ae.ASTCQualityPreset, quality.name)
    config = ae.ASTCConfig(ae_profile, block[0], block[1], 1, quality=preset)
    return ae.ASTCContext(config, threads=1)


def _identity_swizzle():
    # Not ASTCSwizzle.from_str("rgba"): that binding upper-cases its argument's buffer in place, which
    # rewrites the interned "rgba" constant for the whole process (Channels.RGBA's value included).
    return ae.ASTCSwizzle()


def _texel_type(profile: Profile):
    return ae.ASTCType.F16 if profile is Profile.HDR else ae.ASTCType.U8


def _codec_roundtrip_bytes(texels: np.ndarray, profile: Profile, block: tuple[int, int], quality: Quality) -> bytes:
    """texels [H, W, 4] (fp16 for HDR, uint8 for LDR) -> ASTC bytes (16 per block, raster order)."""
    h, w, _ = texels.shape
    image = ae.ASTCImage(_texel_type(profile), w, h, 1, np.ascontiguousarray(texels).tobytes())
    return _context(profile, block, quality).compress(image, _identity_swizzle())


def _decode_bytes(data: bytes, profile: Profile, block: tuple[int, int], quality: Quality,
                  height: int, width: int) -> np.ndarray:
    """ASTC bytes -> decoded texels [H, W, 4] as float32 in texel units (LDR: 0..1)."""
    image = ae.ASTCImage(_texel_type(profile), width, height, 1)
    _context(profile, block, quality).decompress(data, image, _identity_swizzle())
    if profile is Profile.HDR:
        return np.frombuffer(image.data, dtype=np.float16).reshape(height, width, 4).astype(np.float32)
    return np.frombuffer(image.data, dtype=np.uint8).reshape(height, width, 4).astype(np.float32) / 255.0


# ---- tiles ---------------------------------------------------------------------------------------------

def fp16_floor(x: np.ndarray) -> np.ndarray:
    """The largest fp16 value <= x, elementwise (x float32)."""
    h = x.astype(np.float16)
    over = h.astype(np.float32) > x
    h[over] = np.nextafter(h[over], np.float16(-np.inf))
    return h


def fp16_ceil(x: np.ndarray) -> np.ndarray:
    """The smallest fp16 value >= x, elementwise (x float32)."""
    h = x.astype(np.float16)
    under = h.astype(np.float32) < x
    h[under] = np.nextafter(h[under], np.float16(np.inf))
    return h


def _to_tiles(w: np.ndarray, block: tuple[int, int], tiles_per_block: int) -> np.ndarray:
    """w [R, C] -> tiles [nty, ntx, by, bx], edge-padded so ntx is a multiple of tiles_per_block."""
    bx, by = block
    rows, cols = w.shape
    nty = -(-rows // by)
    ntx = -(-cols // bx)
    ntx = -(-ntx // tiles_per_block) * tiles_per_block
    padded = np.pad(w, ((0, nty * by - rows), (0, ntx * bx - cols)), mode="edge")   # [nty*by, ntx*bx]
    return padded.reshape(nty, by, ntx, bx).transpose(0, 2, 1, 3)                   # [nty, ntx, by, bx]


def _from_tiles(tiles: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    nty, ntx, by, bx = tiles.shape
    return tiles.transpose(0, 2, 1, 3).reshape(nty * by, ntx * bx)[: shape[0], : shape[1]]


def _tiles_to_texels(x: np.ndarray, channels: Channels, one: float) -> np.ndarray:
    """x [nty, ntx, by, bx] -> texel image [nty*by, ntx/k*bx, 4]: block (i, j) channel c = tile (i, j*k + c)."""
    nty, ntx, by, bx = x.shape
    k = channels.tiles_per_block
    groups = x.reshape(nty, ntx // k, k, by, bx)                                      # [nty, nbx, k, by, bx]
    texels = np.full((nty, ntx // k, by, bx, 4), one, dtype=x.dtype)
    if channels is Channels.REPLICATED:
        texels[..., 0] = texels[..., 1] = texels[..., 2] = groups[:, :, 0]
    else:
        for c in range(k):
            texels[..., c] = groups[:, :, c]
    return texels.transpose(0, 2, 1, 3, 4).reshape(nty * by, (ntx // k) * bx, 4)


def _texels_to_tiles(texels: np.ndarray, channels: Channels, tiles_shape: tuple[int, int, int, int]) -> np.ndarray:
    """Inverse of _tiles_to_texels (REPLICATED reads R, as a sampler of a luminance texture would)."""
    nty, ntx, by, bx = tiles_shape
    k = channels.tiles_per_block
    blocks = texels.reshape(nty, by, ntx // k, bx, 4).transpose(0, 2, 1, 3, 4)        # [nty, nbx, by, bx, 4]
    groups = np.moveaxis(blocks[..., :k], -1, 2)                                       # [nty, nbx, k, by, bx]
    return groups.reshape(nty, ntx, by, bx)


# ---- one matrix ----------------------------------------------------------------------------------------

@dataclass
class AstcWeight:
    """One weight matrix in ASTC form: the codec's bytes plus per-tile fp16 minima (and scales)."""
    shape: tuple[int, int]          # original [out, in]
    profile: Profile
    block: tuple[int, int]          # (bx, by)
    channels: Channels
    scale: Scale
    texel_range: TexelRange
    quality: Quality
    data: bytes                     # ASTC blocks, 16 bytes each
    minimum: np.ndarray             # [nty, ntx] float16, subtracted before encoding, added after decoding
    tile_scale: np.ndarray | None   # [nty, ntx] float16 (BLOCK) or None
    tensor_scale: float | None      # fp32 (TENSOR) or None

    @property
    def tiles_shape(self) -> tuple[int, int, int, int]:
        return (*self.minimum.shape, self.block[1], self.block[0])

    def decoded_texels(self) -> np.ndarray:
        """What the codec returns, before scale and minimum: [nty, ntx, by, bx] float32."""
        nty, ntx, by, bx = self.tiles_shape
        k = self.channels.tiles_per_block
        texels = _decode_bytes(self.data, self.profile, self.block, self.quality, nty * by, (ntx // k) * bx)
        return _texels_to_tiles(texels, self.channels, self.tiles_shape)

    def decode(self) -> torch.Tensor:
        """W~ [out, in] float32."""
        x = self.decoded_texels() - np.float32(self.texel_range.offset)                # [nty, ntx, by, bx]
        if self.scale is Scale.BLOCK:
            x = x * self.tile_scale.astype(np.float32)[:, :, None, None]
        elif self.scale is Scale.TENSOR:
            x = x * np.float32(self.tensor_scale)
        x = x + self.minimum.astype(np.float32)[:, :, None, None]
        return torch.from_numpy(np.ascontiguousarray(_from_tiles(x, self.shape)))

    def size(self) -> CompressedSize:
        n_tiles = self.minimum.size
        scale_bits = {Scale.NONE: 0, Scale.BLOCK: FP16_BITS * n_tiles, Scale.TENSOR: FP32_BITS}[self.scale]
        return CompressedSize(weights=self.shape[0] * self.shape[1], astc_bits=len(self.data) * 8,
                              minimum_bits=FP16_BITS * n_tiles, scale_bits=scale_bits)


def compress_weight(weight: torch.Tensor, profile: Profile | str = Profile.HDR, block: str | tuple[int, int] = "6x6",
                    *, channels: Channels | str = Channels.REPLICATED, scale: Scale | str | None = None,
                    texel_range: TexelRange | str = TexelRange.ZERO,
                    quality: Quality | str = Quality.MEDIUM) -> AstcWeight:
    """W [out, in] -> AstcWeight. ``scale`` defaults to NONE for HDR and BLOCK for LDR."""
    profile, channels, quality = Profile(profile), Channels(channels), Quality(quality)
    texel_range = TexelRange(texel_range)
    scale = Scale(scale) if scale is not None else (Scale.NONE if profile is Profile.HDR else Scale.BLOCK)
    if profile is Profile.LDR and scale is Scale.NONE:
        raise ValueError("LDR texels are unorm in [0, 1]: scale must be 'block' or 'tensor', not 'none'")
    if profile is Profile.LDR and texel_range is not TexelRange.ZERO:
        raise ValueError(f"LDR texels are unorm in [0, 1]: texel_range must be 'zero', not {texel_range.value!r}")
    bxy = parse_block(block)
    if weight.ndim != 2:
        raise ValueError(f"compress_weight takes a 2-D weight [out, in], got shape {tuple(weight.shape)}")
    w = weight.detach().to("cpu", torch.float32).numpy()
    if not np.isfinite(w).all():
        raise ValueError("weight has non-finite values; ASTC needs finite texels")
    if profile is Profile.HDR and np.abs(w).max() > 30000.0:
        raise ValueError(f"weight magnitude {np.abs(w).max():.4g} is outside the fp16 texel range of the HDR profile")

    tiles = _to_tiles(w, bxy, channels.tiles_per_block)                               # [nty, ntx, by, bx]
    minimum = fp16_floor(tiles.min(axis=(2, 3)))                                       # [nty, ntx] fp16
    x = tiles - minimum.astype(np.float32)[:, :, None, None]                           # >= 0
    tile_scale, tensor_scale = None, None
    if scale is Scale.BLOCK:
        tile_scale = fp16_ceil(x.max(axis=(2, 3)))
        tile_scale[tile_scale == 0] = np.float16(1.0)
        x = np.minimum(x / tile_scale.astype(np.float32)[:, :, None, None], 1.0)
    elif scale is Scale.TENSOR:
        tensor_scale = float(x.max()) or 1.0
        x = np.minimum(x / np.float32(tensor_scale), 1.0)
    if profile is Profile.HDR:
        texels = _tiles_to_texels((x + np.float32(texel_range.offset)).astype(np.float16), channels, one=1.0)
    else:
        texels = _tiles_to_texels(np.round(x * 255.0).astype(np.uint8), channels, one=255)
    data = _codec_roundtrip_bytes(texels, profile, bxy, quality)
    return AstcWeight(shape=tuple(w.shape), profile=profile, block=bxy, channels=channels, scale=scale,
                      texel_range=texel_range, quality=quality, data=data, minimum=minimum, tile_scale=tile_scale, tensor_scale=tensor_scale)


def relative_error(weight: torch.Tensor, approx: torch.Tensor) -> float:
    """||W - W~||_F / ||W||_F."""
    w = weight.detach().float()
    return float(torch.linalg.norm(w - approx.detach().float()) / torch.linalg.norm(w))


# ---- whole model ---------------------------------------------------------------------------------------

def linear_modules(model: nn.Module, include: Callable[[str], bool] | None = None) -> Iterator[tuple[str, nn.Linear]]:
    """(name, module) for every nn.Linear (subclasses included) whose name passes ``include``."""
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and (include is None or include(name)):
            yield name, module


@dataclass
class CompressedLinear:
    name: str
    residual: AstcWeight                         # ASTC form of W (rank 0) or of W - B A
    adapter: "object | None"                     # svd_pullout.LoraFactors when rank > 0
    relative_error: float                        # ||W - W~|| / ||W||

    def size(self) -> CompressedSize:
        s = self.residual.size()
        if self.adapter is None:
            return s
        return CompressedSize(weights=s.weights, astc_bits=s.astc_bits, minimum_bits=s.minimum_bits,
                              scale_bits=s.scale_bits, adapter_bits=self.adapter.bits())


def total_size(records: list[CompressedLinear]) -> CompressedSize:
    """The compressed size of a whole model pass, summed over its matrices."""
    total = CompressedSize(weights=0, astc_bits=0, minimum_bits=0, scale_bits=0)
    for r in records:
        total = total + r.size()
    return total


@torch.no_grad()
def astc_compress_model(model: nn.Module, profile: Profile | str = Profile.HDR, block: str | tuple[int, int] = "6x6",
                        *, channels: Channels | str = Channels.REPLICATED, scale: Scale | str | None = None,
                        texel_range: TexelRange | str = TexelRange.ZERO,
                        quality: Quality | str = Quality.MEDIUM, rank: int = 0,
                        include: Callable[[str], bool] | None = None, progress: bool = True) -> list[CompressedLinear]:
    """Compress every linear weight (with an SVD pull-out of ``rank`` when > 0) and write the reconstruction
    W~ = B A + decode(R) back into the model in place. Returns one record per matrix."""

    modules = list(linear_modules(model, include))
    if not modules:
        raise ValueError("no nn.Linear modules matched; nothing to compress")
    if progress:
        modules = tqdm(modules, desc=f"astc {Profile(profile).value} {block_name(parse_block(block))} r={rank}",
                       unit="matrix")
    records = []
    for name, module in modules:
        w = module.weight.detach().float().cpu()
        if rank > 0:
            pulled = pull_out(w, rank)
            residual = compress_weight(pulled.residual, profile, block, channels=channels, scale=scale,
                                       texel_range=texel_range, quality=quality)
            approx = pulled.adapter.product() + residual.decode()
            adapter = pulled.adapter
        else:
            residual = compress_weight(w, profile, block, channels=channels, scale=scale,
                                       texel_range=texel_range, quality=quality)
            approx, adapter = residual.decode(), None
        records.append(CompressedLinear(name=name, residual=residual, adapter=adapter,
                                        relative_error=relative_error(w, approx)))
        module.weight.copy_(approx.to(module.weight.dtype))
    return records
