"""Image spans in a Conversation: prefilled as embeddings through the KV cache, equal to a cache-free forward."""

import torch

from openafm.models.decoder import Logits
from openafm.models.vlm import IMAGE_PLACEHOLDER, ImageSpan, image_marker, splice, split_markers
from openafm.runtime.conversation import Conversation
from tiny import make_tiny


class Chars:
    """A toy tokenizer: one token per character (ids 1..), no EOS."""
    eos_token_ids = ()

    def encode(self, text):
        return [1 + (ord(c) % 200) for c in text]

    def decode(self, ids, skip_special_tokens=False):
        return "".join(chr(i - 1) for i in ids)


def test_split_markers_round_trip():
    text = "look " + image_marker(0) + " and " + image_marker(12) + "!"
    assert split_markers(text) == ["look ", 0, " and ", 12, "!"]
    assert split_markers("plain") == ["plain"]


def test_splice_replaces_exactly_the_span():
    emb = torch.nn.Embedding(10, 4)
    ids = torch.tensor([[1, 2, 0, 0, 3]])
    img = torch.randn(2, 4)
    x = splice(emb, ids, [ImageSpan(row=0, start=2, embeds=img)])
    torch.testing.assert_close(x[0, 2:4], img)
    torch.testing.assert_close(x[0, [0, 1, 4]], emb(ids)[0, [0, 1, 4]])


def test_image_turns_prefill_through_the_cache_like_a_full_forward():
    model = make_tiny("smollm2-tiny")
    dim = model.config.dim
    conv = Conversation(model, Chars())
    torch.manual_seed(0)
    img1, img2 = torch.randn(5, dim), torch.randn(3, dim)
    conv.append_text("user: look ")
    conv.append_image(img1, image_marker(0))
    conv.append_text(" now\nassistant:")
    out = conv.generate(max_new_tokens=3)
    assert conv.last_turn.prefilled_tokens == 11 + 5 + 15
    # a second turn with another image prefills only its own tokens
    before = len(conv.tokens)
    conv.append_text(" and ")
    conv.append_image(img2, image_marker(1))
    conv.append_text("?")
    second = conv.generate(max_new_tokens=3)
    assert conv.last_turn.cached_tokens == before - 1                 # all but the last generated token
    assert conv.last_turn.prefilled_tokens == before - conv.last_turn.cached_tokens + 5 + 3 + 1
    # reference: one cache-free forward over the whole sequence with both images spliced in
    prompt = conv.tokens[:len(conv.tokens) - len(second.token_ids)]
    ids = torch.tensor([prompt])
    spans = [ImageSpan(0, 11, img1), ImageSpan(0, before + 5, img2)]
    assert prompt[11:16] == [IMAGE_PLACEHOLDER] * 5
    with torch.no_grad():
        ref = model(ids, embeds=splice(model.embed, ids, spans), logits=Logits.LAST)[0, -1]
    assert int(ref.argmax()) == second.token_ids[0]
    # and the generated continuation equals greedy decoding of the reference
    with torch.no_grad():
        seq = prompt[:]
        for _ in range(len(second.token_ids)):
            ids = torch.tensor([seq])
            seq.append(int(model(ids, embeds=splice(model.embed, ids, spans), logits=Logits.LAST)[0, -1].argmax()))
    assert seq[len(prompt):] == second.token_ids
    del out


def test_rollback_forgets_images_after_the_mark():
    model = make_tiny("smollm2-tiny")
    conv = Conversation(model, Chars())
    conv.append_text("a")
    mark = conv.mark()
    conv.append_image(torch.zeros(4, model.config.dim), image_marker(0))
    conv.rollback(mark)
    assert conv.images == [] and conv.tokens == [Chars().encode("a")[0]]
