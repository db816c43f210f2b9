"""What a response may emit: the one grammar policy that sessions and the server both decode under.

    tools offered, choice "auto"            a tool call, or the answer: the schema's JSON, or text that does not
                                            start a tool call
    tools offered, "required"               only a tool call (only of tool NAME for "function:NAME")
    tools offered, "none"                   the answer only: the schema's JSON, or text that cannot start a call
    no tools                                the schema's JSON, or free text (no constraint)

Where the answer is the schema's JSON and no tool may be called, the schema is narrowed and decoding steered by
`StructuredDecoding` (bounded arrays, open objects, recursion; see fm/structured.py) within the token budget;
a request that may call tools keeps the caller's schema as it is. A session and a chat completion with the same
tools, choice and schema therefore decode under the same grammar.
"""

from __future__ import annotations

from collections.abc import Sequence

from openafm.fm.structured import StructuredDecoding
from openafm.fm.tool import Tool, answer_grammar, tool_call_grammar
from openafm.runtime.constrained import GrammarConstraint

CHOICES = ("auto", "required", "none")     # ... or "function:NAME"


def check_tool_choice(choice: str, tools: Sequence[Tool]) -> None:
    """Raise ValueError unless ``choice`` is one of CHOICES or "function:NAME" naming one of ``tools``."""
    names = [t.name for t in tools]
    if choice.startswith("function:"):
        if choice.removeprefix("function:") not in names:
            raise ValueError(f"tool_choice {choice!r} names no tool offered; the tools are {names}")
    elif choice not in CHOICES:
        raise ValueError(f"tool_choice {choice!r} is not one of {list(CHOICES)} or 'function:NAME'")
    if choice == "required" and not tools:
        raise ValueError(f"tool_choice {choice!r} needs at least one tool")


def constraint_for(tokenizer, *, tools: Sequence[Tool], choice: str, schema: dict | None,
                   structured: StructuredDecoding, budget: int):
    """The constraint one response decodes under, or None for free text. A fresh object on every call: a
    constraint holds one row's parser state. Raises GrammarError if the grammar does not compile."""
    check_tool_choice(choice, tools)
    if tools and choice != "none":
        named = choice.removeprefix("function:") if choice.startswith("function:") else None
        chosen = [t for t in tools if named is None or t.name == named]
        return GrammarConstraint.from_lark(tool_call_grammar(chosen, schema, required=choice != "auto"), tokenizer)
    if schema is not None:
        constraint = GrammarConstraint.from_json_schema(structured.bounded_schema(schema), tokenizer)
        return structured.steer(constraint, budget=budget)
    if tools:
        return GrammarConstraint.from_lark(answer_grammar(), tokenizer)
    return None
