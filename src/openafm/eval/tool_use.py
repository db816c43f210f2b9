"""Tool use: BFCL (Berkeley Function Calling Leaderboard) questions, scored by AST match of the calls.

Report §8 scores tool use on BFCL. The questions and possible answers are the `bfcl-eval` wheel's own files
(eval/bfcl_data.py reads them and states the AST-match rules). The model is told about the question's
functions in its system prompt in the framework's format (`fm.tool.tools_prompt`, SmolLM2's `<tools>` /
`<tool_call>`), the question is the user turn, and the reply's first turn is scored:

* `ToolMode.FREE` — greedy generation, batched, stopped at the first "</tool_call>"; calls are read from
  the text leniently (bfcl_data.parse_calls_leniently).
* `ToolMode.CONSTRAINED` — the framework's tool-call grammar (`fm.tool.tool_call_grammar`, required=True):
  only registered names with schema-valid arguments can be generated; one question at a time.

A question whose function schema the grammar engine rejects (InvalidGenerationSchemaError) is kept out of
the items in both modes (`rejected_ids` says which), so the two modes score the same questions.

`split` (bfcl_data.Split) draws the items from every question (None, the default), or only from the held-out
split by question id (HELDOUT: the `bfcl_*_heldout` tasks, for a model post-trained on the TRAIN split).
"""

from __future__ import annotations

import enum
import json
import random
from dataclasses import dataclass

from openafm.eval.bfcl_data import load_category, package_info, parse_calls_leniently, question_correct, to_json_schema
from openafm.eval.scoring import generate_batched
from openafm.fm.errors import InvalidGenerationSchemaError
from openafm.fm.schema import GenerationSchema
from openafm.fm.tool import CALL_CLOSE, Tool, tool_call_grammar, tools_prompt
from openafm.runtime.constrained import GrammarConstraint
from openafm.runtime.generate import generate_tokens
from openafm.splits import Split

MAX_TOKENS = 192


class ToolMode(enum.Enum):
    FREE = "free"
    CONSTRAINED = "constrained"


@dataclass(frozen=True)
class ToolQuestion:
    id: str
    question: str
    functions: list
    ground_truth: list
    system: str             # the tools prompt
    lang: str = "en"


class DescribedTool(Tool):
    """A BFCL function as a framework Tool: only described to the model, never called."""

    def __init__(self, function: dict):
        self.name = function["name"]
        self.description = function.get("description") or function["name"]
        self._schema = GenerationSchema.from_json_schema(to_json_schema(function["parameters"]))
        super().__init__()

    @property
    def arguments_schema(self) -> GenerationSchema:
        return self._schema

    async def call(self, args) -> str:
        raise NotImplementedError("evaluation tools are described, not called")


def tools_of(q: ToolQuestion) -> list[Tool]:
    return [DescribedTool(f) for f in q.functions]


def bfcl_items(category: str, n: int, *, seed: int, task: str, split: Split | None = None
               ) -> tuple[list[ToolQuestion], list[str]]:
    """(n seeded questions of a category's split, the ids left out because their schemas were rejected)."""
    _, data = package_info(task)
    entries = load_category(data, category, split)
    rng = random.Random(f"bfcl:{category}:{seed}")
    order = rng.sample(range(len(entries)), len(entries))
    items, rejected = [], []
    for i in order:
        if len(items) == n:
            break
        e = entries[i]
        try:
            system = tools_prompt([DescribedTool(f) for f in e["functions"]])
        except InvalidGenerationSchemaError:
            rejected.append(e["id"])
            continue
        items.append(ToolQuestion(id=e["id"], question=e["question"], functions=e["functions"],
                                  ground_truth=e["ground_truth"], system=system))
    return items, rejected


def _prompt(tokenizer, q: ToolQuestion) -> str:
    return tokenizer.apply_chat_template([{"role": "system", "content": q.system},
                                          {"role": "user", "content": q.question}], add_generation_prompt=True)


def evaluate_tools(model, tokenizer, items: list[ToolQuestion], *, batch_size: int, mode: ToolMode) -> list[dict]:
    prompts = [_prompt(tokenizer, q) for q in items]
    if mode is ToolMode.FREE:
        outputs = generate_batched(model, tokenizer, prompts, max_tokens=MAX_TOKENS, stop=[CALL_CLOSE],
                                   batch_size=batch_size)
    else:
        outputs = [_constrained(model, tokenizer, q, p) for q, p in zip(items, prompts)]
    records = []
    for q, prompt, out in zip(items, prompts, outputs):
        calls = parse_calls_leniently(out)
        ok = question_correct(calls, q.ground_truth, q.functions)
        records.append({"id": q.id, "lang": q.lang, "prompt": prompt, "output": out,
                        "calls": json.loads(json.dumps(calls, default=str)), "ground_truth": q.ground_truth,
                        "score": float(ok), "metrics": {"ast_accuracy": float(ok), "has_call": float(bool(calls))}})
    return records


def _constrained(model, tokenizer, q: ToolQuestion, prompt: str) -> str:
    constraint = GrammarConstraint.from_lark(tool_call_grammar(tools_of(q), None, required=True), tokenizer)
    gen, = generate_tokens(model, [tokenizer.encode(prompt)], max_new_tokens=MAX_TOKENS, constraint=constraint,
                           eos_token_ids=set(tokenizer.eos_token_ids), tokenizer=tokenizer)
    return gen.text or ""
