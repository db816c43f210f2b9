"""Emoji in five drawing styles with their names in 14 languages: image-text pairs from installed packages.

- Styles: the npm packages `emoji-datasource-{apple,google,twitter,facebook}` (v16, MIT; the artwork under
  each vendor's licence) ship the same ~1,900 emoji as 64x64 PNGs, listed with names in `emoji.json`; the
  Debian font `fonts-noto-color-emoji` is rendered with Pillow (raqm shapes the ZWJ sequences and flags).
- Names: `emoji.json`'s English name ("grinning face") is the class name and the zero-shot prompt; the PyPI
  package `emoji` adds names in 14 languages (multilingual captions) and the short names join them.
- Held out: TWITTER (Twemoji's flat style). The `google` images are Noto Color Emoji, the same design as the
  Debian font, so neither of those two could be an unseen style; apple and facebook are the other choices.

Install once with  npm install --prefix ~/.cache/openafm/emoji emoji-datasource-apple@16.0.0 (and -google,
-twitter, -facebook), or set OPENAFM_EMOJI_DIR to that prefix; `make setup` does it.

    train = concat([emoji_images(s) for s in TRAIN_STYLES])   # apple, google, facebook, noto (font)
    test = emoji_images(HELD_OUT_STYLE)                       # twitter: never seen in training
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import os
from collections.abc import Sequence
from pathlib import Path

import emoji as emoji_names
import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFont

from openafm.data.images.image_set import ImageSet, to_square_rgb

DEFAULT_PREFIX = Path.home() / ".cache" / "openafm" / "emoji"
ENV_DIR = "OPENAFM_EMOJI_DIR"
VERSION = "16.0.0"
NOTO_FONT = Path("/usr/share/fonts/truetype/noto/NotoColorEmoji.ttf")
NOTO_PIXELS = 109           # the font's one bitmap strike (CBDT): it renders at this size only
MARGIN = 0.04               # the share of each side left white around the drawing (every style alike)
LANGUAGES = ("en", "es", "de", "fr", "it", "pt", "ru", "ja", "ko", "zh", "tr", "ar", "fa", "id")


class EmojiStyle(enum.Enum):
    APPLE = "apple"
    GOOGLE = "google"
    TWITTER = "twitter"
    FACEBOOK = "facebook"
    NOTO_FONT = "noto-font"    # the Debian font rendered with Pillow

    @property
    def package(self) -> str | None:
        return None if self is EmojiStyle.NOTO_FONT else f"emoji-datasource-{self.value}"


HELD_OUT_STYLE = EmojiStyle.TWITTER
TRAIN_STYLES = (EmojiStyle.APPLE, EmojiStyle.GOOGLE, EmojiStyle.FACEBOOK, EmojiStyle.NOTO_FONT)


@dataclasses.dataclass(frozen=True)
class Emoji:
    key: str                      # emoji.json's `unified` code, lower case: "1f600", "1f1ea-1f1ec"
    char: str                     # the emoji itself
    name: str                     # English name, lower case: "grinning face"
    short_names: tuple[str, ...]  # "grinning"
    category: str                 # "Smileys & Emotion"
    names: tuple[tuple[str, str], ...]  # (language, name) from PyPI emoji: ("es", "cara sonriendo"), ...

    @property
    def captions(self) -> tuple[str, ...]:
        others = [n for _, n in self.names] + [s.replace("_", " ") for s in self.short_names]
        return tuple(dict.fromkeys([self.name] + [o for o in others if o != self.name]))


def install_command() -> str:
    packages = " ".join(f"{s.package}@{VERSION}" for s in EmojiStyle if s.package)
    return f"npm install --prefix {DEFAULT_PREFIX} {packages}"


def package_dir(style: EmojiStyle) -> Path:
    """The installed npm package of a style; raises naming the install command."""
    base = Path(os.environ[ENV_DIR]) if os.environ.get(ENV_DIR) else DEFAULT_PREFIX
    path = base / "node_modules" / style.package
    if not (path / "emoji.json").is_file():
        raise FileNotFoundError(f"the npm package {style.package} is not installed (looked in {path}); install it "
                                f"with `{install_command()}`, or set {ENV_DIR} to where it is")
    return path


def _char(unified: str) -> str:
    return "".join(chr(int(part, 16)) for part in unified.split("-"))


def _pypi_names(*chars: str) -> tuple[tuple[str, str], ...]:
    emoji_names.config.load_language(list(LANGUAGES))    # the package loads languages other than English lazily
    for char in chars:
        data = emoji_names.EMOJI_DATA.get(char)
        if data:
            return tuple((lang, data[lang].strip(":").replace("_", " ")) for lang in LANGUAGES if lang in data)
    return ()


@functools.lru_cache(maxsize=1)
def catalog() -> tuple[Emoji, ...]:
    """Every emoji of emoji.json (skin-tone variants left out: they share the base emoji's name), in its order."""
    table = json.loads((package_dir(EmojiStyle.GOOGLE) / "emoji.json").read_text(encoding="utf-8"))
    found = []
    for entry in sorted(table, key=lambda e: e["sort_order"]):
        if entry["category"] == "Component":
            continue                          # skin tones and hair styles alone: not pictures of a thing
        char = _char(entry["unified"])
        names = _pypi_names(char, _char(entry["non_qualified"]) if entry.get("non_qualified") else char)
        name = (entry.get("name") or entry["short_name"].replace("_", " ")).lower()
        found.append(Emoji(key=entry["unified"].lower(), char=char, name=name, short_names=tuple(entry["short_names"]),
                           category=entry["category"], names=names))
    return tuple(found)


def _image_path(style: EmojiStyle, key: str) -> Path:
    return package_dir(style) / "img" / style.value / "64" / f"{key}.png"


@functools.lru_cache(maxsize=1)
def _noto_font() -> ImageFont.FreeTypeFont:
    if not NOTO_FONT.is_file():
        raise FileNotFoundError(f"{NOTO_FONT} is missing: install the Debian package fonts-noto-color-emoji")
    return ImageFont.truetype(str(NOTO_FONT), NOTO_PIXELS, layout_engine=ImageFont.Layout.RAQM)


def render_noto(char: str) -> Image.Image | None:
    """One emoji drawn by the Noto Color Emoji font; None when the font has no single glyph for it (the shaper
    fell back to several side by side, or drew nothing)."""
    canvas = Image.new("RGBA", (NOTO_PIXELS * 4, NOTO_PIXELS + 40), (0, 0, 0, 0))
    ImageDraw.Draw(canvas).text((4, 4), char, font=_noto_font(), embedded_color=True)
    box = canvas.getbbox()
    if box is None or box[2] - box[0] > 1.5 * NOTO_PIXELS:
        return None
    return canvas.crop(box)


def categories() -> tuple[str, ...]:
    return tuple(dict.fromkeys(e.category for e in catalog()))


def emoji_images(style: EmojiStyle, *, size: int = 64, limit: int | None = None,
                 only: Sequence[str] | None = None) -> ImageSet:
    """The catalog's emoji that this style draws (the first `limit` of them; `only` these categories), as
    size x size images."""
    if only is not None and set(only) - set(categories()):
        raise ValueError(f"unknown emoji categories {sorted(set(only) - set(categories()))}; "
                         f"known: {list(categories())}")
    images, chosen = [], []
    for item in catalog():
        if limit is not None and len(chosen) >= limit:
            break
        if only is not None and item.category not in only:
            continue
        if style is EmojiStyle.NOTO_FONT:
            picture = render_noto(item.char)
        else:
            path = _image_path(style, item.key)
            picture = Image.open(path) if path.is_file() else None
        if picture is None:
            continue
        images.append(to_square_rgb(picture, size, margin=MARGIN))
        chosen.append(item)
    return ImageSet(source=f"emoji/{style.value}", images=torch.from_numpy(np.stack(images)),
                    keys=[e.key for e in chosen], names=[e.name for e in chosen], captions=[e.captions for e in chosen])
