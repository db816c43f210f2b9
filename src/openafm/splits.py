"""The two splits every source of examples is cut into: TRAIN, what training may see, and HELDOUT, what reported
figures are measured on.

Each source assigns an item to one split by construction, from the item itself (a BFCL question by a hash of its id,
a UDHR prompt by its article, an emoji by its drawing style, a font by its family), so no item is in both and the
assignment never depends on how many items are drawn. A function that can also take every item says so with
``split: Split | None`` (None: all of them).
"""

from __future__ import annotations

import enum


class Split(str, enum.Enum):
    TRAIN = "train"          # what training (SFT, RL, reward models, adapters) may learn from
    HELDOUT = "heldout"      # what figures are reported on; never trained on
