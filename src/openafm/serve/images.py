"""Images in a request: OpenAI's image content parts read into `ImageInput`s, and the prefill their rows continue.

A chat message's `{"type": "image_url", "image_url": {"url": "data:image/png;base64,...", "detail": "auto"}}` (or
the Responses API's `{"type": "input_image", "image_url": "data:...", "detail": ...}`) is read by `image_input`:
base64 data URLs only (the server fetches nothing), checked by `models.image_views.data_url_bytes` (media type,
base64, at most MAX_IMAGE_BYTES); `detail` picks the resolution mode (low: rapid, high: high, auto or absent:
the server's default, balanced). Where the part was, the message's text holds an image marker
(`models.vlm.image_marker`, as fm prompts do), and `image_prompt` makes the prompt's token ids: each text piece
encoded, each image as the placeholder tokens of its mode, counted by the model's vision tower (a model without
one is a 400 with fm's message, which says what to run).

Before the rows are submitted, `prefill` (in a worker thread) decodes each image (bytes Pillow cannot decode, or an
image over MAX_IMAGE_PIXELS, are a 400 naming the field), runs it through the vision tower and prefills the prompt up
to the end of its last image through a runtime `Conversation`, as fm sessions do. Each choice's row continues that
single-row cache (`RowRequest.cache`) and feeds only the text after the images. Such rows bypass the engine's
prefix cache (it neither serves nor remembers a request that brings a cache), so two images behind the same text
never share K/V.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch

from openafm.fm.errors import ImagePromptError
from openafm.models.image_views import DEFAULT_RESOLUTION, ImageLoadError, Resolution, data_url_bytes, decode_image
from openafm.models.vlm import IMAGE_PLACEHOLDER, image_marker, split_markers
from openafm.runtime.conversation import Conversation
from openafm.runtime.kv_cache import KVCache
from openafm.serve.errors import RequestError, need

# OpenAI's detail -> mode; "balanced" is openafm's extension (OpenAI's three values reach only two of the three modes)
DETAIL = {"auto": DEFAULT_RESOLUTION, "low": Resolution.RAPID, "high": Resolution.HIGH,
          "balanced": Resolution.BALANCED}
IMAGE_URL_FIELDS = ("url", "detail")
CODE = "invalid_image"


@dataclasses.dataclass(frozen=True)
class ImageInput:
    """One image of a request: its bytes (checked, not yet decoded), its resolution mode, and the field it came
    from (errors name it)."""
    data: bytes = dataclasses.field(repr=False)
    mode: Resolution
    where: str


def image_input(url: Any, detail: Any, where: str, detail_where: str) -> ImageInput:
    """An image part's URL (at `where`) and detail (at `detail_where`), checked: each problem a 400 naming the field."""
    need(isinstance(url, str) and bool(url), f"{where} must be a data URL string (data:image/png;base64,...)", where)
    if url.split(":", 1)[0].strip().lower() in ("http", "https"):
        raise RequestError(f"{where}: this server cannot fetch URLs (it has no network access); send the image as a "
                           f"base64 data URL (data:image/png;base64,...)", where, code=CODE)
    need(detail is None or (isinstance(detail, str) and detail in DETAIL),
         f"{detail_where}={detail!r} is not one of {sorted(DETAIL)} (low: the rapid mode, high: the high mode, "
         f"balanced: the balanced mode, auto: {DEFAULT_RESOLUTION.value})", detail_where)
    try:
        data = data_url_bytes(url)
    except ImageLoadError as e:
        raise RequestError(f"{where}: {e.reason}", where, code=CODE) from None
    return ImageInput(data, DETAIL[detail or "auto"], where)


def chat_image(part: dict, where: str) -> ImageInput:
    """A chat content part `{"type": "image_url", "image_url": {"url": ..., "detail": ...}}` at `where`."""
    for key in part:
        need(key in ("type", "image_url"), f"{where}.{key} is not supported by this server", f"{where}.{key}")
    spec = part.get("image_url")
    need(isinstance(spec, dict), f"{where}.image_url must be an object: {{'url': 'data:image/png;base64,...', "
                                 f"'detail': 'auto'}}", f"{where}.image_url")
    for key in spec:
        need(key in IMAGE_URL_FIELDS, f"{where}.image_url.{key} is not supported by this server (only "
                                      f"{list(IMAGE_URL_FIELDS)})", f"{where}.image_url.{key}")
    return image_input(spec.get("url"), spec.get("detail"), f"{where}.image_url.url", f"{where}.image_url.detail")


def image_prompt(tokenizer, text: str, images: list[ImageInput], vision: Callable[[], Any] | None
                 ) -> tuple[list[int], Any]:
    """-> (the prompt's token ids, each image as its mode's placeholder tokens; the vision tower that reads them).
    `text` is the rendered chat template, holding image i's marker where its part was."""
    need(vision is not None, "this server reads no images", images[0].where)
    try:
        tower = vision()
    except ImagePromptError as e:
        raise RequestError(str(e), images[0].where, code="model_not_vision") from None
    pieces = split_markers(text)
    need([p for p in pieces if isinstance(p, int)] == list(range(len(images))),
         "the messages' text holds image markers (U+E000 'image N' U+E001), characters this server reserves for "
         "images: remove them", "messages")
    ids: list[int] = []
    for p in pieces:
        ids += tokenizer.encode(p) if isinstance(p, str) else [IMAGE_PLACEHOLDER] * tower.tokens(images[p].mode)
    return ids, tower


@dataclasses.dataclass
class ImagePrefix:
    """A prompt prefilled through its last image: what the rows still feed, and the caches they continue."""
    prompt: list[int]                  # the tokens after the last image (the chat template's turn end at least)
    caches: list[KVCache]              # per choice, the K/V of every token before them (images as their embeddings)
    history: tuple[int, ...]           # those tokens' ids (image positions as placeholders)


def prefill(engine, text: str, images: list[ImageInput], tower, n: int = 1) -> ImagePrefix:
    """In a worker thread: each image decoded and embedded by the tower, and the prompt (`text` with its markers)
    run through the engine's model up to the end of its last image, as a session's turn does; one copy of that
    cache per choice of `n` (a row continuing a cache may write into it)."""
    embeds = []
    for image in images:
        try:
            pixels = decode_image(image.data)
        except ImageLoadError as e:
            raise RequestError(f"{image.where}: {e.reason}", image.where, code=CODE) from None
        with torch.inference_mode():
            embeds.append(tower.embed_image(pixels, image.mode))
    conv = Conversation(engine.model, engine.tokenizer, engine=engine)
    for piece in split_markers(text):
        if isinstance(piece, str):
            conv.append_text(piece)
        else:
            conv.append_image(embeds[piece], image_marker(piece))
    conv.prefill_images()
    caches = [conv.cache] + [conv.cache.copy() for _ in range(n - 1)]
    return ImagePrefix(conv.tokens[conv.cached:], caches, tuple(conv.tokens[:conv.cached]))
