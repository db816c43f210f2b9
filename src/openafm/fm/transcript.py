"""`Transcript`: a session's history in the Foundation Models format (apple_fm_sdk names).

    {"version": 1, "type": "FoundationModels.Transcript",
     "transcript": {"entries": [{"id", "role": "instructions" | "user" | "response" | "tool", "contents": [...]}, ...]}}

Contents are `{"type": "text", "id", "text"}` or, for structured responses, `{"type": "structure", "id",
"structure": {"content": <JSON value>}}` (Apple's add `"source"`, the schema's name). Per role, as Apple's
framework writes them:

    instructions  contents; "tools": [{"type": "function", "function": {"name", "description", "parameters"}}]
    user          contents (Apple's also carry "options" and, for a structured request, "responseFormat")
    response      contents, or "toolCalls": [{"id", "name", "arguments": <the arguments as a JSON string>}]
    tool          contents; "toolName", "toolCallID" (the id of the call it answers)

Transcripts exported by Apple's framework load as they are, and what openafm writes is that form. The form
earlier openafm versions wrote (tool calls as `{"id", "toolName", "arguments": <dict>}`, tools flat as
`{"name", "description", "parameters"}`, an empty "contents" beside "toolCalls") is read too and stored in
Apple's. Keys openafm does not use (Apple's "assets", "options", "responseFormat", "source") are kept, so a
transcript round-trips unchanged.
"""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any

from openafm.fm.errors import GenerationError

FORMAT_TYPE = "FoundationModels.Transcript"
ROLES = ("instructions", "user", "response", "tool")
CONTENT_TYPES = ("text", "structure")


def _id() -> str:
    return str(uuid.uuid4()).upper()


def text_content(text: str) -> dict:
    return {"type": "text", "id": _id(), "text": text}


def image_content(path, label: str | None) -> dict:
    """An image of a user prompt: its file's path and its label (openafm's form; images are not re-read)."""
    return {"type": "image", "id": _id(), "path": str(path), "label": label}


def structure_content(value: Any) -> dict:
    return {"type": "structure", "id": _id(), "structure": {"content": value}}


class Transcript:
    def __init__(self, entries: list[dict] | None = None):
        self._entries: list[dict] = []
        for entry in entries or []:
            self.append(entry)

    @property
    def entries(self) -> list[dict]:
        """A copy of the entries, oldest first."""
        return copy.deepcopy(self._entries)

    def append(self, entry: dict) -> None:
        """Add an entry (Apple's form or openafm's earlier one; stored in Apple's), with an id if it has none."""
        if not isinstance(entry, dict):
            raise GenerationError(f"a transcript entry must be a dict, got {type(entry).__name__}: {entry!r}")
        role = entry.get("role")
        if role not in ROLES:
            raise GenerationError(f"transcript entry role {role!r} is not one of {ROLES}")
        if not isinstance(entry.get("contents", []), list):
            raise GenerationError(f"transcript entry 'contents' must be a list, got {entry.get('contents')!r}")
        out = {"id": entry.get("id") or _id(), **copy.deepcopy(entry)}
        if "tools" in out:
            if not isinstance(out["tools"], list):
                raise GenerationError(f"transcript entry 'tools' must be a list, got {out['tools']!r}")
            out["tools"] = [tool_definition(t) for t in out["tools"]]
        if "toolCalls" in out:
            if not isinstance(out["toolCalls"], list):
                raise GenerationError(f"transcript entry 'toolCalls' must be a list, got {out['toolCalls']!r}")
            out["toolCalls"] = [tool_call(c) for c in out["toolCalls"]]
            if out.get("contents") == []:
                del out["contents"]             # Apple's tool-call entries have no contents
        self._entries.append(out)

    async def to_dict(self) -> dict:
        return {"version": 1, "type": FORMAT_TYPE, "transcript": {"entries": self.entries}}

    @classmethod
    async def from_dict(cls, data: dict) -> "Transcript":
        """A transcript from its dictionary. A dictionary that is not one (no "transcript", an entry without an
        "id" or without what its role carries) raises GenerationError, as the SDK's does."""
        what = "Failed to create transcript from dictionary"
        if not isinstance(data, dict):
            raise GenerationError(f"{what}: expected a dict, got {type(data).__name__}")
        if data.get("type") != FORMAT_TYPE:
            raise GenerationError(f"{what}: expected type {FORMAT_TYPE!r}, got {data.get('type')!r}")
        if data.get("version") != 1:
            raise GenerationError(f"{what}: version {data.get('version')!r} is not supported (only 1)")
        body = data.get("transcript")
        if not isinstance(body, dict) or not isinstance(body.get("entries"), list):
            raise GenerationError(f"{what}: it needs a 'transcript' object with an 'entries' list, got "
                                  f"{'no transcript' if body is None else repr(body)[:100]}")
        for i, entry in enumerate(body["entries"]):
            _check_entry(entry, f"{what}: entries[{i}]")
        return cls(body["entries"])

    def to_json(self) -> str:
        return json.dumps({"version": 1, "type": FORMAT_TYPE, "transcript": {"entries": self._entries}})

    def __len__(self) -> int:
        return len(self._entries)


def _check_entry(entry: Any, where: str) -> None:
    """What an entry read from outside must have: an id, and the contents (or tools / tool calls) of its role."""
    if not isinstance(entry, dict):
        raise GenerationError(f"{where} must be an object, got {entry!r}")
    if not isinstance(entry.get("id"), str):
        raise GenerationError(f"{where} has no 'id' string: {entry!r}"[:300])
    role = entry.get("role")
    needs = {"instructions": ("contents", "tools"), "user": ("contents",), "response": ("contents", "toolCalls"),
             "tool": ("contents",)}.get(role)
    if needs is None:
        raise GenerationError(f"{where}: role {role!r} is not one of {ROLES}")
    if not any(k in entry for k in needs):
        raise GenerationError(f"{where}: a {role!r} entry needs {' or '.join(repr(k) for k in needs)}: {entry!r}"[:300])
    if role == "tool" and not (isinstance(entry.get("toolName"), str) and isinstance(entry.get("toolCallID"), str)):
        raise GenerationError(f"{where}: a 'tool' entry needs 'toolName' and 'toolCallID' strings: {entry!r}"[:300])


def tool_definition(tool: Any) -> dict:
    """A tool of an instructions entry in Apple's form, from Apple's or openafm's earlier flat form."""
    if isinstance(tool, dict) and tool.get("type") == "function" and isinstance(tool.get("function"), dict):
        spec = tool["function"]
    elif isinstance(tool, dict) and "type" not in tool:
        spec = tool
    else:
        raise GenerationError(f"a transcript tool must be {{'type': 'function', 'function': {{...}}}}, got {tool!r}")
    if not isinstance(spec.get("name"), str):
        raise GenerationError(f"a transcript tool needs a 'name' string, got {tool!r}")
    return {"type": "function", "function": copy.deepcopy(spec)}


def tool_call(call: Any) -> dict:
    """A tool call in Apple's form {"id", "name", "arguments": JSON string}, from Apple's or openafm's earlier
    {"id", "toolName", "arguments": dict}."""
    if not isinstance(call, dict):
        raise GenerationError(f"a transcript tool call must be an object, got {call!r}")
    name = call.get("name", call.get("toolName"))
    if not isinstance(name, str):
        raise GenerationError(f"a transcript tool call needs a 'name' string, got {call!r}")
    arguments = call.get("arguments")
    if isinstance(arguments, str):
        _arguments_of(arguments, name)            # checked here, kept as written
    elif isinstance(arguments, dict):
        arguments = json.dumps(arguments)
    else:
        raise GenerationError(f"tool call {name!r}: 'arguments' must be a JSON object (as a string), got {arguments!r}")
    rest = {k: copy.deepcopy(v) for k, v in call.items() if k not in ("name", "toolName", "arguments", "id")}
    return {"id": call.get("id") or _id(), "name": name, "arguments": arguments, **rest}


def tool_calls(entry: dict) -> list[tuple[str, dict]]:
    """(tool name, arguments) of each call of a response entry (stored in Apple's form)."""
    return [(c["name"], _arguments_of(c["arguments"], c["name"])) for c in entry.get("toolCalls", [])]


def _arguments_of(text: str, name: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise GenerationError(f"tool call {name!r}: 'arguments' is not JSON ({e}): {text[:200]!r}") from e
    if not isinstance(value, dict):
        raise GenerationError(f"tool call {name!r}: 'arguments' must be a JSON object, got {text[:200]!r}")
    return value


def entry_text(entry: dict) -> str:
    """The text an entry contributes to the model's context (structures as compact JSON).

    A content of another type (an image, say) raises GenerationError: the model has no input for it."""
    parts = []
    for c in entry.get("contents", []):
        if c.get("type") == "text":
            parts.append(c["text"])
        elif c.get("type") == "structure":
            parts.append(json.dumps(c["structure"]["content"], separators=(", ", ": ")))
        else:
            raise GenerationError(f"transcript entry {entry.get('id')!r} has content of type {c.get('type')!r}; "
                                  f"openafm models read {' and '.join(CONTENT_TYPES)} contents only")
    return "".join(parts)
