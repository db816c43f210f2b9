"""OpenAI's Responses API, read as the chat completion it amounts to: one path to the engine and one grammar policy.

`responses_request` checks a `POST /v1/responses` body field by field (an unsupported one is a 400 naming it) and
turns it into chat messages, tools, tool choice and response format, which `protocol.chat_request` plans as for
`/v1/chat/completions`. What differs is only the wire:

    input (a string, or items)      messages: role items (text parts; a user's `input_image` parts, base64 data
                                    URLs read by serve.images), `function_call` items (the assistant's calls),
                                    `function_call_output` items (tool results), earlier output messages
    instructions                    a system message in front (not carried over by previous_response_id, as OpenAI)
    previous_response_id            the stored conversation of that response (its messages and its output) in front
    tools / tool_choice             function tools ({type, name, description, parameters}) / {type: function, name}
    text.format                     text, json_object, or json_schema {name, schema, strict}
    max_output_tokens               max_tokens

`ResponseStore` keeps the conversations of the last `size` responses in memory (not on disk, not across restarts);
`store: false` keeps none. The response object and its stream events are built in serve/response_items.py.
"""

from __future__ import annotations

import collections
import copy
from dataclasses import dataclass, field
from typing import Any

from openafm.checkpoint.sampling import RecommendedSampling
from openafm.serve.images import image_input
from openafm.serve.protocol import Plan, RequestError, chat_request, check_fields, need

RESPONSE_FIELDS = {"model", "input", "instructions", "tools", "tool_choice", "text", "max_output_tokens",
                   "temperature", "top_p", "stream", "previous_response_id", "store", "metadata", "user", "truncation"}
INPUT_ROLES = ("user", "system", "developer", "assistant")
STORE_SIZE = 256


@dataclass
class ResponseRequest:
    """A planned Responses request: the chat plan and what the response object echoes back."""
    plan: Plan
    messages: list[dict]                 # the conversation sent (without the instructions), for the store
    echo: dict                           # instructions, tools, tool_choice, text, sampling, metadata, ...
    store: bool = True
    previous: str | None = None


@dataclass
class ResponseStore:
    """The conversations of recent responses, by id (least recently used dropped beyond `size`)."""
    size: int = STORE_SIZE
    _items: collections.OrderedDict[str, list[dict]] = field(default_factory=collections.OrderedDict)

    def put(self, rid: str, messages: list[dict]) -> None:
        self._items[rid] = messages
        self._items.move_to_end(rid)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def get(self, rid: str) -> list[dict]:
        if rid not in self._items:
            raise RequestError(f"previous_response_id {rid!r} is not stored here: this server keeps the last "
                               f"{self.size} responses made with store=true, in memory", "previous_response_id",
                               status=404, code="previous_response_not_found")
        self._items.move_to_end(rid)
        return copy.deepcopy(self._items[rid])


def responses_request(body: Any, store: ResponseStore, *, tokenizer, model: str, context: int, vision=None,
                      recommended: RecommendedSampling | None = None) -> ResponseRequest:
    """vision, recommended: as for protocol.chat_request (the served model's vision tower; the sampling a request
    that sets none gets). The response echoes the temperature and top_p applied."""
    check_fields(body, RESPONSE_FIELDS)
    need(body.get("truncation") in (None, "disabled"), "truncation must be 'disabled' (this server never drops "
         "input to fit; a request over the context is a 400)", "truncation")
    keep = body.get("store", True)
    need(isinstance(keep, bool), "store must be true or false", "store")
    previous = body.get("previous_response_id")
    need(previous is None or isinstance(previous, str), "previous_response_id must be a string", "previous_response_id")
    messages = (store.get(previous) if previous is not None else []) + _input(body.get("input"))
    instructions = body.get("instructions")
    need(instructions is None or isinstance(instructions, str), "instructions must be a string", "instructions")
    metadata = body.get("metadata") or {}
    need(isinstance(metadata, dict) and len(metadata) <= 16 and all(isinstance(k, str) and isinstance(v, str)
                                                                   for k, v in metadata.items()),
         "metadata must be an object of at most 16 string values", "metadata")
    chat = {"model": body.get("model"), "messages": ([{"role": "system", "content": instructions}] if instructions
                                                     else []) + messages}
    for key, value in (("tools", _tools(body.get("tools"))), ("tool_choice", _tool_choice(body.get("tool_choice"))),
                       ("response_format", _format(body.get("text"))), ("max_tokens", body.get("max_output_tokens")),
                       ("temperature", body.get("temperature")), ("top_p", body.get("top_p")),
                       ("stream", body.get("stream")), ("user", body.get("user"))):
        if value is not None:
            chat[key] = value
    try:
        plan = chat_request(chat, tokenizer=tokenizer, model=model, context=context, vision=vision,
                            recommended=recommended)
    except RequestError as e:
        e.param = _responses_param(e.param)
        e.message = e.message.replace("max_tokens", "max_output_tokens").replace("response_format", "text.format")
        raise
    applied = plan.sampling[0]
    echo = {"instructions": instructions, "tools": body.get("tools") or [], "tool_choice": body.get("tool_choice",
            "auto"), "text": body.get("text") or {"format": {"type": "text"}}, "temperature": applied.temperature,
            "top_p": 1.0 if applied.top_p is None else applied.top_p,
            "max_output_tokens": body.get("max_output_tokens"), "metadata": metadata, "user": body.get("user")}
    return ResponseRequest(plan, messages, echo, keep, previous)


def _input(value: Any) -> list[dict]:
    """The input items as chat messages (consecutive function_call items become one assistant message)."""
    if isinstance(value, str):
        need(bool(value), "input must be a non-empty string or a list of items", "input")
        return [{"role": "user", "content": value}]
    need(isinstance(value, list) and len(value) > 0, "input must be a non-empty string or a list of items", "input")
    out: list[dict] = []
    for i, item in enumerate(value):
        where = f"input[{i}]"
        need(isinstance(item, dict), f"{where} must be an object", where)
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            need(role in INPUT_ROLES, f"{where}.role={role!r} is not one of {list(INPUT_ROLES)}", f"{where}.role")
            out.append({"role": role, "content": _content(item.get("content"), f"{where}.content", role)})
        elif kind == "function_call":
            for key in ("call_id", "name", "arguments"):
                need(isinstance(item.get(key), str) and bool(item[key]), f"{where}.{key} must be a non-empty string",
                     f"{where}.{key}")
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": item["arguments"]}}
            if out and out[-1]["role"] == "assistant" and out[-1].get("tool_calls"):
                out[-1]["tool_calls"].append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            need(isinstance(item.get("call_id"), str), f"{where}.call_id must be a string", f"{where}.call_id")
            need(isinstance(item.get("output"), str), f"{where}.output must be a string (the tool's result)",
                 f"{where}.output")
            out.append({"role": "tool", "tool_call_id": item["call_id"], "content": item["output"]})
        else:
            raise RequestError(f"{where}.type={kind!r} is not supported by this server (message, function_call and "
                               f"function_call_output are)", f"{where}.type")
    return out


def _content(content: Any, where: str, role: str) -> str | list:
    """A message's content: a string, or parts (input_text from users, output_text from earlier replies, a user's
    input_image): their text joined, or with images, text parts and the images read (ImageInput) for chat_request."""
    if isinstance(content, str):
        return content
    need(isinstance(content, list) and len(content) > 0, f"{where} must be a string or a list of parts", where)
    parts: list = []
    for j, part in enumerate(content):
        at = f"{where}[{j}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "input_image":
            need(role == "user", f"{at}: images are accepted in user messages only", at)
            for key in part:
                need(key in ("type", "image_url", "detail", "file_id"), f"{at}.{key} is not supported by this server",
                     f"{at}.{key}")
            need(part.get("file_id") is None, f"{at}.file_id is not supported by this server (it has no Files API): "
                 f"send image_url as a base64 data URL", f"{at}.file_id")
            parts.append(image_input(part.get("image_url"), part.get("detail"), f"{at}.image_url", f"{at}.detail"))
            continue
        if kind in ("input_file", "input_audio"):
            raise RequestError(f"{at}: {kind} is not supported by this server (text and image parts only)", at)
        need(kind in ("input_text", "output_text") and isinstance(part.get("text"), str),
             f"{at} must be {{'type': 'input_text', 'text': ...}} or {{'type': 'input_image', 'image_url': "
             f"'data:image/png;base64,...'}}", at)
        if parts and isinstance(parts[-1], str):
            parts[-1] += part["text"]
        else:
            parts.append(part["text"])
    if all(isinstance(p, str) for p in parts):
        return "".join(parts)
    return [{"type": "text", "text": p} if isinstance(p, str) else p for p in parts]


def _tools(value: Any) -> list[dict] | None:
    if value is None:
        return None
    need(isinstance(value, list), "tools must be a list", "tools")
    out = []
    for i, t in enumerate(value):
        kind = t.get("type") if isinstance(t, dict) else None
        need(kind == "function", f"tools[{i}].type={kind!r} is not supported by this server (function tools only)",
             f"tools[{i}].type")
        out.append({"type": "function", "function": {k: t[k] for k in ("name", "description", "parameters")
                                                      if k in t}})
    return out or None


def _tool_choice(value: Any) -> Any:
    if isinstance(value, dict):
        need(value.get("type") == "function" and isinstance(value.get("name"), str),
             f"tool_choice={value!r} must be 'auto', 'none', 'required' or {{'type': 'function', 'name': ...}}",
             "tool_choice")
        return {"type": "function", "function": {"name": value["name"]}}
    return value


def _format(text: Any) -> dict | None:
    if text is None:
        return None
    need(isinstance(text, dict) and set(text) <= {"format", "verbosity"}, "text must be {'format': {...}}", "text")
    need(text.get("verbosity") in (None, "medium"), "text.verbosity is not supported by this server (only 'medium')",
         "text.verbosity")
    fmt = text.get("format") or {"type": "text"}
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    need(kind == "json_schema", f"text.format.type={kind!r} is not one of 'text', 'json_object', 'json_schema'",
         "text.format.type")
    spec = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
    return {"type": "json_schema", "json_schema": spec}


def _responses_param(param: str | None) -> str | None:
    """A chat-completions parameter name, as the Responses API calls it."""
    if param is None:
        return None
    for chat, responses in (("response_format.json_schema", "text.format"), ("response_format", "text.format"),
                            ("max_tokens", "max_output_tokens"), ("messages", "input")):
        if param.startswith(chat):
            return responses + param[len(chat):] if chat != "messages" else "input"
    return param.replace(".function.", ".")
