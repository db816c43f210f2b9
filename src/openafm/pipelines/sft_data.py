"""The data an sft stage trains on, as one list of conversations: synth stages' verified samples, JSONL files, and
the built-in sets the project generates itself (each from its train split only, so no held-out item is trained on).

    - name: sft
      kind: sft
      data: [synth-math, bfcl, guided, tool-rounds, udhr, extra.jsonl]
      sizes: {guided: 1600, tool-rounds: 1600}          # examples drawn from a built-in set (default: DEFAULT_SIZES)

Built-in sets (Builtin):
    bfcl          BFCL's train questions as verified single-turn tool calls (rl/synthesis/tool_data.py); all of them
    guided        @generable types with their schema injected as a session injects it (data/guided.py)
    tool-rounds   tool round trips in a session's transcript format: call once, read the result, answer; answer
                  without a call when no tool fits; answer a follow-up from the result (data/tool_rounds.py)
    made-tool-rounds
                  the same round trips over hundreds of made-up tools (invented lookups and formulas, none in a
                  held-out family's domain: data/made_tools.py), so calling a tool from its description alone is
                  learned rather than the training families' habits
    udhr          multilingual: UDHR translation and answer-in-a-language prompts with the reference text as the
                  answer (rl/multilingual_prompts.py), split by article
    plain-text    passages of the Debian Developer's Reference trained as plain text, every token with a loss
                  (data/passages.py): the anchor that keeps a fine-tune near the base model's text; never the text
                  whose perplexity measures drift; its size sets its share (the pool, 189 passages, repeats past that)
    math-steps    reasoning-gym chain_sum questions (train split of rl/prompts.py) answered with a short chain of
                  thought computed from the expression, one operation a step: "15 - 43 = -28. -28 - 75 = -103.
                  The answer is -103." (correct by construction, unlike sampled chains that only end right)

Single-turn examples become two- or three-message conversations, so one loader (train/adapter_toolkit.py's) renders
every example with the chat template and puts the loss on each assistant turn; plain-text passages go in as text.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from pathlib import Path

from openafm.data.chat import ChatExample, read_chat_jsonl
from openafm.data.conversations import Conversation
from openafm.data.guided import GuidedDataset
from openafm.data.made_tools import made_tool_conversations
from openafm.data.passages import Passage, anchor_passages
from openafm.data.tool_rounds import tool_round_conversations
from openafm.errors import ConfigError
from openafm.rl.multilingual_prompts import udhr_prompts
from openafm.rl.prompts import PromptSource, build_prompts
from openafm.rl.synthesis.tool_data import bfcl_sft_examples
from openafm.splits import Split


class Builtin(str, enum.Enum):
    BFCL = "bfcl"
    GUIDED = "guided"
    TOOL_ROUNDS = "tool-rounds"
    MADE_TOOL_ROUNDS = "made-tool-rounds"
    UDHR = "udhr"
    MATH_STEPS = "math-steps"
    PLAIN_TEXT = "plain-text"


DEFAULT_SIZES = {Builtin.GUIDED: 1000, Builtin.TOOL_ROUNDS: 1000, Builtin.MADE_TOOL_ROUNDS: 1000,
                 Builtin.MATH_STEPS: 500, Builtin.PLAIN_TEXT: 200}
MATH_STEPS_SOURCE = {"dataset": "chain_sum", "config": {"min_terms": 2, "max_terms": 4, "max_digits": 3}, "hint": ""}
SIZED = frozenset(DEFAULT_SIZES)             # the sets drawn by count; bfcl and udhr give all their train items


def is_builtin(ref: str) -> bool:
    return ref in {b.value for b in Builtin}


def check_sizes(sizes: Mapping[str, int], data: Sequence[str], where: str) -> None:
    """Every sizes key names a sized built-in set that `data` uses, with a count >= 1."""
    for name, n in sizes.items():
        if name not in {b.value for b in SIZED}:
            raise ConfigError(f"{where}: sizes.{name}: only {sorted(b.value for b in SIZED)} are drawn by count")
        if name not in data:
            raise ConfigError(f"{where}: sizes.{name} is set but data does not use {name!r}")
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ConfigError(f"{where}: sizes.{name}={n!r} must be an integer >= 1")


def as_conversation(example: ChatExample) -> Conversation:
    """A single-turn example as a conversation (system turn only when the example has one)."""
    return Conversation(tuple(example.messages()), example.where)


def builtin_conversations(name: str, *, n: int | None, seed: int) -> list[Conversation | Passage]:
    """The built-in set `name` (train split): n examples of a sized set (its default when None), all of the others."""
    kind = Builtin(name)
    if kind is Builtin.BFCL:
        return [as_conversation(e) for e in bfcl_sft_examples(split=Split.TRAIN)[0]]
    if kind is Builtin.UDHR:
        return [as_conversation(ChatExample(r.prompt, r.target, r.source)) for r in udhr_prompts(Split.TRAIN)]
    n = DEFAULT_SIZES[kind] if n is None else n
    if kind is Builtin.GUIDED:
        return [as_conversation(e) for e in GuidedDataset(seed, Split.TRAIN, n)]
    if kind is Builtin.MATH_STEPS:
        records = build_prompts(PromptSource.REASONING_GYM, MATH_STEPS_SOURCE, Split.TRAIN, size=n, seed=seed)
        return [as_conversation(ChatExample(r.prompt, math_steps(r.target["metadata"]["expression"]), r.where))
                for r in records]
    if kind is Builtin.MADE_TOOL_ROUNDS:
        return made_tool_conversations(n, seed=seed)
    if kind is Builtin.PLAIN_TEXT:
        return anchor_passages(n, seed=seed)
    return tool_round_conversations(n, seed=seed, split=Split.TRAIN)


def math_steps(expression: str) -> str:
    """A chain of + and - on integers worked left to right, one operation a sentence, ending with the answer."""
    parts = expression.split()
    if len(parts) < 3 or len(parts) % 2 == 0 or any(op not in "+-" for op in parts[1::2]):
        raise ValueError(f"math_steps takes 'a + b - c ...' with integer terms, got {expression!r}")
    total, steps = int(parts[0]), []
    for op, term in zip(parts[1::2], parts[2::2], strict=True):
        new = total + int(term) if op == "+" else total - int(term)
        steps.append(f"{total} {op} {term} = {new}.")
        total = new
    return " ".join(steps) + f" The answer is {total}."


def sft_conversations(data: Sequence[str], sizes: Mapping[str, int], outputs: Mapping[str, dict], *,
                      seed: int) -> tuple[list[Conversation | Passage], dict[str, int]]:
    """Every example the refs name -> (conversations and passages, {ref: how many})."""
    out: list[Conversation | Passage] = []
    counts: dict[str, int] = {}
    for ref in data:
        if is_builtin(ref):
            got = builtin_conversations(ref, n=sizes.get(ref), seed=seed)
        else:
            path = Path(outputs[ref]["data"]) if ref in outputs else Path(ref)
            got = [as_conversation(e) for e in read_chat_jsonl(path)]
        counts[ref] = len(got)
        out += got
    return out, counts
