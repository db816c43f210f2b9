"""Image question-answer tasks with exact answers: name the emoji, read the word (train and held-out splits).

    NAME_EMOJI  "What emoji is this?" -> its English name; K emoji classes drawn in the training styles
                (apple, google, facebook, the Noto font); held out: the twitter style, never seen in training
    READ_WORD   "What word is written in the image?" -> the word; DejaVu Sans faces train, Serif faces held out

Answers are checked by exact match (case and surrounding space ignored). The emoji classes are a fixed
subset (names of one or two words, present in every style) so that a few minutes of CPU training can learn
them; chance is 1/K and 1/len(WORDS).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import random

import numpy as np
from PIL import Image

from openafm.data.images.emoji import HELD_OUT_STYLE, TRAIN_STYLES, EmojiStyle, emoji_images
from openafm.data.images.text_images import HELD_OUT_FAMILIES, TRAIN_FAMILIES, WORDS, text_images
from openafm.splits import Split

N_EMOJI = 40


class Task(enum.Enum):
    NAME_EMOJI = "name-emoji"
    READ_WORD = "read-word"

    @property
    def question(self) -> str:
        return {Task.NAME_EMOJI: "What emoji is this?", Task.READ_WORD: "What word is written in the image?"}[self]


@dataclasses.dataclass(frozen=True)
class QA:
    task: Task
    image: Image.Image
    answer: str


def is_correct(answer: str, reply: str) -> bool:
    return reply.strip().strip(".").lower() == answer.strip().lower()


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


def emoji_qa(split: Split, k: int = N_EMOJI) -> list[QA]:
    """Every chosen emoji in every style of the split, as name-the-emoji questions."""
    keys = set(emoji_classes(k))
    styles = TRAIN_STYLES if split is Split.TRAIN else (HELD_OUT_STYLE,)
    out = []
    for style in styles:
        s = _style(style)
        for i, key in enumerate(s.keys):
            if key in keys:
                pixels = s.images[i].permute(1, 2, 0).numpy().astype(np.uint8)
                out.append(QA(Task.NAME_EMOJI, Image.fromarray(pixels), s.names[i]))
    return out


def word_qa(split: Split, n: int, seed: int = 0) -> list[QA]:
    families = TRAIN_FAMILIES if split is Split.TRAIN else HELD_OUT_FAMILIES
    return [QA(Task.READ_WORD, t.image, t.word)
            for t in text_images(n, families=families, seed=seed + (0 if split is Split.TRAIN else 10_000))]


def chance(task: Task, k: int = N_EMOJI) -> float:
    return 1.0 / (k if task is Task.NAME_EMOJI else len(WORDS))


def sample(pool: list[QA], n: int, rng: random.Random) -> list[QA]:
    return [rng.choice(pool) for _ in range(n)]
