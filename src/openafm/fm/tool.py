"""`Tool` (apple_fm_sdk names) and the constrained tool-call format.

Tools are described to the model in its system prompt, in the format SmolLM2 was trained on:
`<tools>[{"name", "description", "parameters": <JSON Schema>}]</tools>`. A tool call is
`<tool_call>[{"name": ..., "arguments": {...}}, ...]</tool_call>`, and the grammar allows only
registered names with arguments valid for that tool's schema, so a malformed call cannot be produced.
"""

from __future__ import annotations

import abc
import json

from openafm.fm.content import GeneratedContent
from openafm.fm.errors import ToolCallError
from openafm.fm.schema import GenerationSchema
from openafm.runtime.constrained import COMPACT_JSON

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
MAX_CALLS_PER_TURN = 4


class Tool(abc.ABC):
    """Subclass with class attributes `name` and `description`, an `arguments_schema` property returning a
    GenerationSchema, and `async def call(self, args: GeneratedContent) -> str`."""

    name: str
    description: str

    def __init__(self) -> None:
        for attr in ("name", "description"):
            if not isinstance(getattr(self, attr, None), str) or not getattr(self, attr):
                raise TypeError(f"Tool subclass {type(self).__name__} must define a non-empty string '{attr}'")
        if not isinstance(self.arguments_schema, GenerationSchema):
            raise TypeError(f"{type(self).__name__}.arguments_schema must return a GenerationSchema, got "
                            f"{type(self.arguments_schema).__name__}")

    @property
    @abc.abstractmethod
    def arguments_schema(self) -> GenerationSchema: ...

    @abc.abstractmethod
    async def call(self, args: GeneratedContent) -> str: ...


def tool_spec(tool: Tool) -> dict:
    return {"name": tool.name, "description": tool.description, "parameters": _plain_schema(tool)}


def tools_prompt(tools: list[Tool]) -> str:
    """The system-prompt text that tells the model about the tools and the call format."""
    specs = json.dumps([tool_spec(t) for t in tools], separators=(", ", ": "))
    return ("You can call functions to answer the user. Decide whether the question needs one or more of the "
            "functions below; if it does, reply with the calls and nothing else, in the format "
            + CALL_OPEN + '[{"name": "function name", "arguments": {"argument": "value"}}]' + CALL_CLOSE
            + ". Their results will come back to you; then answer the user in plain text.\n"
            "The available functions:\n<tools>" + specs + "</tools>")


def tool_calls_schema(tools: list[Tool]) -> dict:
    """JSON Schema of a call list: each item names one registered tool and carries arguments for it."""
    items = []
    for t in tools:
        items.append({"type": "object", "properties": {"name": {"const": t.name}, "arguments": _plain_schema(t)},
                      "required": ["name", "arguments"], "additionalProperties": False})
    return {"type": "array", "minItems": 1, "maxItems": MAX_CALLS_PER_TURN,
            "items": items[0] if len(items) == 1 else {"anyOf": items}}


def tool_call_grammar(tools: list[Tool], answer: dict | None, *, required: bool = False) -> str:
    """Lark (llguidance dialect): either a tool call, or the answer — free text that does not start with
    '<', or JSON of the `answer` schema for a structured response. required=True: only a tool call."""
    calls = json.dumps({**tool_calls_schema(tools), "x-guidance": COMPACT_JSON})
    if required:
        return f'start: call\ncall: "{CALL_OPEN}" calls "{CALL_CLOSE}"\ncalls: %json {calls}\n'
    if answer is None:
        answer_rule = "answer: TEXT\nTEXT: /[^<](.|\\n)*/"
    else:
        answer_rule = "answer: %json " + json.dumps({**answer, "x-guidance": COMPACT_JSON})
    return (f'start: call | answer\ncall: "{CALL_OPEN}" calls "{CALL_CLOSE}"\ncalls: %json {calls}\n' + answer_rule)


def answer_grammar() -> str:
    """Lark: a plain-text answer that cannot start a tool call (the turn after tools were disallowed)."""
    return "start: TEXT\nTEXT: /[^<](.|\\n)*/"


def parse_tool_calls(text: str, tools: list[Tool]) -> list[tuple[Tool, dict]] | None:
    """The calls in a generated reply, or None if the reply is an answer."""
    if not text.startswith(CALL_OPEN):
        return None
    body = text[len(CALL_OPEN):]
    body = body[:body.rindex(CALL_CLOSE)] if CALL_CLOSE in body else body
    by_name = {t.name: t for t in tools}
    return [(by_name[c["name"]], c["arguments"]) for c in json.loads(body)]


async def run_tool(tool: Tool, arguments: dict) -> str:
    """Call a tool; an exception inside it becomes ToolCallError naming the tool, with the cause attached."""
    try:
        result = await tool.call(GeneratedContent(arguments))
    except Exception as e:
        raise ToolCallError(tool.name, e) from e
    if not isinstance(result, str):
        raise ToolCallError(tool.name, TypeError(f"returned {type(result).__name__}, not str"))
    return result


def _plain_schema(tool: Tool) -> dict:
    schema = dict(tool.arguments_schema.to_json_schema())
    schema.pop("$schema", None)
    return schema

