"""Charts and countable shapes drawn here, so what each image shows is known exactly (report §5.1: charts, counting).

    bar_charts(n, palette=TRAIN_PALETTES, seed=0)     # matplotlib bar charts: item.values, item.tallest
    shape_counts(n, palette=TRAIN_PALETTES, seed=0)   # 1-6 filled circles: item.count

A bar chart has 3-5 bars of integer heights 1-9 on a 0-10 axis with a grid, labelled A, B, C, ...; exactly one
bar is the tallest, so "what is the value of the tallest bar?" has one answer. The colour palettes are split
like the fonts of text_images: `TRAIN_PALETTES` train, `HELD_OUT_PALETTES` are only ever scored on.
"""

from __future__ import annotations

import dataclasses
import io
import random
from typing import Iterator

from PIL import Image, ImageDraw

SIZE = 224
TRAIN_PALETTES = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "black")
HELD_OUT_PALETTES = ("tab:red", "tab:olive", "tab:cyan", "tab:pink")
MAX_COUNT = 6


@dataclasses.dataclass(frozen=True)
class BarChart:
    image: Image.Image
    values: tuple[int, ...]          # bar heights, left to right

    @property
    def tallest(self) -> int:
        return max(self.values)


@dataclasses.dataclass(frozen=True)
class ShapeCount:
    image: Image.Image
    count: int


def _bar_values(rng: random.Random) -> tuple[int, ...]:
    """3-5 heights in 1..9 with a unique maximum."""
    bars = rng.randint(3, 5)
    top = rng.randint(2, 9)
    others = [rng.randint(1, top - 1) for _ in range(bars - 1)]
    values = others[:]
    values.insert(rng.randint(0, bars - 1), top)
    return tuple(values)


def render_bar_chart(values: tuple[int, ...], colour: str, rng: random.Random, size: int = SIZE) -> Image.Image:
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt   # imported here: only chart rendering needs it
    fig, ax = plt.subplots(figsize=(size / 100, size / 100), dpi=100)
    labels = [chr(ord("A") + i) for i in range(len(values))]
    ax.bar(labels, values, color=colour, width=rng.uniform(0.5, 0.8))
    ax.set_ylim(0, 10)
    ax.set_yticks(range(0, 11, 2 if rng.random() < 0.5 else 1))
    ax.grid(axis="y", alpha=0.4)
    ax.tick_params(labelsize=7)
    fig.tight_layout(pad=0.3)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    buffer.seek(0)
    return Image.open(buffer).convert("RGB").resize((size, size))


def bar_charts(n: int, *, palette: tuple[str, ...] = TRAIN_PALETTES, seed: int = 0) -> Iterator[BarChart]:
    rng = random.Random(seed)
    for _ in range(n):
        values = _bar_values(rng)
        yield BarChart(render_bar_chart(values, rng.choice(palette), rng), values)


def render_circles(count: int, colour: str, rng: random.Random, size: int = SIZE) -> Image.Image:
    """`count` filled circles of one colour, not overlapping, on light paper."""
    import matplotlib.colors   # colour names -> RGB
    ink = tuple(int(255 * c) for c in matplotlib.colors.to_rgb(colour))
    img = Image.new("RGB", (size, size), tuple(rng.randint(225, 255) for _ in range(3)))
    draw = ImageDraw.Draw(img)
    placed: list[tuple[int, int, int]] = []
    while len(placed) < count:
        r = rng.randint(size // 20, size // 9)
        x, y = rng.randint(r, size - r), rng.randint(r, size - r)
        if all((x - a) ** 2 + (y - b) ** 2 > (r + c + 4) ** 2 for a, b, c in placed):
            placed.append((x, y, r))
            draw.ellipse((x - r, y - r, x + r, y + r), fill=ink)
    return img


def shape_counts(n: int, *, palette: tuple[str, ...] = TRAIN_PALETTES, seed: int = 0) -> Iterator[ShapeCount]:
    rng = random.Random(seed)
    for _ in range(n):
        count = rng.randint(1, MAX_COUNT)
        yield ShapeCount(render_circles(count, rng.choice(palette), rng), count)
