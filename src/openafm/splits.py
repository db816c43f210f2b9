"""The two splits every source of examples is cut into: TRAIN, what training may see, and HELDOUT, what reported
figures are measured on — and the one rule that assigns an item to a split.

An item's split is a function of the item alone: the first 8 bytes of sha256("<namespace>-split:<key>") mod 100,
below HELDOUT_PERCENT, is held out. The key is what makes two items the same item (a BFCL question id, a math
question's text, an instruction prompt's text), and the namespace is the kind of item, never the consumer, so an
item has the same split in every pool that draws it: SFT data, RL prompt sets, reward-model pairs and evals can
each draw as many items as they like and a held-out item is still never trained on. A source whose items come in
natural groups cuts by the group instead (a UDHR article, an emoji drawing style, a font family).

    split_of("simple_python_12", "bfcl")       # Split.TRAIN or Split.HELDOUT, the same everywhere
    split_of(question_text, "prompt")

A function that can also take every item says so with ``split: Split | None`` (None: all of them).
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Callable, Sequence
from typing import TypeVar

HELDOUT_PERCENT = 25        # of the items of a kind, by hash
MAX_DRAW_FACTOR = 64        # first_of_split draws at most this many times `size` items looking for `size` of a split
T = TypeVar("T")


class Split(str, enum.Enum):
    TRAIN = "train"          # what training (SFT, RL, reward models, adapters) may learn from
    HELDOUT = "heldout"      # what figures are reported on; never trained on


def split_of(key: str, namespace: str) -> Split:
    """TRAIN or HELDOUT for the item `key` of kind `namespace`; stable across runs, machines and versions."""
    digest = hashlib.sha256(f"{namespace}-split:{key}".encode()).digest()
    return Split.HELDOUT if int.from_bytes(digest[:8], "big") % 100 < HELDOUT_PERCENT else Split.TRAIN


def first_of_split(draw: Callable[[int], Sequence[T]], key: Callable[[T], str], namespace: str, split: Split,
                   size: int) -> list[T]:
    """The first `size` items of `split` in draw(n), where a draw of n items is a prefix of any larger draw (a seeded
    generator): n grows four-fold from 2 * size + 16 until there are enough, or stops at MAX_DRAW_FACTOR * size (a
    small item space may give fewer). Held-out items are kept once each; train items as drawn."""
    n = size * 2 + 16
    while True:
        kept, seen = [], set()
        for item in draw(n):
            k = key(item)
            if split_of(k, namespace) is split and not (split is Split.HELDOUT and k in seen):
                kept.append(item)
                seen.add(k)
        if len(kept) >= size or n >= size * MAX_DRAW_FACTOR:
            return kept[:size]
        n *= 4
