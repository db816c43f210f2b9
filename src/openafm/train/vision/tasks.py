"""Image questions with exact answers (report §5.1's offline-makeable kinds), each with train and held-out splits.

    NAME_EMOJI   "What emoji is this?" -> its English name; K emoji classes in the training styles (apple, google,
                 facebook, the Noto font), placed at a random size and place; held out: the twitter style
    READ_WORD    "What word is written in the image?" -> the word; DejaVu Sans faces train, Serif faces held out
    READ_DIGIT   "What digit is written in the image?" -> "0".."9"; the same font split as READ_WORD
    CHART_VALUE  "What is the value of the tallest bar?" -> "1".."9" (matplotlib bar charts); palettes split
    COUNT        "How many circles are in the image?" -> "1".."6"; palettes split

Absent-object questions (the report's adversarial prompts): a task's question asked of an image of another kind
that cannot answer it (`ABSENT_FROM`); the right answer is the task's refusal ("There is no emoji in the image.").
`is_refusal` recognises any reply of that shape, so refusals are counted on answerable questions too.

Answers are checked by exact match (case, surrounding space and a final full stop ignored). Chance is 1/K.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import random

import numpy as np
from PIL import Image

from openafm.data.images.charts import HELD_OUT_PALETTES, MAX_COUNT, TRAIN_PALETTES, bar_charts, shape_counts
from openafm.data.images.emoji import HELD_OUT_STYLE, TRAIN_STYLES, EmojiStyle, emoji_images
from openafm.data.images.text_images import HELD_OUT_FAMILIES, TRAIN_FAMILIES, WORDS, font_files, render_word
from openafm.splits import Split

N_EMOJI = 40
HELD_OUT_SEED = 10_000            # held-out renderings draw from a seed range training never uses


class Task(enum.Enum):
    NAME_EMOJI = "name-emoji"
    READ_WORD = "read-word"
    READ_DIGIT = "read-digit"
    CHART_VALUE = "chart-value"
    COUNT = "count"

    @property
    def question(self) -> str:
        return {Task.NAME_EMOJI: "What emoji is this?", Task.READ_WORD: "What word is written in the image?",
                Task.READ_DIGIT: "What digit is written in the image?",
                Task.CHART_VALUE: "What is the value of the tallest bar?",
                Task.COUNT: "How many circles are in the image?"}[self]

    @property
    def refusal(self) -> str:
        return {Task.NAME_EMOJI: "There is no emoji in the image.", Task.READ_WORD: "There is no word in the image.",
                Task.READ_DIGIT: "There is no digit in the image.",
                Task.CHART_VALUE: "There is no bar chart in the image.",
                Task.COUNT: "There are no circles in the image."}[self]


# question -> the kinds of image that cannot answer it (charts carry digits on their axes, so no digit question)
ABSENT_FROM = {Task.NAME_EMOJI: (Task.READ_WORD, Task.READ_DIGIT, Task.CHART_VALUE, Task.COUNT),
               Task.READ_WORD: (Task.NAME_EMOJI, Task.COUNT),
               Task.READ_DIGIT: (Task.NAME_EMOJI, Task.COUNT),
               Task.CHART_VALUE: (Task.NAME_EMOJI, Task.READ_WORD, Task.COUNT),
               Task.COUNT: (Task.NAME_EMOJI, Task.READ_WORD, Task.READ_DIGIT)}


@dataclasses.dataclass(frozen=True)
class QA:
    task: Task                  # the question asked
    image: Image.Image
    answer: str
    absent: bool = False        # the image cannot answer the question; answer is task.refusal


def is_correct(answer: str, reply: str) -> bool:
    return reply.strip().strip(".").lower() == answer.strip().strip(".").lower()


def is_refusal(reply: str) -> bool:
    return reply.strip().lower().startswith(("there is no", "there are no"))


@functools.lru_cache(maxsize=None)
def _style(style: EmojiStyle):
    return emoji_images(style, size=64)


@functools.lru_cache(maxsize=1)
def emoji_classes(k: int = N_EMOJI) -> tuple[str, ...]:
    """k emoji keys present in every style with names of at most two words, spread over the catalog."""
    sets = [_style(s) for s in (*TRAIN_STYLES, HELD_OUT_STYLE)]
    common = set(sets[0].keys).intersection(*(s.keys for s in sets[1:]))
    first = sets[0]
    names = dict(zip(first.keys, first.names))
    usable = [key for key in first.keys if key in common and len(names[key].split()) <= 2
              and names[key].isascii() and len(set(names[key].split()) & {"flag", "keycap", "button"}) == 0]
    stride = max(1, len(usable) // k)
    return tuple(usable[::stride][:k])


def _placed(emoji: Image.Image, rng: random.Random, size: int = 224) -> Image.Image:
    """The emoji at 40-90% of a size x size canvas, at a random place on near-white paper."""
    side = int(size * rng.uniform(0.4, 0.9))
    canvas = Image.new("RGB", (size, size), tuple(rng.randint(235, 255) for _ in range(3)))
    canvas.paste(emoji.resize((side, side)), (rng.randint(0, size - side), rng.randint(0, size - side)))
    return canvas


def emoji_qa(split: Split, k: int = N_EMOJI, copies: int = 1, seed: int = 0) -> list[QA]:
    """Every chosen emoji in every style of the split, as name-the-emoji questions; with copies > 1 each is also
    placed `copies - 1` more times at a random size and place (training augmentation)."""
    keys = set(emoji_classes(k))
    rng = random.Random(seed + (0 if split is Split.TRAIN else HELD_OUT_SEED))
    out = []
    for style in _emoji_styles(split):
        s = _style(style)
        for i, key in enumerate(s.keys):
            if key in keys:
                image = _emoji_image(s, i)
                out.append(QA(Task.NAME_EMOJI, image, s.names[i]))
                out += [QA(Task.NAME_EMOJI, _placed(image, rng), s.names[i]) for _ in range(copies - 1)]
    return out


def placed_emoji_qa(split: Split, n: int, seed: int = 0, k: int = N_EMOJI) -> list[QA]:
    """n name-the-emoji questions, each a chosen emoji in one of the split's styles placed at a random size and
    place (fresh images for every seed, where emoji_qa gives each image once)."""
    keys = set(emoji_classes(k))
    rng = random.Random(seed + (0 if split is Split.TRAIN else HELD_OUT_SEED))
    drawn = [(s, i) for s in map(_style, _emoji_styles(split)) for i, key in enumerate(s.keys) if key in keys]
    out = []
    for _ in range(n):
        s, i = rng.choice(drawn)
        out.append(QA(Task.NAME_EMOJI, _placed(_emoji_image(s, i), rng), s.names[i]))
    return out


def _emoji_styles(split: Split) -> tuple[EmojiStyle, ...]:
    return TRAIN_STYLES if split is Split.TRAIN else (HELD_OUT_STYLE,)


def _emoji_image(s, i: int) -> Image.Image:
    """Image i of an emoji ImageSet (uint8 [3, H, W] there) as a Pillow image."""
    return Image.fromarray(s.images[i].permute(1, 2, 0).numpy().astype(np.uint8))


def _families(split: Split) -> tuple[str, ...]:
    return TRAIN_FAMILIES if split is Split.TRAIN else HELD_OUT_FAMILIES


def word_qa(split: Split, n: int, seed: int = 0) -> list[QA]:
    return _text_qa(Task.READ_WORD, WORDS, split, n, seed)


def digit_qa(split: Split, n: int, seed: int = 0) -> list[QA]:
    return _text_qa(Task.READ_DIGIT, tuple("0123456789"), split, n, seed)


def _text_qa(task: Task, texts: tuple[str, ...], split: Split, n: int, seed: int) -> list[QA]:
    rng = random.Random(seed + (0 if split is Split.TRAIN else HELD_OUT_SEED) + (7 if task is Task.READ_DIGIT else 0))
    fonts = font_files(_families(split))
    out = []
    for _ in range(n):
        text, font = rng.choice(texts), rng.choice(fonts)
        out.append(QA(task, render_word(text, font, rng=rng), text))
    return out


def chart_qa(split: Split, n: int, seed: int = 0) -> list[QA]:
    palette = TRAIN_PALETTES if split is Split.TRAIN else HELD_OUT_PALETTES
    return [QA(Task.CHART_VALUE, c.image, str(c.tallest))
            for c in bar_charts(n, palette=palette, seed=seed + (0 if split is Split.TRAIN else HELD_OUT_SEED))]


def count_qa(split: Split, n: int, seed: int = 0) -> list[QA]:
    palette = TRAIN_PALETTES if split is Split.TRAIN else HELD_OUT_PALETTES
    return [QA(Task.COUNT, c.image, str(c.count))
            for c in shape_counts(n, palette=palette, seed=seed + (0 if split is Split.TRAIN else HELD_OUT_SEED))]


def task_pools(split: Split, n: int, seed: int = 0, emoji_copies: int = 1) -> dict[Task, list[QA]]:
    """n questions of each rendered task (emoji: every chosen emoji of the split's styles, with copies)."""
    return {Task.NAME_EMOJI: emoji_qa(split, copies=emoji_copies, seed=seed), Task.READ_WORD: word_qa(split, n, seed),
            Task.READ_DIGIT: digit_qa(split, n, seed), Task.CHART_VALUE: chart_qa(split, n, seed),
            Task.COUNT: count_qa(split, n, seed)}


def absent_qa(pools: dict[Task, list[QA]], n: int, seed: int = 0) -> list[QA]:
    """n absent-object questions: a task's question (uniform over tasks) of an image from one of ABSENT_FROM's
    kinds present in `pools`, answered with the task's refusal."""
    rng = random.Random(seed)
    asked = [t for t in ABSENT_FROM if any(k in pools for k in ABSENT_FROM[t])]
    out = []
    for _ in range(n):
        task = rng.choice(asked)
        shown = rng.choice([k for k in ABSENT_FROM[task] if k in pools])
        out.append(QA(task, rng.choice(pools[shown]).image, task.refusal, absent=True))
    return out


# task -> (split, n, seed) -> n freshly rendered questions (emoji placed at a random size and place)
RENDER = {Task.NAME_EMOJI: placed_emoji_qa, Task.READ_WORD: word_qa, Task.READ_DIGIT: digit_qa,
          Task.CHART_VALUE: chart_qa, Task.COUNT: count_qa}


def chance(task: Task, k: int = N_EMOJI) -> float:
    return 1.0 / len(labels(task, k))


@functools.lru_cache(maxsize=None)
def labels(task: Task, k: int = N_EMOJI) -> tuple[str, ...]:
    """Every answer a task's image can have (a refusal aside), in a fixed order: its classes."""
    if task is Task.NAME_EMOJI:
        first = _style(TRAIN_STYLES[0])
        names = dict(zip(first.keys, first.names))
        return tuple(names[key] for key in emoji_classes(k))
    return {Task.READ_WORD: WORDS, Task.READ_DIGIT: tuple("0123456789"),
            Task.CHART_VALUE: tuple(str(v) for v in range(2, 10)),
            Task.COUNT: tuple(str(v) for v in range(1, MAX_COUNT + 1))}[task]


def sample(pool: list[QA], n: int, rng: random.Random) -> list[QA]:
    return [rng.choice(pool) for _ in range(n)]
