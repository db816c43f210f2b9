"""Plain-text passages that a fine-tune trains on as a language model (every token has a loss): the text anchor.

An sft stage that moves a model towards chats (tool calls, schemas) also moves it away from plain text; its drift is
measured as perplexity on the Debian Reference (eval/texts.py). Replaying plain prose beside the chats holds the
adapter near the base model's text distribution, the way pre-training data is replayed in continued training. The
prose here is the Debian Developer's Reference (data/sources/developers_reference.py): written apart from the
Debian Reference, never the text the drift is measured on (tests/test_heldout_disjoint.py checks that no passage
shares a sentence with it).

    passages = anchor_passages(240, seed=0)         # n passages of whole paragraphs, ~PASSAGE_CHARS each
    Passage("Some prose ...", "developers-reference:pkgs.rst.txt#3")

Passages are cut at paragraph ends, in document order, each at least PASSAGE_CHARS characters (the last of a
chapter may be shorter): 189 of them from developers-reference 12.18. n of them are drawn by seeded permutations of
the whole pool, one after another, so n sets the anchor's share of a mixture: n above the pool's size repeats each
passage at most ceil(n / 189) times. Count the share in tokens with a loss: every token of a passage has one, while
a chat's prompt, system turn and tools prompt have none, so in recipes/default-model-tools.yaml's mixture 240
passages are ~4% of the tokens and ~20% of the loss (800 would be 14% and 46%).
"""

from __future__ import annotations

import dataclasses
import random

from openafm.data.sources.developers_reference import SOURCE
from openafm.errors import ConfigError

PASSAGE_CHARS = 1200            # ~270 SmolLM2 tokens: two or three fit a 768-token row beside the chats


@dataclasses.dataclass(frozen=True)
class Passage:
    text: str
    where: str = ""             # "developers-reference:pkgs.rst.txt#3": chapter and passage number


def chapter_passages(doc_id: str, text: str, chars: int = PASSAGE_CHARS) -> list[Passage]:
    """A chapter's paragraphs grouped in order into passages of at least `chars` characters."""
    out, current = [], []
    for paragraph in text.split("\n\n"):
        current.append(paragraph)
        if sum(map(len, current)) >= chars:
            out.append(Passage("\n\n".join(current), f"{doc_id}#{len(out)}"))
            current = []
    if current:
        out.append(Passage("\n\n".join(current), f"{doc_id}#{len(out)}"))
    return out


def all_passages() -> list[Passage]:
    return [p for doc in SOURCE.read(None) for p in chapter_passages(doc.id, doc.text)]


def anchor_passages(n: int, seed: int = 0) -> list[Passage]:
    """n passages: seeded permutations of the pool, one after another, cut at n (n >= 1, else ConfigError)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"plain-text: n={n!r} passages asked; use an integer >= 1")
    pool = all_passages()
    rng, out = random.Random(f"plain-text:{seed}"), []
    while len(out) < n:
        order = list(range(len(pool)))
        rng.shuffle(order)
        out += [pool[i] for i in order[:n - len(out)]]
    return out
