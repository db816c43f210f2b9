"""The adapter toolkit's training data: JSON Lines, one conversation per line as a list of {"role", "content"}
turns, with an extension for tool calls; every bad line is an error naming file:line (or skipped and counted).

    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "2+2?"},
     {"role": "assistant", "content": "4"}]

Roles: "system" (at most one, first), "user", "assistant", "tool" (a tool's result, after an assistant turn with
tool calls). At least one user and one assistant turn; the loss is on every assistant turn.

Tool-call extension (the framework's own format, fm/tool.py, so a trained adapter calls tools the way a session
with tools expects):
    system turn:     "tools": [{"name", "description", "parameters": JSON Schema}, ...] -> the tools prompt is
                     appended to the system content (or is the system content when it is empty)
    assistant turn:  "tool_calls": [{"name": str, "arguments": {...}}, ...] instead of "content" -> written as
                     <tool_call>[{"name": ..., "arguments": {...}}]</tool_call> (compact JSON)
    tool turn:       {"role": "tool", "content": "the result"}

A line that is not a JSON array of such turns, a turn with an unknown role or key, an empty content, a tool turn
with no call before it: `ConversationError("file:line: ...")`, or with skip_bad the line is skipped and its
reason kept (`Conversations.skipped`). Conversations longer than the model's context are checked where they are
tokenized (train/adapter_toolkit.py), with the same file:line.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from openafm.fm.tool import CALL_CLOSE, CALL_OPEN, specs_prompt
from openafm.io import JsonlError, json_line

ROLES = ("system", "user", "assistant", "tool")
KEYS = {"system": {"role", "content", "tools"}, "user": {"role", "content"},
        "assistant": {"role", "content", "tool_calls"}, "tool": {"role", "content", "name"}}


class ConversationError(JsonlError):
    """A toolkit JSONL line that is not a valid conversation (the message starts with file:line)."""


@dataclasses.dataclass(frozen=True)
class Conversation:
    messages: tuple[dict, ...]     # rendered turns {"role", "content"}: tools prompt and tool calls written out
    where: str = ""                # "train.jsonl:12"

    def prompt_text(self) -> str:
        """The first user turn (what a draft learns to answer)."""
        return next(m["content"] for m in self.messages if m["role"] == "user")

    def assistant_turns(self) -> list[int]:
        return [i for i, m in enumerate(self.messages) if m["role"] == "assistant"]


class Conversations(list):
    """The conversations read, and the lines skipped (with skip_bad) as "file:line: reason"."""

    def __init__(self) -> None:
        super().__init__()
        self.skipped: list[str] = []


def parse_conversation(obj, where: str) -> Conversation:
    """One line's JSON value -> a Conversation; raises ConversationError naming `where`."""
    if isinstance(obj, dict) and set(obj) == {"messages"}:
        obj = obj["messages"]
    if not isinstance(obj, list) or not obj:
        raise ConversationError(f"{where}: a conversation is a non-empty JSON array of turns, got "
                                f"{type(obj).__name__}")
    out, calls_open = [], False
    for i, turn in enumerate(obj):
        at = f"{where}: turn {i}"
        if not isinstance(turn, dict):
            raise ConversationError(f"{at}: a turn is an object {{\"role\", \"content\"}}, got {type(turn).__name__}")
        role = turn.get("role")
        if role not in ROLES:
            raise ConversationError(f"{at}: unknown role {role!r}; use one of {list(ROLES)}")
        extra = sorted(set(turn) - KEYS[role])
        if extra:
            raise ConversationError(f"{at}: a {role} turn has no key(s) {extra}; allowed: {sorted(KEYS[role])}")
        if role == "system" and i != 0:
            raise ConversationError(f"{at}: the system turn must come first")
        if role == "tool" and not calls_open:
            raise ConversationError(f"{at}: a tool turn must follow an assistant turn with tool_calls")
        content = turn.get("content")
        if role == "assistant" and "tool_calls" in turn:
            if content not in (None, ""):
                raise ConversationError(f"{at}: an assistant turn has either content or tool_calls, not both")
            content = _calls_text(turn["tool_calls"], at)
            calls_open = True
        elif role != "tool":
            calls_open = False
        if role == "system" and "tools" in turn:
            content = _with_tools(content or "", turn["tools"], at)
        if not isinstance(content, str) or not content:
            raise ConversationError(f"{at}: 'content' must be a non-empty string, got {content!r}")
        out.append({"role": role, "content": content})
    roles = [m["role"] for m in out]
    if "user" not in roles or "assistant" not in roles:
        raise ConversationError(f"{where}: a conversation needs a user turn and an assistant turn (the loss is on "
                                f"assistant turns); got roles {roles}")
    if roles[-1] != "assistant":
        raise ConversationError(f"{where}: the last turn must be the assistant's (got {roles[-1]!r}): nothing after "
                                f"it would be trained on")
    return Conversation(tuple(out), where)


def _calls_text(calls, at: str) -> str:
    if not isinstance(calls, list) or not calls:
        raise ConversationError(f"{at}: tool_calls must be a non-empty list of {{\"name\", \"arguments\"}}")
    for j, call in enumerate(calls):
        if not (isinstance(call, dict) and set(call) == {"name", "arguments"} and isinstance(call["name"], str)
                and call["name"] and isinstance(call["arguments"], dict)):
            raise ConversationError(f"{at}: tool_calls[{j}] must be {{\"name\": str, \"arguments\": object}}, "
                                    f"got {call!r}")
    return CALL_OPEN + json.dumps(calls, separators=(", ", ": "), ensure_ascii=False) + CALL_CLOSE


def _with_tools(content: str, tools, at: str) -> str:
    if not isinstance(tools, list) or not tools:
        raise ConversationError(f"{at}: tools must be a non-empty list of {{\"name\", \"description\", \"parameters\"}}")
    for j, t in enumerate(tools):
        if not (isinstance(t, dict) and set(t) <= {"name", "description", "parameters"} and isinstance(t.get("name"), str)
                and isinstance(t.get("parameters", {}), dict)):
            raise ConversationError(f"{at}: tools[{j}] must be {{\"name\", \"description\", \"parameters\"}}, got {t!r}")
    prompt = specs_prompt([{"name": t["name"], "description": t.get("description", ""),
                            "parameters": t.get("parameters", {"type": "object", "properties": {}})} for t in tools])
    return f"{content}\n{prompt}" if content else prompt


def read_conversations(path: str | Path, *, skip_bad: bool = False) -> Conversations:
    """Every line of a toolkit JSONL file; a bad line raises ConversationError naming path:line, or with skip_bad
    is skipped and recorded in `.skipped`."""
    path = Path(path)
    if not path.is_file():
        raise ConversationError(f"{path}: no such file (a JSONL file of conversations, one JSON array per line)")
    out = Conversations()
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            where = f"{path}:{lineno}"
            try:
                if not line.strip():
                    raise ConversationError(f"{where}: blank line (every line is one conversation)")
                obj = json_line(line, where, ConversationError)
                out.append(parse_conversation(obj, where))
            except ConversationError as e:
                if not skip_bad:
                    raise
                out.skipped.append(str(e))
    if not out:
        raise ConversationError(f"{path}: no conversations" + (f" ({len(out.skipped)} bad lines skipped)"
                                                               if out.skipped else " (the file is empty)"))
    return out
