"""`Transcript`: a session's history in the Foundation Models format (apple_fm_sdk names).

    {"version": 1, "type": "FoundationModels.Transcript",
     "transcript": {"entries": [{"id", "role": "instructions" | "user" | "response" | "tool", "contents": [...]}, ...]}}

Contents are `{"type": "text", "id", "text"}` or, for structured responses, `{"type": "structure", "id",
"structure": {"content": <JSON value>}}`. Tool-call responses carry `toolCalls`; tool outputs carry
`toolName` and `toolCallID`.
"""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any

from openafm.fm.errors import FoundationModelsError

FORMAT_TYPE = "FoundationModels.Transcript"
ROLES = ("instructions", "user", "response", "tool")


def _id() -> str:
    return str(uuid.uuid4()).upper()


def text_content(text: str) -> dict:
    return {"type": "text", "id": _id(), "text": text}


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
        role = entry.get("role")
        if role not in ROLES:
            raise FoundationModelsError(f"transcript entry role {role!r} is not one of {ROLES}")
        if not isinstance(entry.get("contents", []), list):
            raise FoundationModelsError(f"transcript entry 'contents' must be a list, got {entry.get('contents')!r}")
        self._entries.append({"id": entry.get("id") or _id(), **copy.deepcopy(entry)})

    async def to_dict(self) -> dict:
        return {"version": 1, "type": FORMAT_TYPE, "transcript": {"entries": self.entries}}

    @classmethod
    async def from_dict(cls, data: dict) -> "Transcript":
        if not isinstance(data, dict) or data.get("type") != FORMAT_TYPE:
            raise FoundationModelsError(f"not a transcript: expected type {FORMAT_TYPE!r}, got "
                                        f"{data.get('type') if isinstance(data, dict) else type(data).__name__!r}")
        if data.get("version") != 1:
            raise FoundationModelsError(f"transcript version {data.get('version')!r} is not supported (only 1)")
        return cls(data.get("transcript", {}).get("entries", []))

    def to_json(self) -> str:
        return json.dumps({"version": 1, "type": FORMAT_TYPE, "transcript": {"entries": self._entries}})

    def __len__(self) -> int:
        return len(self._entries)


def entry_text(entry: dict) -> str:
    """The text an entry contributes to the model's context (structures as compact JSON)."""
    parts = []
    for c in entry.get("contents", []):
        if c.get("type") == "text":
            parts.append(c["text"])
        elif c.get("type") == "structure":
            parts.append(json.dumps(c["structure"]["content"], separators=(", ", ": ")))
    return "".join(parts)
