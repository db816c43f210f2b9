"""scikit-learn's bundled handwritten digits (UCI optdigits test set, 1,797 images of 8x8, 17 grey levels).

Dark strokes on white, scaled up with nearest-neighbour sampling; the caption names the digit in words.
scikit-learn is imported here only: it is installed by the dev extras (lm-eval needs it), and nothing
else in openafm.data depends on it, so a runtime install without it can still use the other sources.

    digits = digit_images(size=32)    # digits.names[i] == "the digit seven"
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from openafm.data.images.image_set import ImageSet

WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def digit_images(*, size: int = 32) -> ImageSet:
    try:
        from sklearn.datasets import load_digits   # optional: see the module docstring
    except ImportError as e:
        raise ModuleNotFoundError("digit_images needs scikit-learn (pip install scikit-learn; `make setup` "
                                  "installs it with the dev extras)") from e
    data = load_digits()
    ink = torch.as_tensor(data.images, dtype=torch.float32) / 16          # [N, 8, 8] in [0, 1], 1 = stroke
    grey = F.interpolate((1 - ink)[:, None], size=(size, size), mode="nearest")   # [N, 1, S, S]
    images = (grey * 255).round().to(torch.uint8).expand(-1, 3, -1, -1).contiguous()
    labels = [int(t) for t in data.target]
    names = [f"the digit {WORDS[t]}" for t in labels]
    return ImageSet(source="digits/sklearn", images=images, keys=[str(t) for t in labels], names=names,
                    captions=[(n, f"handwritten {WORDS[t]}", str(t)) for n, t in zip(names, labels)])
