"""Text-rich images: words rendered from Debian fonts with Pillow, so the word in each image is known exactly.

The report's text-rich image understanding (reading text in an image) at the scale this machine trains:
one word from a fixed list (`WORDS`: 32 common English words), drawn in a DejaVu face (Debian
`fonts-dejavu-core`, installed with the system) at a random size, position, ink and paper colour. The
question "What word is written in the image?" is checked by exact match against the word. Faces are split by
family so a whole family can be held out: `TRAIN_FAMILIES` (Sans, Sans Mono) train, `HELD_OUT_FAMILIES`
(Serif) test reading in a face never seen.

    for item in text_images(8, families=TRAIN_FAMILIES, seed=0):
        item.image, item.word, item.font      # a 224x224 RGB Pillow image, its word, the font file's name
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Iterator

from PIL import Image, ImageDraw, ImageFont

from openafm.errors import MissingTaskDataError

FONT_DIRS = (Path("/usr/share/fonts/truetype/dejavu"),)
DEBIAN_PACKAGE = "fonts-dejavu-core"
WORDS = ("apple", "house", "water", "music", "river", "light", "green", "table", "bread", "cloud", "heart",
         "money", "paper", "phone", "plant", "smile", "stone", "sugar", "tiger", "train", "world", "horse",
         "beach", "chair", "dream", "earth", "fruit", "glass", "honey", "lemon", "night", "ocean")
TRAIN_FAMILIES = ("DejaVuSans-", "DejaVuSansMono", "DejaVuSans.ttf", "DejaVuSansCondensed")
HELD_OUT_FAMILIES = ("DejaVuSerif",)


@dataclasses.dataclass(frozen=True)
class TextImage:
    image: Image.Image
    word: str
    font: str                 # the font file's name


def font_files(families: tuple[str, ...]) -> list[Path]:
    """DejaVu font files whose names start with one of `families` (a prefix, or a whole file name)."""
    found = sorted(p for d in FONT_DIRS if d.is_dir() for p in d.glob("*.ttf")
                   if any(p.name.startswith(f) or p.name == f for f in families) and "Math" not in p.name)
    if not found:
        raise MissingTaskDataError("text images", DEBIAN_PACKAGE, f"apt-get install {DEBIAN_PACKAGE}",
                                   f"no font file of families {families} under {[str(d) for d in FONT_DIRS]}")
    return found


def render_word(word: str, font: Path, *, size: int = 224, rng: random.Random) -> Image.Image:
    """`word` in `font` on a size x size image: text height 12-22% of the side, random place, ink and paper."""
    paper = tuple(rng.randint(200, 255) for _ in range(3))
    ink = tuple(rng.randint(0, 80) for _ in range(3))
    img = Image.new("RGB", (size, size), paper)
    draw = ImageDraw.Draw(img)
    points = max(8, int(size * rng.uniform(0.12, 0.22)))
    face = ImageFont.truetype(str(font), points)
    while True:
        left, top, right, bottom = draw.textbbox((0, 0), word, font=face)
        if right - left <= size * 0.9 or points <= 8:
            break
        points -= 2
        face = ImageFont.truetype(str(font), points)
    w, h = right - left, bottom - top
    x = rng.randint(0, max(0, size - w)) - left
    y = rng.randint(0, max(0, size - h)) - top
    draw.text((x, y), word, font=face, fill=ink)
    return img


def text_images(n: int, *, families: tuple[str, ...] = TRAIN_FAMILIES, words: tuple[str, ...] = WORDS,
                size: int = 224, seed: int = 0) -> Iterator[TextImage]:
    """n rendered words (uniform over `words` and the families' fonts), reproducible from `seed`."""
    rng = random.Random(seed)
    fonts = font_files(families)
    for _ in range(n):
        word, font = rng.choice(words), rng.choice(fonts)
        yield TextImage(render_word(word, font, size=size, rng=rng), word, font.name)
