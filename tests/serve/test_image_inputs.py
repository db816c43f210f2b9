"""Image prompts through `openafm serve`: OpenAI `image_url` parts (base64 data URLs) and the Responses API's
`input_image`, read by the default model's vision tower (conftest's tiny random `tower`), against a live server
with the official `openai` client. Every bad image is a 400 naming its field and the problem."""

from __future__ import annotations

import base64
import io
import struct
import zlib

import httpx
import openai
import pytest
from live_server import live_server
from PIL import Image

import openafm
from openafm.checkpoint.packaged import DEFAULT_MODEL
from openafm.fm import model as fm_model
from openafm.models.image_views import MAX_IMAGE_BYTES, MAX_IMAGE_PIXELS
from openafm.models.vlm import IMAGE_PLACEHOLDER, image_marker, split_markers
from openafm.runtime.engine import EngineConfig
from openafm.serve.protocol import chat_request

pytestmark = pytest.mark.real_model
MODEL = DEFAULT_MODEL
QUESTION = "What is in this picture?"


@pytest.fixture(scope="module")
def lm():
    return openafm.load()


@pytest.fixture(scope="module")
def server(lm):
    with live_server(lm, EngineConfig(max_batch=4, max_queue=16), max_body=32 << 20) as (url, served):
        yield url, served


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server[0] + "/v1", api_key="unused", max_retries=0, timeout=120)


def png(colour: tuple[int, int, int], size: tuple[int, int] = (40, 30), fmt: str = "PNG") -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, fmt)
    return buf.getvalue()


def data_url(data: bytes, media: str = "image/png") -> str:
    return f"data:{media};base64,{base64.b64encode(data).decode()}"


RED, BLUE = data_url(png((255, 0, 0))), data_url(png((0, 0, 255)))


def image(url: str, detail: str | None = None) -> dict:
    return {"type": "image_url", "image_url": {"url": url, **({"detail": detail} if detail is not None else {})}}


def ask(client, content, **kw):
    return client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": content}],
                                          temperature=0, **kw)


def prompt_tokens(lm, content: str, per_image: int) -> int:
    """The prompt tokens of one user message whose text holds image markers: its text pieces, each image `per_image`."""
    text = lm.tokenizer.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True)
    return sum(len(lm.tokenizer.encode(p)) if isinstance(p, str) else per_image for p in split_markers(text))


def test_an_image_is_answered_and_costs_the_tokens_of_its_mode(client, lm, tower):
    counted = {}
    for detail, tokens in ((None, 9), ("auto", 9), ("low", 9), ("balanced", 144), ("high", 720)):  # none, auto: rapid
        r = ask(client, [{"type": "text", "text": QUESTION}, image(RED, detail)], max_tokens=4)
        if detail != "high":            # 720 tokens of this random tower make the model end at once (fm does too)
            assert r.choices[0].message.content and r.usage.completion_tokens >= 1
        assert r.usage.prompt_tokens == prompt_tokens(lm, QUESTION + "\n" + image_marker(0), tokens)
        counted[detail] = r.usage.prompt_tokens
    assert counted[None] == counted["auto"] == counted["low"] and counted["high"] - counted[None] == 720 - 9
    assert counted["balanced"] - counted[None] == 144 - 9
    two = ask(client, [image(RED), {"type": "text", "text": QUESTION}], max_tokens=4, n=2)     # one prefill, 2 rows
    assert two.choices[0].message.content == two.choices[1].message.content                 # greedy: the same


def test_a_streamed_image_answer_equals_the_whole_one(client, tower):
    content = [{"type": "text", "text": QUESTION}, image(BLUE)]
    whole = ask(client, content, max_tokens=6)
    chunks = list(ask(client, content, max_tokens=6, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content and text
    assert chunks[-1].usage.prompt_tokens == whole.usage.prompt_tokens


def test_the_image_is_read_and_no_cache_is_shared_across_images(client, server, tower):
    def first_logprobs(url):
        r = ask(client, [{"type": "text", "text": QUESTION}, image(url)], max_tokens=1, logprobs=True,
                top_logprobs=5, extra_body={"openafm_profile": True})
        assert r.model_extra["openafm"]["cached_prompt_tokens"] == 0
        return [(t.token, t.logprob) for t in r.choices[0].logprobs.content[0].top_logprobs]
    red, blue, red_again = first_logprobs(RED), first_logprobs(BLUE), first_logprobs(RED)
    assert red != blue                             # the same text, another image: other logits
    assert red_again == red                        # the blue image's K/V did not leak into the red one's prompt
    remembered = server[1].default.engine.prefixes._entries
    assert remembered and all(IMAGE_PLACEHOLDER not in key for key in remembered)     # image rows bypass it


def test_parts_keep_their_order_in_the_prompt(lm, tower):
    body = {"model": MODEL, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "before"}, image(RED, "low"), {"type": "text", "text": "after"},
        image(BLUE, "high")]}]}
    plan = chat_request(body, tokenizer=lm.tokenizer, model=MODEL, context=2048, vision=lambda: tower)
    assert f"before\n{image_marker(0)}\nafter\n{image_marker(1)}" in plan.prompt_text
    assert [(i.mode.value, i.where) for i in plan.images] == [
        ("rapid", "messages[0].content[1].image_url.url"), ("high", "messages[0].content[3].image_url.url")]
    assert plan.prompt.count(IMAGE_PLACEHOLDER) == 9 + 720


def bomb(side: int) -> bytes:
    """A tiny PNG whose header says side x side pixels (a decompression bomb's shape; never decoded here)."""
    data = bytearray(png((0, 0, 0), (8, 8)))
    data[16:24] = struct.pack(">II", side, side)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))
    return bytes(data)


URL = "messages[0].content[1].image_url.url"
BAD = [
    ("https://example.com/cat.png", URL, "cannot fetch URLs.*base64 data URL"),
    ("cat.png", URL, "not a data URL"),
    ("data:image/png,abcd", URL, "not base64-encoded"),
    ("data:image/png;base64,@@not base64@@", URL, "bad base64"),
    (data_url(png((1, 2, 3), fmt="BMP"), "image/bmp"), URL, r"media type 'image/bmp' is not accepted.*image/webp"),
    (data_url(bytes(MAX_IMAGE_BYTES + 1)), URL, f"the limit is {MAX_IMAGE_BYTES} bytes \\(20 MB\\)"),
    (data_url(b"these are not image bytes"), URL, "not an image in a format Pillow can decode"),
    (data_url(png((9, 9, 9), (64, 64))[:60]), URL, "unreadable or truncated"),
    (data_url(bomb(8000)), URL, f"8000x8000 = 64000000 pixels; the limit is {MAX_IMAGE_PIXELS}"),
]


@pytest.mark.parametrize("url, param, message", BAD, ids=["http", "not-data", "not-base64", "bad-base64", "bmp",
                                                           "too-big", "not-image", "truncated", "bomb"])
@pytest.mark.parametrize("stream", [False, True])
def test_each_bad_image_is_a_400_naming_its_field(client, tower, url, param, message, stream):
    with pytest.raises(openai.BadRequestError, match=message) as e:
        ask(client, [{"type": "text", "text": QUESTION}, image(url)], max_tokens=2, stream=stream)
    assert e.value.status_code == 400 and e.value.body["param"] == param


@pytest.mark.parametrize("message, param, error", [
    ({"role": "user", "content": [image(RED, "medium")]}, "messages[0].content[0].image_url.detail",
     r"detail='medium' is not one of \['auto', 'balanced', 'high', 'low'\]"),
    ({"role": "user", "content": [{"type": "image_url", "image_url": RED}]}, "messages[0].content[0].image_url",
     "must be an object"),
    ({"role": "system", "content": [image(RED)]}, "messages[0].content[0]", "user messages only"),
    ({"role": "user", "content": [image(RED), {"type": "text", "text": image_marker(3)}]}, "messages",
     "reserves for images"),
])
def test_bad_image_parts_are_400s(client, tower, message, param, error):
    with pytest.raises(openai.BadRequestError, match=error) as e:
        client.chat.completions.create(model=MODEL, messages=[message], max_tokens=2)
    assert e.value.body["param"] == param


def test_a_model_without_a_vision_tower_says_what_to_run(client, monkeypatch):
    monkeypatch.setitem(fm_model._TOWERS, MODEL, None)
    with pytest.raises(openai.BadRequestError, match="has no vision weights.*make vision-weights") as e:
        ask(client, [{"type": "text", "text": QUESTION}, image(RED)], max_tokens=2)
    assert e.value.body["param"] == URL


def test_responses_api_input_image(client, lm, tower, server):
    content = [{"type": "input_text", "text": QUESTION}, {"type": "input_image", "image_url": RED, "detail": "low"}]
    first = client.responses.create(model=MODEL, input=[{"role": "user", "content": content}], max_output_tokens=4,
                                    temperature=0)
    assert first.status in ("completed", "incomplete") and first.output_text
    assert first.usage.input_tokens == prompt_tokens(lm, QUESTION + "\n" + image_marker(0), 9)
    later = client.responses.create(model=MODEL, previous_response_id=first.id, input="And its colour?",
                                    max_output_tokens=2, temperature=0)
    assert later.usage.input_tokens > first.usage.input_tokens + 9            # the stored turn brings its image
    remote = {"type": "input_image", "image_url": "http://x/y.png"}
    bad = {"model": MODEL, "input": [{"role": "user", "content": [remote]}]}
    r = httpx.post(server[0] + "/v1/responses", json=bad, timeout=60)
    assert r.status_code == 400 and r.json()["error"]["param"] == "input[0].content[0].image_url"
    assert "cannot fetch URLs" in r.json()["error"]["message"]
    metrics = httpx.get(server[0] + "/metrics", timeout=60).text
    assert 'status="500"' not in metrics
