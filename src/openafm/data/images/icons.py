"""The Adwaita icon theme (Debian `adwaita-icon-theme`, CC-BY-SA 3.0 / LGPL-3) as named images.

Each icon's file name is its description in freedesktop's naming spec ("user-trash-full",
"folder-music-symbolic"): the name becomes the caption ("user trash full"; "-symbolic" marks the monochrome
variant and is dropped from the caption, kept in the key). Only the 48x48 PNGs are read: every icon the
theme draws in colour or as a symbolic glyph has one there; the scalable SVGs would need an SVG renderer.

    icons = icon_images(size=64)      # ImageSet of ~1,000 icons; icons.names[i] == "user trash full"
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image

from openafm.data.images.image_set import ImageSet, to_square_rgb

THEME_DIR = Path("/usr/share/icons/Adwaita")
SIZE_DIR = "48x48"


def icon_files(theme: Path = THEME_DIR) -> list[Path]:
    """The theme's 48x48 PNGs, one per icon name, sorted by context ("places") and name."""
    folder = theme / SIZE_DIR
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is missing: install the Debian package adwaita-icon-theme")
    files = {}
    for path in sorted(folder.glob("*/*.png")):
        files.setdefault(path.name.split(".")[0], path)   # "x.symbolic.png" and "x.png" both name x
    return sorted(files.values(), key=lambda p: (p.parent.name, p.name))


def caption(stem: str) -> str:
    """"folder-music-symbolic" -> "folder music"; "application-exit-symbolic-rtl" -> "application exit rtl"."""
    return " ".join(w for w in stem.replace("_", "-").split("-") if w and w != "symbolic")


def icon_images(*, size: int = 64, theme: Path = THEME_DIR) -> ImageSet:
    files = icon_files(theme)
    images = np.stack([to_square_rgb(Image.open(path), size, margin=0.04) for path in files])
    stems = [path.name.split(".")[0] for path in files]
    names = [caption(s) for s in stems]
    contexts = [path.parent.name for path in files]
    return ImageSet(source="icons/adwaita", images=torch.from_numpy(images), keys=stems, names=names,
                    captions=[(n, f"{n} ({c})") for n, c in zip(names, contexts)])
