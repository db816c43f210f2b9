"""`Tool` (apple_fm_sdk names) and the constrained tool-call format.

Tools are described to the model in its system prompt, in the format SmolLM2 was trained on:
`<tools>[{"name", "description", "parameters": <JSON Schema>}]</tools>`. A tool call is
`<tool_call>[{"name": ..., "arguments": {...}}, ...]</tool_call>`, and the grammar allows only
registered names with arguments valid for that tool's schema, so a malformed call cannot be produced.

Construction checks what Apple's SDK checks, with its errors: a subclass without `name` or `description`
raises AssertionError, a `call` that is not `async def` raises TypeError. A session may hold several tools
with one name, as in the SDK, when they are alike (same description and arguments schema; several instances
of one class, typically): the model is told about the name once and its calls go to the first of them. Tools
that share a name but differ raise ValueError (openafm: a call names only the tool, so which was meant could
not be told; the SDK passes such lists on unchecked).
"""

from __future__ import annotations

import abc
import enum
import inspect
import json

from openafm.fm.content import GeneratedContent
from openafm.fm.errors import ToolCallError
from openafm.fm.schema import GenerationSchema
from openafm.runtime.constrained import COMPACT_JSON

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
MAX_CALLS_PER_TURN = 4


class RepeatedCalls(str, enum.Enum):
    """What a session does when the model asks again, in the same request, for a call it has already made (the same
    tool with the same arguments, in a later round or twice in one round) — the loop a small model falls into
    (openafm extension; the SDK has no such option and behaves as CALL_AGAIN)."""
    REUSE = "reuse"              # the tool is not run again: its earlier result is given again (the transcript shows
                                 # the call and the result), and when every call of the round repeated, the model's
                                 # next turn must answer
    CALL_AGAIN = "call-again"    # the tool runs again, every time it is asked


def call_key(tool: "Tool", arguments: dict) -> str:
    """What makes two calls the same call: the tool's name and its arguments (key order aside)."""
    return tool.name + json.dumps(arguments, sort_keys=True, ensure_ascii=False)


class Tool(abc.ABC):
    """Subclass with class attributes `name` and `description`, an `arguments_schema` property returning a
    GenerationSchema, and `async def call(self, args: GeneratedContent) -> str`."""

    name: str
    description: str

    def __init__(self) -> None:
        cls = type(self).__name__
        for attr in ("name", "description"):      # AssertionError as the SDK's (raised, so `python -O` keeps it)
            if not hasattr(self, attr):
                raise AssertionError(f"Tool subclass must have a '{attr}' property. {cls} defines no {attr}.")
        for attr in ("name", "description"):
            value = getattr(self, attr)
            if not isinstance(value, str) or not value:
                raise TypeError(f"Tool {attr} must be a non-empty string; {cls}.{attr} is {value!r}")
        if not isinstance(self.arguments_schema, GenerationSchema):
            raise TypeError(f"{cls}.arguments_schema must return a GenerationSchema, got "
                            f"{type(self.arguments_schema).__name__}")
        if not inspect.iscoroutinefunction(self.call):
            raise TypeError(f"Tool call method must be an async function. ({cls}.call is a plain function; "
                            f"declare it `async def call(self, args)`)")

    @property
    @abc.abstractmethod
    def arguments_schema(self) -> GenerationSchema: ...

    @abc.abstractmethod
    async def call(self, args: GeneratedContent) -> str: ...


def tool_spec(tool: Tool) -> dict:
    return {"name": tool.name, "description": tool.description, "parameters": _plain_schema(tool)}


def check_tools(tools: list[Tool]) -> None:
    """Tools a session may hold: Tool instances; tools that share a name must be alike (see the module doc)."""
    first: dict[str, tuple[Tool, dict]] = {}
    for i, t in enumerate(tools):
        if not isinstance(t, Tool):
            raise TypeError(f"tools must be Tool instances, got {type(t).__name__} at tools[{i}]")
        spec = tool_spec(t)
        if t.name in first and first[t.name][1] != spec:
            other = first[t.name][0]
            differ = [k for k in ("description", "parameters") if first[t.name][1][k] != spec[k]]
            raise ValueError(f"tools {type(other).__name__} and {type(t).__name__} (tools[{i}]) are both named "
                             f"{t.name!r} but differ in {' and '.join(differ)}; a model's call names only the tool, "
                             f"so it could not say which one it means. Give them different names")
        first.setdefault(t.name, (t, spec))


def distinct(tools: list[Tool]) -> list[Tool]:
    """The first tool of each name, in order: what the model is told about and what its calls go to."""
    by_name: dict[str, Tool] = {}
    for t in tools:
        by_name.setdefault(t.name, t)
    return list(by_name.values())


def tools_prompt(tools: list[Tool]) -> str:
    """The system-prompt text that tells the model about the tools and the call format."""
    return specs_prompt([tool_spec(t) for t in distinct(tools)])


def specs_prompt(specs: list[dict]) -> str:
    """tools_prompt over tool specs ({"name", "description", "parameters"}; the adapter toolkit's data has these)."""
    specs = json.dumps(specs, separators=(", ", ": "))
    return ("You can call functions to answer the user. Decide whether the question needs one or more of the "
            "functions below; if it does, reply with the calls and nothing else, in the format "
            + CALL_OPEN + '[{"name": "function name", "arguments": {"argument": "value"}}]' + CALL_CLOSE
            + ". Their results will come back to you; then answer the user in plain text.\n"
            "The available functions:\n<tools>" + specs + "</tools>")


def tool_calls_schema(tools: list[Tool]) -> dict:
    """JSON Schema of a call list: each item names one registered tool and carries arguments for it."""
    items = []
    for t in distinct(tools):
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
    by_name = {t.name: t for t in distinct(tools)}
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

