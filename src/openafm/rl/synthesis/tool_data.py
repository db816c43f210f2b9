"""Tool-use SFT data (report §5): BFCL questions of the train split as chat examples, verified before they are kept.

Each example is a tool-calling request exactly as the framework renders it at inference (eval/tool_use.py, a
session with tools): the system turn is `fm.tool.tools_prompt` over the question's functions, the user turn is the
question, and the assistant turn is the ground-truth call list in the text the constrained tool-call grammar
(`fm.tool.tool_call_grammar`, required=True) produces:

    <tool_call>[{"name": "math.hypot", "arguments": {"x": 4, "y": 5}}]</tool_call>

(compact JSON with ", " and ": " separators, arguments in the schema's property order, non-ASCII written as is),
so SFT teaches what constrained decoding then enforces. Per ground-truth parameter the first acceptable value is
written that the parameter's schema accepts; a parameter whose first acceptable value is "" (BFCL: may be left
out) is left out. An example is kept only when (1) the grammar admits its assistant text byte for byte and (2) the
eval's lenient parser reads calls from it that the eval's AST match (`question_correct`) scores correct; the ids
that fail either are returned with the reason. Only the TRAIN split (bfcl_data.split_of) is drawn from, so the
`bfcl_*_heldout` eval tasks measure questions never trained on.

    examples, dropped = bfcl_sft_examples(("simple_python", "multiple", "parallel"))
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import llguidance

from openafm.data.chat import ChatExample
from openafm.eval.bfcl_data import load_category, package_info, parse_calls_leniently, question_correct, split_of
from openafm.eval.tool_use import DescribedTool
from openafm.fm.errors import InvalidGenerationSchemaError
from openafm.fm.tool import CALL_CLOSE, CALL_OPEN, MAX_CALLS_PER_TURN, tool_call_grammar, tool_spec, tools_prompt
from openafm.runtime.constrained import accepts_text
from openafm.splits import Split

DEFAULT_CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple")
TASK = "bfcl-sft"


def call_text(truth: list[dict], functions: list[dict]) -> str:
    """The ground-truth calls [{name: {param: [acceptable values]}}] as the constrained grammar writes them;
    `functions` are the question's BFCL docs (their JSON Schema gives the argument order and the value check)."""
    specs = {t.name: tool_spec(t)["parameters"] for t in map(DescribedTool, functions)}
    calls = []
    for call in truth:
        (name, expected), = call.items()
        if name not in specs:
            raise ValueError(f"ground-truth call {name!r} is not among the question's functions {sorted(specs)}")
        calls.append({"name": name, "arguments": _pick_object(expected, specs[name])})
    return CALL_OPEN + json.dumps(calls, separators=(", ", ": "), ensure_ascii=False) + CALL_CLOSE


def _pick_object(expected: dict[str, list], schema: dict) -> dict:
    """{param: [acceptable values]} -> {param: one value}, in the schema's property order."""
    props = schema.get("properties", {})
    order = [p for p in props if p in expected] + [p for p in expected if p not in props]
    out = {}
    for p in order:
        values = expected[p]
        if not values or values[0] == "":
            continue                                   # BFCL: the parameter may be left out
        out[p] = _pick(values, props.get(p, {}), p)
    return out


def _pick(values: list, schema: dict, where: str) -> Any:
    """The first acceptable value the parameter's schema accepts (a nested possible answer picked inside)."""
    for value in values:
        if value == "":
            continue
        if isinstance(value, dict) and value and all(isinstance(v, list) for v in value.values()):
            value = _pick_object(value, schema)
        if _fits(value, schema):
            return value
    raise ValueError(f"no acceptable value of {where!r} ({values!r}) is valid for its schema {schema!r}")


_TYPE_CHECKS = {"string": lambda v: isinstance(v, str), "boolean": lambda v: isinstance(v, bool),
                "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
                "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
                "array": lambda v: isinstance(v, list), "object": lambda v: isinstance(v, dict),
                "null": lambda v: v is None}


def _fits(value: Any, schema: dict) -> bool:
    """The value has the schema's type and is among its enum (when it has one); the grammar check in `verify`
    judges the rest of the schema."""
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind else []
    if kinds and not any(_TYPE_CHECKS.get(k, lambda v: True)(value) for k in kinds):
        return False
    return "enum" not in schema or value in schema["enum"]


def verify(example: ChatExample, truth: list[dict], functions: list[dict]) -> str | None:
    """None when the example's assistant text is what the constrained grammar can produce and the eval scores it
    correct; else the reason it is not."""
    grammar = llguidance.LLMatcher.grammar_from_lark(
        tool_call_grammar([DescribedTool(f) for f in functions], None, required=True))
    if not accepts_text(grammar, example.response):
        return "the tool-call grammar does not admit the text"
    if not question_correct(parse_calls_leniently(example.response), truth, functions):
        return "the eval's AST match scores the text wrong"
    return None


def bfcl_sft_examples(categories: Sequence[str] = DEFAULT_CATEGORIES, *, split: Split = Split.TRAIN
                      ) -> tuple[list[ChatExample], dict[str, str]]:
    """(verified chat examples of the categories' questions in `split`, in file order; {id: why left out})."""
    if split is None:
        raise ValueError("SFT data is drawn from one split (train, or heldout for a held-out loss), not 'all'")
    version, data = package_info(TASK)
    examples, dropped = [], {}
    for category in categories:
        for e in load_category(data, category, split):
            if len(e["ground_truth"]) > MAX_CALLS_PER_TURN:
                dropped[e["id"]] = f"{len(e['ground_truth'])} calls; the grammar allows {MAX_CALLS_PER_TURN} a turn"
                continue
            try:
                system = tools_prompt([DescribedTool(f) for f in e["functions"]])
                response = call_text(e["ground_truth"], e["functions"])
            except (InvalidGenerationSchemaError, ValueError) as err:
                dropped[e["id"]] = str(err)
                continue
            example = ChatExample(e["question"], response, where=f"bfcl {category} {e['id']}", system=system,
                                  meta={"source": f"bfcl-eval {version} {category}", "id": e["id"],
                                        "split": split_of(e["id"]).value, "verifier": "bfcl AST match + grammar"})
            why = verify(example, e["ground_truth"], e["functions"])
            if why is not None:
                dropped[e["id"]] = why
                continue
            examples.append(example)
    return examples, dropped
