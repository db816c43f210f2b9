"""ImageSet: images with their class names and captions, as one uint8 tensor, plus the helpers to fill it.

Every image source (emoji styles, icons, digits) returns an ImageSet: square RGB images composited on
white, the class each shows (the key zero-shot accuracy is scored by), its English name (the zero-shot
prompt) and captions to train on (names in several languages, short names).

    images = emoji_images(EmojiStyle.APPLE)          # ImageSet of ~1,900 64x64 images
    pixels = images.pixels(range(8), size=224)       # [8, 3, 224, 224] float in [0, 1]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import torch
from PIL import Image
from torch.nn import functional as F


@dataclasses.dataclass
class ImageSet:
    source: str                        # "emoji/apple", "icons/adwaita", "digits/sklearn"
    images: torch.Tensor               # [N, 3, S, S] uint8 RGB on white
    keys: list[str]                    # the class of each image ("1f600", "folder-symbolic", "3")
    names: list[str]                   # its English name ("grinning face"): the zero-shot prompt
    captions: list[tuple[str, ...]]    # texts to train on (the name first, then other names and languages)

    def __post_init__(self) -> None:
        n = self.images.shape[0]
        if not (len(self.keys) == len(self.names) == len(self.captions) == n):
            raise ValueError(f"{self.source}: {n} images but {len(self.keys)} keys, {len(self.names)} names and "
                             f"{len(self.captions)} captions")
        if self.images.dtype != torch.uint8 or self.images.dim() != 4 or self.images.shape[1] != 3:
            raise ValueError(f"{self.source}: images must be [N, 3, S, S] uint8, got {self.images.dtype} "
                             f"{tuple(self.images.shape)}")

    def __len__(self) -> int:
        return self.images.shape[0]

    @property
    def size(self) -> int:
        return self.images.shape[-1]

    def pixels(self, index: Sequence[int] | torch.Tensor, size: int | None = None) -> torch.Tensor:
        """[len(index), 3, size, size] float in [0, 1], resized bilinearly (antialiased) when size differs."""
        x = self.images[torch.as_tensor(list(index) if not isinstance(index, torch.Tensor) else index)].float() / 255
        if size is not None and size != self.size:
            x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False, antialias=size < self.size)
        return x.clamp_(0, 1)

    def subset(self, index: Sequence[int]) -> "ImageSet":
        index = list(index)
        return ImageSet(self.source, self.images[index], [self.keys[i] for i in index],
                        [self.names[i] for i in index], [self.captions[i] for i in index])


def concat(sets: Sequence[ImageSet], source: str | None = None) -> ImageSet:
    """One ImageSet of several (all of one image size)."""
    sizes = {s.size for s in sets}
    if len(sizes) != 1:
        raise ValueError(f"concat: image sets of different sizes {sorted(sizes)}; load them at one size")
    return ImageSet(source or "+".join(s.source for s in sets), torch.cat([s.images for s in sets]),
                    [k for s in sets for k in s.keys], [n for s in sets for n in s.names],
                    [c for s in sets for c in s.captions])


def to_square_rgb(image: Image.Image, size: int, *, margin: float = 0.0) -> np.ndarray:
    """Any PIL image -> [3, size, size] uint8: alpha composited on white, centred, aspect kept, scaled to fit
    (with `margin` of the side left free around it)."""
    image = image.convert("RGBA")
    box = image.getbbox() or (0, 0, image.width, image.height)
    image = image.crop(box)
    inner = max(1, round(size * (1 - 2 * margin)))
    scale = inner / max(image.width, image.height)
    w, h = max(1, round(image.width * scale)), max(1, round(image.height * scale))
    image = image.resize((w, h), Image.Resampling.LANCZOS)
    canvas = Image.new("RGBA", (size, size), (255, 255, 255, 255))
    canvas.alpha_composite(image, ((size - w) // 2, (size - h) // 2))
    return np.asarray(canvas.convert("RGB")).transpose(2, 0, 1).copy()
