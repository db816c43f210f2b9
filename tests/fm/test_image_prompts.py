"""Image prompts in a session (apple_fm_sdk call shapes) on the embedded model with a tiny random vision tower
(conftest's `tower`)."""

import asyncio
import io
import struct
import zlib

import pytest
from PIL import Image

import openafm.fm as fm
from openafm.checkpoint.packaged import DEFAULT_MODEL
from openafm.fm import model as fm_model
from openafm.models.image_views import DEFAULT_RESOLUTION, MAX_IMAGE_PIXELS

pytestmark = pytest.mark.real_model
NAME = DEFAULT_MODEL          # the model a session uses unless told otherwise


@fm.generable("What the image shows")
class Label:
    thing: str = fm.guide("One word", regex=r"[a-z]{1,12}")


@pytest.fixture()
def images(tmp_path):
    paths = []
    for i, colour in enumerate([(255, 0, 0), (0, 0, 255)]):
        path = tmp_path / f"img{i}.png"
        Image.new("RGB", (40, 30), colour).save(path)
        paths.append(path)
    return paths


OPTS = fm.GenerationOptions(maximum_response_tokens=6)


def test_call_shapes_prefill_image_tokens_and_record_them(tower, images):
    async def go():
        s = fm.LanguageModelSession()
        a = await s.respond(["What is this?", fm.ImageAttachment(images[0], label="red")], options=OPTS)
        first = s.last_prefill
        b = await s.respond(fm.ImageAttachment(images[1]), options=OPTS)            # an image alone
        alone = s.last_prefill
        c = await s.respond(["Compare", fm.ImageAttachment(images[0]), fm.ImageAttachment(images[1])], options=OPTS)
        several = s.last_prefill
        d = await s.respond("And in words?", options=OPTS)
        return s, (a, b, c, d), first, alone, several, s.last_prefill
    s, answers, first, alone, several, text_only = asyncio.run(go())
    assert all(isinstance(x, str) for x in answers)
    conv = s._conversation
    d = 9                                              # the default mode, rapid (DEFAULT_RESOLUTION): 9 image tokens
    assert [sp.end - sp.start for sp in conv.images] == [d, d, d, d]
    # each turn prefills only its own tokens: its images plus a few template tokens
    assert d < alone < d + 20 and 2 * d < several < 2 * d + 25 and text_only < 25
    assert d < first < d + 60                          # the default system prompt, the question, the image
    users = [e for e in s.transcript.entries if e["role"] == "user"]
    assert users[0]["contents"][0]["text"] == "What is this?"
    assert {k: users[0]["contents"][1][k] for k in ("type", "path", "label")} == \
        {"type": "image", "path": str(images[0]), "label": "red"}
    assert [c["type"] for c in users[2]["contents"]] == ["text", "image", "image"]
    assert users[3]["contents"][0]["text"] == "And in words?"


def test_images_with_generating_and_streaming(tower, images):
    async def go():
        s = fm.LanguageModelSession()
        label = await s.respond(["Name it.", fm.ImageAttachment(images[0])], generating=Label,
                                options=fm.GenerationOptions(maximum_response_tokens=24))
        snaps = [x async for x in s.stream_response(["Again:", fm.ImageAttachment(images[1])], options=OPTS)]
        return label, snaps, s
    label, snaps, s = asyncio.run(go())
    assert isinstance(label, Label) and isinstance(label.thing, str) and 1 <= len(label.thing) <= 12
    assert snaps and all(isinstance(x, str) for x in snaps)
    assert len(s._conversation.images) == 2


def test_resolution_sets_the_image_token_count(tower, images):
    assert fm.SystemLanguageModel().resolution is DEFAULT_RESOLUTION is fm.Resolution.RAPID
    for mode, tokens in (("balanced", 144), ("high", 720)):
        model = fm.SystemLanguageModel(resolution=mode)
        assert asyncio.run(model.token_count(fm.ImageAttachment(images[0]))) == tokens
        s = fm.LanguageModelSession(model=model)
        asyncio.run(s.respond(["What?", fm.ImageAttachment(images[0])], options=fm.GenerationOptions(
            maximum_response_tokens=2)))
        assert [sp.end - sp.start for sp in s._conversation.images] == [tokens]
    with pytest.raises(ValueError, match="resolution='ultra' is not one of"):
        fm.SystemLanguageModel(resolution="ultra")


def test_unreadable_images_raise_naming_file_and_reason(tower, images, tmp_path):
    bad = tmp_path / "notes.png"
    bad.write_text("not an image")
    gone = tmp_path / "gone.png"
    Image.new("RGB", (8, 8)).save(gone)
    attachment = fm.ImageAttachment(gone)
    gone.unlink()
    cut = tmp_path / "cut.png"
    whole = io.BytesIO()
    Image.new("RGB", (64, 64), (9, 99, 199)).save(whole, format="PNG")
    cut.write_bytes(whole.getvalue()[:60])
    huge = tmp_path / "huge.png"
    header = bytearray(whole.getvalue())
    header[16:24] = struct.pack(">II", 9000, 9000)                   # the size a decompression bomb claims
    header[29:33] = struct.pack(">I", zlib.crc32(bytes(header[12:29])))
    huge.write_bytes(bytes(header))
    s = fm.LanguageModelSession()
    for att, reason in ((fm.ImageAttachment(bad), "notes.png: not an image in a format Pillow can decode"),
                        (attachment, "gone.png: no such file"),
                        (fm.ImageAttachment(cut), "cut.png: unreadable or truncated image data"),
                        (fm.ImageAttachment(huge), f"huge.png: the image is 9000x9000 = 81000000 pixels; the limit "
                                                   f"is {MAX_IMAGE_PIXELS}")):
        with pytest.raises(fm.ImagePromptError, match=reason):
            asyncio.run(s.respond(["What is this?", att], options=OPTS))
    assert len(s.transcript) == 0 and s._conversation.tokens == []          # rolled back


def test_a_model_without_vision_weights_says_so(monkeypatch, images):
    monkeypatch.setitem(fm_model._TOWERS, NAME, None)
    s = fm.LanguageModelSession()
    with pytest.raises(fm.ImagePromptError, match=r"has no vision weights.*make vision-weights.*component \[1\]"):
        asyncio.run(s.respond(["What?", fm.ImageAttachment(images[0])]))
    assert s._conversation is None
