"""The plain-text anchor: the Developer's Reference's markup removed, passages cut at paragraphs, drawn by count,
and trained as text (every token with a loss) beside conversations in one loader."""

from __future__ import annotations

import collections
import math

import pytest

from openafm.data.conversations import Conversation
from openafm.data.passages import PASSAGE_CHARS, Passage, all_passages, anchor_passages, chapter_passages
from openafm.data.sources import get_source
from openafm.data.sources.developers_reference import rst_prose
from openafm.errors import ConfigError
from openafm.pipelines.sft_data import check_sizes
from openafm.train.adapter_toolkit import ConversationLoader, passage_tokens

RST = """.. _uploading:

Uploading a package
================================================================================

Before you upload, read :ref:`sanitycheck` and the ``debian/changelog`` file
of `the project <https://example.org/x>`__, as *every* maintainer **must**.

It is conventional that the entry looks like this:

::

     * New upstream release.

-  It lets people know who works on
   the package.
-  It is helpful.

.. note::

   An admonition the prose leaves out.

+------+-----+
| a    | b   |
+======+=====+

Short.
"""


def test_rst_prose_keeps_the_paragraphs_and_drops_the_markup():
    assert rst_prose(RST).split("\n\n") == [
        "Before you upload, read sanitycheck and the debian/changelog file of the project, as every maintainer must.",
        "It is conventional that the entry looks like this:",
        "- It lets people know who works on the package.\n- It is helpful."]


def test_the_source_reads_every_chapter_but_the_index():
    docs = list(get_source("developers-reference").read(None))
    assert len(docs) == 9 and all(d.id.endswith(".rst.txt") and "index" not in d.id for d in docs)
    lines = [ln for d in docs for ln in d.text.split("\n")]
    assert not [ln for ln in lines if "``" in ln or ln.startswith(("..", "+-", "|", " ")) or "=====" in ln]


def test_passages_are_whole_paragraphs_of_at_least_the_set_size():
    text = "\n\n".join(f"Paragraph {i} " + "word " * 60 for i in range(20))       # ~370 characters each
    parts = chapter_passages("doc", text)
    assert "\n\n".join(p.text for p in parts) == text
    assert all(len(p.text) >= PASSAGE_CHARS for p in parts[:-1]) and [p.where for p in parts][:2] == ["doc#0", "doc#1"]


def test_anchor_passages_repeat_the_pool_evenly_past_its_size_and_are_seeded():
    pool = len(all_passages())
    n = 2 * pool + 7
    drawn = anchor_passages(n, seed=3)
    counts = collections.Counter(p.where for p in drawn)
    assert len(drawn) == n and len(counts) == pool and max(counts.values()) == math.ceil(n / pool)
    assert drawn == anchor_passages(n, seed=3) and drawn != anchor_passages(n, seed=4)
    assert len({p.where for p in anchor_passages(pool, seed=0)}) == pool          # one whole pass: each once
    with pytest.raises(ConfigError, match="n=0"):
        anchor_passages(0)
    check_sizes({"plain-text": 800}, ["plain-text"], "stage sft")


def test_a_passage_trains_on_every_token_beside_a_conversation(tokenizer):
    conv = Conversation(({"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello there."}))
    passage = Passage("Plain prose with no chat template around it.", "here")
    piece = passage_tokens(tokenizer, passage)
    assert piece.ids == tokenizer.encode(passage.text) and piece.start == 0
    loader = ConversationLoader([conv, passage], tokenizer, seq_len=128, global_batch=1, order="in-order")
    batch = loader.next_batch()
    labels, ids = batch.labels[0].tolist(), batch.input_ids[0].tolist()
    conv_len = len(loader.piece(conv).ids)
    text = slice(conv_len, conv_len + len(piece.ids) - 1)
    assert labels[text] == ids[conv_len + 1:conv_len + len(piece.ids)]      # every next token of the passage
    assert labels[conv_len + len(piece.ids) - 1] == -100                     # none past its end
    assert labels[0] == -100                                                 # the conversation's prompt has none
