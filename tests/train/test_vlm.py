"""Stage-3 training pieces: the prefix K/V computed once gives the full forward's numbers; the joint stage's rows."""

import random

import torch

from openafm.models.vlm import IMAGE_PLACEHOLDER
from openafm.train.vision.joint import Rows
from openafm.train.vision.mix import ExampleKind
from openafm.train.vision.tasks import QA, Task, is_correct
from openafm.train.vision.vlm import PrefixKV
from tiny import make_tiny


def test_prefix_kv_forward_equals_the_full_forward():
    model = make_tiny("smollm2-tiny")
    torch.manual_seed(0)
    prefix = torch.randint(1, 500, (1, 7))
    suffix = torch.randint(1, 500, (3, 5))
    embeds = torch.randn(3, 5, model.config.dim)
    full_ids = torch.cat([prefix.expand(3, -1), suffix], 1)
    full_emb = torch.cat([model.embed(prefix).expand(3, -1, -1), embeds], 1)
    with torch.no_grad():
        ref = model(full_ids, embeds=full_emb)[:, 7:]                                  # [3, 5, V]
        store = PrefixKV(PrefixKV.capture(model, prefix), 3)
        got = model(suffix, cache=store, positions=torch.arange(7, 12).expand(3, -1), embeds=embeds)
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)


class Chars:
    eos_token_ids = (3,)

    def encode(self, text):
        return [10 + ord(c) % 100 for c in text]


def test_joint_rows_mask_image_positions_and_keep_text():
    qa = [QA(Task.NAME_EMOJI, None, "cat"), QA(Task.NAME_EMOJI, None, "dog")]
    rows = Rows(Chars(), list(range(1000)), qa, 16, random.Random(0))
    text = rows.make(ExampleKind.TEXT)
    assert len(text.ids) == 16 and text.labels == text.ids and text.images == []
    cap = rows.make(ExampleKind.CAPTION)
    (start, _), = cap.images
    assert cap.ids[start:start + 9] == [IMAGE_PLACEHOLDER] * 9 and cap.labels[start:start + 9] == [-100] * 9
    assert cap.ids[-1] == 3 and cap.labels[9:] == cap.ids[9:]
    inter = rows.make(ExampleKind.INTERLEAVED)
    assert len(inter.images) == 2 and inter.labels.count(-100) == 18


def test_exact_match():
    assert is_correct("grinning face", " Grinning face.") and not is_correct("cat", "a cat")
