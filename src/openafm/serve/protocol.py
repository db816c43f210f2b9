"""The OpenAI request bodies, read strictly: every field is checked, every unsupported one is a 400 naming it.

`chat_request` and `completion_request` turn a parsed JSON body into a `Plan`: the prompt token ids, the
per-choice sampling parameters, stop strings, the grammar each choice decodes under (a fresh one per choice:
a grammar is stateful), log-prob counts and the stream options. Nothing is silently ignored: a parameter
whose only accepted value is the default (`frequency_penalty: 0`, `echo: false`, `parallel_tool_calls: true`)
is accepted at that value and a 400 otherwise.

Structured outputs: `response_format` json_schema (strict or not: the grammar always enforces the whole schema)
goes through `fm.GenerationSchema.from_json_schema` (a keyword the engine cannot enforce is a 400 naming it),
the framework's `StructuredDecoding` remedies, and the schema is added to the last user turn as the framework's
sessions do; json_object is any JSON object. Tools follow the framework's constrained tool calling
(`fm.tool`): described in the system prompt, and the grammar admits only registered names with valid arguments.
Every grammar comes from fm's one policy (`fm.constraint.constraint_for`), so a chat completion decodes under the
grammar a session builds for the same tools, tool choice and schema; with tools and a response_format together,
the reply is a tool call or the schema's JSON.

Sampling: a field the request gives is used as given; one it leaves unset takes the served model's recommended
sampling (checkpoint/sampling.py: its generation_config.json, GGUF keys or bundle sidecar), field by field as vLLM
applies a generation config, and OpenAI's defaults (temperature 1, no cut) only where the model recommends nothing or
the server runs with `--default-sampling openai`. A tiny model sampled at temperature 1 with no cut writes word salad
(docs/results/default_sampling.json), which is what an `openai` client that sets nothing used to get.

Images: a user message's `image_url` parts (base64 data URLs, `detail` low / high / auto) are read by serve.images;
the message's text holds an image marker where each was, the prompt's ids hold its mode's placeholder tokens, and
the plan carries the images and the vision tower for the engine front to prefill.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any, Callable

from openafm.checkpoint.sampling import RecommendedSampling
from openafm.fm.constraint import constraint_for
from openafm.fm.errors import FoundationModelsError
from openafm.fm.schema import GenerationSchema
from openafm.fm.structured import StructuredDecoding, prompt_with_schema
from openafm.fm.tool import CALL_CLOSE, CALL_OPEN, Tool, tools_prompt
from openafm.models.vlm import image_marker
from openafm.runtime.constrained import GrammarError
from openafm.runtime.sampling import SamplingParams
from openafm.serve.errors import RequestError, need
from openafm.serve.images import ImageInput, chat_image, image_prompt

MAX_N = 8
MAX_STOPS = 4
MAX_TOP_LOGPROBS = 20
CHAT_FIELDS = {"model", "messages", "max_tokens", "max_completion_tokens", "n", "stop", "seed", "stream",
               "stream_options", "temperature", "top_p", "logprobs", "top_logprobs", "response_format", "tools",
               "tool_choice", "user", "openafm_profile"}
COMPLETION_FIELDS = {"model", "prompt", "max_tokens", "n", "stop", "seed", "stream", "stream_options", "temperature",
                     "top_p", "logprobs", "user", "openafm_profile"}
# Accepted only at the value that means "off" (the OpenAI default); anything else is a 400 naming the field.
DEFAULT_ONLY = {"frequency_penalty": 0, "presence_penalty": 0, "logit_bias": {}, "parallel_tool_calls": True,
                "echo": False, "best_of": 1, "store": False, "suffix": None, "service_tier": "auto"}
ROLES = {"system", "developer", "user", "assistant", "tool"}
OPENAI_SAMPLING = RecommendedSampling(temperature=1.0, source="OpenAI's default")   # for a model that recommends none


class _RequestTool(Tool):
    """An OpenAI function tool as an fm Tool: its schema and name drive the prompt and the grammar."""

    def __init__(self, name: str, description: str, schema: GenerationSchema):
        self.name, self.description, self._schema = name, description, schema
        super().__init__()

    @property
    def arguments_schema(self) -> GenerationSchema:
        return self._schema

    async def call(self, args):                         # the client runs its tools; the server never calls them
        raise NotImplementedError


@dataclasses.dataclass
class Plan:
    kind: str                                   # "chat" or "text"
    model: str
    prompt: list[int]
    prompt_text: str
    n: int
    max_tokens: int
    sampling: list[SamplingParams]              # one per choice
    stop: tuple[str, ...]
    constraint: Callable[[], object] | None     # a fresh grammar per choice, or None
    logprobs: int | None                        # None, or how many top log-probs (0: the chosen token's only)
    stream: bool
    include_usage: bool
    profile: bool
    tools: list[Tool] = dataclasses.field(default_factory=list)
    structured: bool = False
    images: list[ImageInput] = dataclasses.field(default_factory=list)    # image i is marker i of prompt_text
    tower: object | None = None                 # the vision tower that reads them (with images only)


def _int(body: dict, name: str, lo: int, hi: int | None = None) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    need(isinstance(value, int) and not isinstance(value, bool) and value >= lo and (hi is None or value <= hi),
          f"{name}={value!r} is invalid: use an integer {f'in [{lo}, {hi}]' if hi is not None else f'>= {lo}'}",
          name)
    return value


def _number(body: dict, name: str, lo: float, hi: float, *, open_low: bool = False) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and (value > lo if open_low else value >= lo)
    need(ok and value <= hi, f"{name}={value!r} is invalid: use a number in {'(' if open_low else '['}{lo}, {hi}]",
          name)
    return float(value)


def check_fields(body: Any, allowed: set[str]) -> None:
    need(isinstance(body, dict), "the request body must be a JSON object", None)
    for name, value in body.items():
        if name in allowed:
            continue
        if name in DEFAULT_ONLY:
            need(value == DEFAULT_ONLY[name] or value is None,
                  f"{name}={value!r} is not supported by this server (only {DEFAULT_ONLY[name]!r})", name)
            continue
        raise RequestError(f"{name} is not supported by this server", name, code="unsupported_parameter")


def _sampling(body: dict, n: int, recommended: RecommendedSampling | None) -> list[SamplingParams]:
    """Per choice: the request's temperature / top_p / seed, each unset one from `recommended` (None: OpenAI's
    temperature 1 and no cut); the recommendation's top_k and min_p too, which requests cannot set here."""
    given = {"temperature": _number(body, "temperature", 0, 2), "top_p": _number(body, "top_p", 0, 1, open_low=True)}
    seed = _int(body, "seed", 0)
    settings = (recommended or OPENAI_SAMPLING).settings()
    settings.update({k: v for k, v in given.items() if v is not None})
    if settings["temperature"] == 0:
        return [SamplingParams()] * n      # greedy keeps the most likely token, which every cut keeps: no effect
    if settings.get("top_p") == 1:
        del settings["top_p"]
    return [SamplingParams(**settings, seed=None if seed is None else seed + i) for i in range(n)]


def _stop(body: dict) -> tuple[str, ...]:
    stop = body.get("stop")
    if stop is None:
        return ()
    stops = [stop] if isinstance(stop, str) else stop
    need(isinstance(stops, list) and 0 < len(stops) <= MAX_STOPS and all(isinstance(s, str) and s for s in stops),
          f"stop={stop!r} is invalid: use a non-empty string or a list of 1 to {MAX_STOPS} of them", "stop")
    return tuple(stops)


def _stream_options(body: dict) -> tuple[bool, bool]:
    stream = body.get("stream", False)
    need(isinstance(stream, bool) or stream is None, f"stream={stream!r} is invalid: use true or false", "stream")
    options = body.get("stream_options")
    if options is None:
        return bool(stream), False
    need(bool(stream), "stream_options is only allowed with stream: true", "stream_options")
    need(isinstance(options, dict), "stream_options must be an object", "stream_options")
    for key in options:
        need(key == "include_usage", f"stream_options.{key} is not supported by this server",
              f"stream_options.{key}")
    usage = options.get("include_usage", False)
    need(isinstance(usage, bool), "stream_options.include_usage must be true or false", "stream_options.include_usage")
    return True, usage


def _common(body: dict, model: str, context: int, prompt: list[int], max_tokens: int | None) -> tuple[int, int]:
    name = body.get("model")
    need(isinstance(name, str) and bool(name), "model is required: a model name from GET /v1/models", "model")
    n = _int(body, "n", 1, MAX_N) or 1
    room = context - len(prompt)
    if room < 1:
        raise RequestError(f"the prompt is {len(prompt)} tokens; this server's context window is {context}",
                           "messages" if "messages" in body else "prompt", code="context_length_exceeded")
    if max_tokens is None:
        max_tokens = min(room, 256)
    elif len(prompt) + max_tokens > context:
        field = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
        raise RequestError(f"{field}={max_tokens} with a prompt of {len(prompt)} tokens exceeds this server's "
                           f"context window of {context} tokens (at most {room})", field,
                           code="context_length_exceeded")
    return n, max_tokens


def _profile(body: dict) -> bool:
    value = body.get("openafm_profile", False)
    need(isinstance(value, bool), "openafm_profile must be true or false", "openafm_profile")
    return value


# ---- chat ---------------------------------------------------------------------------------------------------

def chat_request(body: Any, *, tokenizer, model: str, context: int, vision: Callable[[], object] | None = None,
                 recommended: RecommendedSampling | None = None) -> Plan:
    """vision: returns the served model's vision tower (fm's ImagePromptError where it has none); None: no images.
    recommended: the sampling a request that sets none gets (None: OpenAI's defaults)."""
    check_fields(body, CHAT_FIELDS)
    messages, images = _messages(body.get("messages"))
    tools = _tools(body.get("tools"))
    choice = _tool_choice(body.get("tool_choice"), tools)
    schema, structured = _response_format(body.get("response_format"))
    if tools:
        system = tools_prompt(tools)
        if messages and messages[0]["role"] == "system":
            messages[0] = {"role": "system", "content": messages[0]["content"] + "\n\n" + system}
        else:
            messages.insert(0, {"role": "system", "content": system})
    if schema is not None and body["response_format"]["type"] == "json_schema":
        last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=None)
        if last_user is not None:
            messages[last_user] = {"role": "user", "content": prompt_with_schema(messages[last_user]["content"],
                                                                                 schema)}
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
    prompt, tower = image_prompt(tokenizer, text, images, vision) if images else (tokenizer.encode(text), None)
    max_tokens = _int(body, "max_completion_tokens", 1)
    if max_tokens is None:
        max_tokens = _int(body, "max_tokens", 1)
    n, max_tokens = _common(body, model, context, prompt, max_tokens)
    logprobs = body.get("logprobs", False)
    need(isinstance(logprobs, bool) or logprobs is None, f"logprobs={logprobs!r} is invalid: use true or false",
          "logprobs")
    top = _int(body, "top_logprobs", 0, MAX_TOP_LOGPROBS)
    need(top is None or bool(logprobs), "top_logprobs needs logprobs: true", "top_logprobs")
    stream, usage = _stream_options(body)
    constraint = _constraint_factory(tokenizer, schema, tools, choice, max_tokens)
    return Plan("chat", body["model"], prompt, text, n, max_tokens, _sampling(body, n, recommended), _stop(body),
                constraint, (top or 0) if logprobs else None, stream, usage, _profile(body),
                tools if choice != "none" else [], structured, images, tower)


def _content(value: Any, where: str, images: list[ImageInput] | None) -> str:
    """A message's text: a string, or its parts joined by newlines, an image part as the marker of its ImageInput
    (appended to `images`; None: a message that takes no images). An ImageInput part is one the Responses API read."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    need(isinstance(value, list), f"{where} must be a string or a list of content parts", where)
    texts = []
    for j, part in enumerate(value):
        at = f"{where}[{j}]"
        if isinstance(part, ImageInput) or (isinstance(part, dict) and part.get("type") == "image_url"):
            need(images is not None, f"{at}: images are accepted in user messages only", at)
            images.append(part if isinstance(part, ImageInput) else chat_image(part, at))
            texts.append(image_marker(len(images) - 1))
            continue
        need(isinstance(part, dict), f"{at} must be an object", at)
        kind = part.get("type")
        need(kind == "text" and isinstance(part.get("text"), str),
              f"{at} of type {kind!r} is not supported: use {{'type': 'text', 'text': ...}} or {{'type': "
              f"'image_url', 'image_url': {{'url': 'data:image/png;base64,...'}}}}", at)
        texts.append(part["text"])
    return "\n".join(texts)


def _messages(value: Any) -> tuple[list[dict], list[ImageInput]]:
    need(isinstance(value, list) and len(value) > 0, "messages must be a non-empty list", "messages")
    out, images = [], []
    for i, m in enumerate(value):
        where = f"messages[{i}]"
        need(isinstance(m, dict), f"{where} must be an object", where)
        role = m.get("role")
        need(role in ROLES, f"{where}.role={role!r} is not one of {sorted(ROLES)}", f"{where}.role")
        for key in m:
            need(key in ("role", "content", "name", "tool_calls", "tool_call_id", "refusal"),
                  f"{where}.{key} is not supported by this server", f"{where}.{key}")
        content = _content(m.get("content"), f"{where}.content", images if role == "user" else None)
        if role == "assistant" and m.get("tool_calls"):
            calls = []
            for j, call in enumerate(m["tool_calls"]):
                fn = call.get("function", {}) if isinstance(call, dict) else {}
                try:
                    calls.append({"name": fn["name"], "arguments": json.loads(fn.get("arguments") or "{}")})
                except (KeyError, TypeError, json.JSONDecodeError):
                    raise RequestError(f"{where}.tool_calls[{j}] must have function.name and JSON "
                                       f"function.arguments", f"{where}.tool_calls[{j}]") from None
            content = CALL_OPEN + json.dumps(calls, separators=(", ", ": ")) + CALL_CLOSE
        elif role != "assistant":
            need(isinstance(m.get("content"), (str, list)), f"{where}.content is required", f"{where}.content")
        out.append({"role": "system" if role == "developer" else role, "content": content})
    return out, images


def _tools(value: Any) -> list[Tool]:
    if value is None:
        return []
    need(isinstance(value, list) and len(value) > 0, "tools must be a non-empty list", "tools")
    tools, names = [], set()
    for i, t in enumerate(value):
        where = f"tools[{i}]"
        need(isinstance(t, dict) and t.get("type") == "function" and isinstance(t.get("function"), dict),
              f"{where} must be {{'type': 'function', 'function': {{...}}}}", where)
        fn = t["function"]
        name = fn.get("name")
        need(isinstance(name, str) and bool(name) and name not in names,
              f"{where}.function.name={name!r} must be a unique non-empty string", f"{where}.function.name")
        names.add(name)
        params = fn.get("parameters", {"type": "object", "properties": {}})
        try:
            schema = GenerationSchema.from_json_schema(params)
        except (FoundationModelsError, ValueError, TypeError) as e:
            raise RequestError(f"{where}.function.parameters: {e}", f"{where}.function.parameters") from None
        tools.append(_RequestTool(name, fn.get("description") or name, schema))
    return tools


def _tool_choice(value: Any, tools: list[Tool]) -> str:
    if value is None:
        return "auto" if tools else "none"
    need(bool(tools), "tool_choice needs tools", "tool_choice")
    if value in ("auto", "none", "required"):
        return value
    name = value.get("function", {}).get("name") if isinstance(value, dict) else None
    need(isinstance(value, dict) and value.get("type") == "function" and name in {t.name for t in tools},
          f"tool_choice={value!r} must be 'auto', 'none', 'required' or {{'type': 'function', 'function': "
          f"{{'name': <one of the tools>}}}}", "tool_choice")
    return "function:" + name


def _response_format(value: Any) -> tuple[dict | None, bool]:
    if value is None:
        return None, False
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "text":
        return None, False
    if kind == "json_object":
        return {"type": "object"}, True
    need(kind == "json_schema", f"response_format.type={kind!r} must be 'text', 'json_object' or 'json_schema'",
          "response_format.type")
    spec = value.get("json_schema")
    need(isinstance(spec, dict) and isinstance(spec.get("schema"), dict),
          "response_format.json_schema.schema must be a JSON Schema object", "response_format.json_schema.schema")
    strict = spec.get("strict")
    need(strict is None or isinstance(strict, bool), "response_format.json_schema.strict must be true or false",
          "response_format.json_schema.strict")
    try:
        schema = GenerationSchema.from_json_schema(spec["schema"]).to_json_schema()
    except (FoundationModelsError, ValueError, TypeError) as e:
        raise RequestError(f"response_format.json_schema.schema: {e}", "response_format.json_schema.schema") from None
    schema.pop("$schema", None)
    return schema, True


def _constraint_factory(tokenizer, schema: dict | None, tools: list[Tool], choice: str, budget: int):
    """A function making one choice's grammar under fm's policy (`constraint_for`), compiled once here so a bad
    grammar is a 400 up front."""
    make = functools.partial(constraint_for, tokenizer, tools=tools, choice=choice, schema=schema,
                             structured=StructuredDecoding(), budget=budget)
    try:
        make()
    except GrammarError as e:
        where = "tools" if tools and choice != "none" else ("response_format" if schema is not None else "tool_choice")
        raise RequestError(f"{where}: {e}", where) from None
    return make


# ---- completions ---------------------------------------------------------------------------------------------

def completion_request(body: Any, *, tokenizer, model: str, context: int,
                       recommended: RecommendedSampling | None = None) -> Plan:
    check_fields(body, COMPLETION_FIELDS)
    prompt = body.get("prompt")
    need(isinstance(prompt, str) and bool(prompt),
          "prompt must be a non-empty string (lists of prompts and token ids are not supported by this server)",
          "prompt")
    ids = tokenizer.encode(prompt)
    n, max_tokens = _common(body, model, context, ids, _int(body, "max_tokens", 1))
    logprobs = _int(body, "logprobs", 0, 5)
    stream, usage = _stream_options(body)
    return Plan("text", body["model"], ids, prompt, n, min(16, max_tokens) if body.get("max_tokens") is None else max_tokens,
                _sampling(body, n, recommended), _stop(body), None, logprobs, stream, usage, _profile(body))
