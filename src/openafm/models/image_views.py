"""Resolution modes (report §2.3): how an image becomes the encoder's views and how many image tokens it costs.

    HIGH      the image at 2x the view size, tiled 2x2, plus an overview of the whole image: 5 views x 144 tokens
              = 720 (on-device: 1344x1344 -> four 672x672 tiles + a 672x672 overview)
    BALANCED  the overview only: 1 view, 144 tokens
    RAPID     one small view (224x224), 9 tokens

The view order is overview first, then the tiles row by row (LLaVA-NeXT's order; the report does not say).
Images are letterboxed onto white to a square (aspect ratio kept; the report does not say how it resizes):
text-rich images stay legible and transparent emoji sit on white. Files are read with Pillow; a file that is
missing, not an image, truncated or in a format Pillow cannot decode raises `ImageLoadError` naming the file
and the reason. Images sent over the wire (the server's) come as base64 data URLs: `data_url_bytes` checks the URL
(a data URL, base64, an accepted media type, at most MAX_IMAGE_BYTES) and `decode_image` decodes its bytes (PNG,
JPEG, GIF or WebP only, at most MAX_IMAGE_PIXELS: a decompression-bomb guard), each raising `ImageLoadError`.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import enum
import io
import os
from pathlib import Path

import torch
from PIL import Image, UnidentifiedImageError

from openafm.errors import ConfigError, OpenAFMError

IMAGE_MEDIA_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")     # what a data URL may hold
DATA_URL_FORMATS = ("PNG", "JPEG", "GIF", "WEBP")    # the Pillow decoders data-URL bytes may use (any of them)
MAX_IMAGE_BYTES = 20_000_000        # decoded bytes of one data-URL image (20 MB)
MAX_IMAGE_PIXELS = 50_000_000       # width x height of one image, a file or a data URL (50 megapixels)
DATA_URL = "data URL"               # what ImageLoadError names for an image that came as a data URL


class ImageLoadError(OpenAFMError, ValueError):
    """An image (a file, or a data URL's bytes) could not be used; `path` and `reason` say which and why."""

    def __init__(self, path: str | os.PathLike, reason: str):
        self.path, self.reason = str(path), reason
        super().__init__(f"cannot read image {self.path}: {reason}")


class Resolution(enum.Enum):
    HIGH = "high"
    BALANCED = "balanced"
    RAPID = "rapid"


# The mode an image prompt runs in when the caller names none (openafm.fm, `openafm respond`, the server's detail
# "auto"): rapid, where the shipped tower answers best. It trained three quarters of its steps in rapid mode, and on
# validation renderings it reads more there than in balanced mode and refuses fewer answerable questions
# (docs/guides/vision.md, "Which mode by default"); it is also ~2x faster to a first token.
DEFAULT_RESOLUTION = Resolution.RAPID


@dataclasses.dataclass(frozen=True, kw_only=True)
class ViewSizes:
    """Pixel sizes and token counts of the views (report: on-device 672 / server 448; rapid 224)."""

    view: int = 672                 # side of the overview and of each high-resolution tile
    rapid: int = 224                # side of the rapid-mode view
    view_tokens: int = 144          # image tokens per full view
    rapid_tokens: int = 9           # image tokens of the rapid view

    def __post_init__(self) -> None:
        for name in ("view", "rapid", "view_tokens", "rapid_tokens"):
            if getattr(self, name) < 1:
                raise ConfigError(f"view sizes: {name}={getattr(self, name)} must be positive")

    def plan(self, mode: Resolution) -> tuple[int, int, int]:
        """-> (views, pixel side of each view, tokens per view) for a mode."""
        if mode is Resolution.HIGH:
            return 5, self.view, self.view_tokens
        if mode is Resolution.BALANCED:
            return 1, self.view, self.view_tokens
        if mode is Resolution.RAPID:
            return 1, self.rapid, self.rapid_tokens
        raise ConfigError(f"resolution {mode!r} is not one of {[m.value for m in Resolution]}")

    def tokens(self, mode: Resolution) -> int:
        """Image tokens one image costs in `mode` (720 / 144 / 9 with the report's sizes)."""
        views, _, per_view = self.plan(mode)
        return views * per_view


ON_DEVICE = ViewSizes()
SERVER = ViewSizes(view=448)


def resolution(value: Resolution | str) -> Resolution:
    """A Resolution from itself or its name ("high", "balanced", "rapid"); anything else raises naming the choices."""
    if isinstance(value, Resolution):
        return value
    try:
        return Resolution(value)
    except ValueError:
        raise ConfigError(f"resolution={value!r} is not one of {[m.value for m in Resolution]}") from None


def load_image(path: str | os.PathLike) -> Image.Image:
    """The image at `path` as RGB (transparency composited onto white); ImageLoadError if it cannot be read or has
    more than MAX_IMAGE_PIXELS pixels."""
    path = Path(path)
    if not path.exists():
        raise ImageLoadError(path, "no such file")
    if not path.is_file():
        raise ImageLoadError(path, "not a regular file")
    return _decode(path, path, max_pixels=MAX_IMAGE_PIXELS)


def data_url_bytes(url: str) -> bytes:
    """The image bytes of a base64 data URL (`data:image/png;base64,...`); ImageLoadError(DATA_URL, reason) for
    anything else: not a data URL, not base64, a media type not in IMAGE_MEDIA_TYPES, over MAX_IMAGE_BYTES."""
    head, comma, payload = url.partition(",")
    if head[:5].lower() != "data:" or not comma:
        raise ImageLoadError(DATA_URL, "not a data URL: send data:image/png;base64,<the image's bytes in base64>")
    media, *params = (p.strip().lower() for p in head[5:].split(";"))
    if media not in IMAGE_MEDIA_TYPES:
        raise ImageLoadError(DATA_URL, f"media type {media!r} is not accepted: use one of {list(IMAGE_MEDIA_TYPES)}")
    if params[-1:] != ["base64"]:
        raise ImageLoadError(DATA_URL, f"not base64-encoded: the URL must begin data:{media};base64,")
    compact = "".join(payload.split())
    size = len(compact) * 3 // 4 - compact.endswith("=") - compact.endswith("==")
    if size > MAX_IMAGE_BYTES:
        raise ImageLoadError(DATA_URL, f"the image is {size} bytes; the limit is {MAX_IMAGE_BYTES} bytes "
                                       f"({MAX_IMAGE_BYTES / 1e6:g} MB) decoded")
    try:
        data = base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ImageLoadError(DATA_URL, f"bad base64 ({e})") from None
    if not data:
        raise ImageLoadError(DATA_URL, "the data URL holds no image bytes")
    return data


def decode_image(data: bytes, name: str = DATA_URL) -> Image.Image:
    """Image bytes (from `data_url_bytes`) as RGB; ImageLoadError(name, reason) if Pillow cannot decode them as
    PNG, JPEG, GIF or WebP, or the image has more than MAX_IMAGE_PIXELS pixels."""
    return _decode(io.BytesIO(data), name, formats=DATA_URL_FORMATS, max_pixels=MAX_IMAGE_PIXELS)


def _decode(source, name, *, formats: tuple[str, ...] | None = None, max_pixels: int | None = None) -> Image.Image:
    """Pillow's decoding of a file or buffer, as RGB; every failure an ImageLoadError naming `name` and why."""
    kinds = ", ".join(formats) if formats else "PNG, JPEG, GIF, WebP, BMP, TIFF, ..."
    try:
        with Image.open(source, formats=formats) as img:
            if max_pixels is not None and img.width * img.height > max_pixels:
                raise ImageLoadError(name, f"the image is {img.width}x{img.height} = {img.width * img.height} "
                                           f"pixels; the limit is {max_pixels}")
            img.load()
            return to_rgb(img)
    except ImageLoadError:
        raise
    except UnidentifiedImageError:
        raise ImageLoadError(name, f"not an image in a format Pillow can decode (supported: {kinds})") from None
    except Image.DecompressionBombError as e:
        raise ImageLoadError(name, f"too large to decode safely ({e})") from None
    except (OSError, SyntaxError, ValueError) as e:
        raise ImageLoadError(name, f"unreadable or truncated image data ({e})") from None


def to_rgb(img: Image.Image) -> Image.Image:
    """RGB, with any transparency composited onto white."""
    if img.mode in ("RGBA", "LA") or (img.mode == "P" and "transparency" in img.info):
        rgba = img.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    return img.convert("RGB")


def letterbox(img: Image.Image, side: int) -> Image.Image:
    """`img` scaled to fit a side x side square (aspect kept), centred on white."""
    w, h = img.size
    scale = side / max(w, h)
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    canvas = Image.new("RGB", (side, side), (255, 255, 255))
    canvas.paste(img.resize(size, Image.Resampling.BICUBIC), ((side - size[0]) // 2, (side - size[1]) // 2))
    return canvas


def to_tensor(img: Image.Image) -> torch.Tensor:
    """An RGB image -> pixels [3, H, W] float in [0, 1]."""
    data = torch.frombuffer(bytearray(img.tobytes()), dtype=torch.uint8)
    return data.view(img.size[1], img.size[0], 3).permute(2, 0, 1).float().div_(255.0)


def image_views(img: Image.Image, mode: Resolution, sizes: ViewSizes = ON_DEVICE) -> torch.Tensor:
    """An image -> its views for `mode`: pixels [n_views, 3, S, S] in [0, 1] (overview first, then tiles)."""
    n, side, _ = sizes.plan(mode)
    img = to_rgb(img)
    overview = to_tensor(letterbox(img, side))                                   # [3, S, S]
    if n == 1:
        return overview[None]
    big = to_tensor(letterbox(img, 2 * side))                                    # [3, 2S, 2S]
    tiles = [big[:, r * side:(r + 1) * side, c * side:(c + 1) * side] for r in range(2) for c in range(2)]
    return torch.stack([overview, *tiles])                                       # [5, 3, S, S]
