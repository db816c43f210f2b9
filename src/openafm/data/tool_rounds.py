"""Tool round trips for SFT: seeded conversations in which the model calls the one right tool, reads its result and
answers in plain text from it, answers directly when no tool is relevant, and answers a follow-up from the result
already in the transcript, rendered exactly as an `openafm.fm` session with those tools feeds them to the model.

    convs = tool_round_conversations(1000, seed=0, split=Split.TRAIN)    # Conversations, loss on assistant turns
    cases = tool_round_cases(50, seed=0, split=Split.HELDOUT)            # fresh tools that record their calls
    turns = tool_round_turns(500, seed=0, split=Split.TRAIN)             # one model turn each, with its target (RL)

Each family is a real `fm.Tool` over a small built-in table or arithmetic; its result is a JSON object and its answer
template restates the result's key values as written there. A family's split is `split_of(name, "tool-family")`;
the distractor tools of a conversation come from families of its own split, so held-out tools are never trained on.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import random
from collections.abc import Sequence

import jsonschema

from openafm.data.conversations import Conversation, parse_conversation
from openafm.data.tool_rounds_vocab import ARITHMETIC, FAMILIES, FAMILY_BY_NAME, FOLLOW_UPS, NO_CALL_CHAT, Family
from openafm.fm.generable import generable
from openafm.fm.guide import guide
from openafm.fm.schema import GenerationSchema
from openafm.fm.tool import Tool, tool_spec, tools_prompt
from openafm.splits import Split, split_of

NAMESPACE = "tool-family"


class Kind(str, enum.Enum):
    CALL_THEN_ANSWER = "call-then-answer"   # one call, its result, an answer from it
    NO_CALL = "no-call"                     # tools offered, none relevant: a direct answer
    FOLLOW_UP = "follow-up"                 # a call round, then a second question answered from the transcript
    PARALLEL = "parallel"                   # two calls of one tool in one turn, two results, one answer


KIND_WEIGHTS = {Kind.CALL_THEN_ANSWER: 55, Kind.NO_CALL: 15, Kind.FOLLOW_UP: 20, Kind.PARALLEL: 10}


@dataclasses.dataclass(frozen=True)
class ToolRoundCase:
    """A held-out benchmark item: ask `question` in a session with `tools` (fresh; each records its calls' arguments
    in `.calls`); expect exactly `expected_call` and an answer that contains every one of `result_values`."""
    tools: list[Tool]
    question: str
    expected_call: tuple[str, dict]
    result: str                   # what the tool returns for the expected call
    result_values: tuple[str, ...]
    answer: str                   # a reference answer
    where: str


# ---- families ----------------------------------------------------------------------------------------------------

def families(split: Split | None = None) -> list[Family]:
    """The families of `split` (None: all of them)."""
    return [f for f in FAMILIES if split is None or split_of(f.name, NAMESPACE) is Split(split)]


# ---- tools -------------------------------------------------------------------------------------------------------

class FamilyTool(Tool):
    """A family's tool: answers from the family's table; records each call's arguments in `calls`. An unknown value
    comes back to the model as {"error": ...}, as a real service would answer."""
    family: Family
    schema: GenerationSchema

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[dict] = []

    @property
    def arguments_schema(self) -> GenerationSchema:
        return self.schema

    async def call(self, args) -> str:
        arguments = args.value()
        self.calls.append(arguments)
        try:
            return result_text(self.family.run(arguments))
        except (KeyError, TypeError, ValueError) as e:
            return json.dumps({"error": str(e.args[0]) if e.args else type(e).__name__}, ensure_ascii=False)


def result_text(result: dict) -> str:
    return json.dumps(result, ensure_ascii=False)


@functools.cache
def _tool_class(family: Family) -> type[FamilyTool]:
    title = "".join(w.capitalize() for w in family.name.split("_"))
    namespace = {"__annotations__": {a: kind for a, kind, _, _ in family.args}, "__module__": __name__,
                 "__qualname__": title + "Arguments"}
    namespace.update({a: guide(description, **guides) for a, _, description, guides in family.args})
    schema = generable(type(title + "Arguments", (), namespace)).generation_schema()
    return type(title + "Tool", (FamilyTool,), {"name": family.name, "description": family.description,
                                                "family": family, "schema": schema, "__module__": __name__})


def family_tool(family: Family | str) -> FamilyTool:
    """A fresh tool of a family (its own empty `calls`): a Family (the built-in ones, or made ones:
    data/made_tools.py), or a built-in family's name."""
    if isinstance(family, str):
        if family not in FAMILY_BY_NAME:
            raise ValueError(f"unknown tool family {family!r}; known: {', '.join(FAMILY_BY_NAME)}")
        family = FAMILY_BY_NAME[family]
    return _tool_class(family)()


@functools.cache
def _validator(family: Family) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(tool_spec(family_tool(family))["parameters"])


# ---- rounds and conversations ------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Round:
    """One call of a family's tool: arguments, result, and the question and answer that go with them."""
    family: Family
    arguments: dict
    result: dict
    question: str
    answer: str

    def call(self) -> dict:
        return {"name": self.family.name, "arguments": self.arguments}

    def values(self) -> tuple[str, ...]:
        return tuple(str(self.result[k]) for k in self.family.keys)


def _draw_round(r: random.Random, family: Family, avoid: dict | None = None) -> _Round:
    """A call with valid arguments (different from `avoid`), its result, a question and a grounded answer; raises
    RuntimeError on a family whose draw or templates are wrong."""
    arguments = family.draw(r)
    while arguments == avoid:
        arguments = family.draw(r)
    errors = [e.message for e in _validator(family).iter_errors(arguments)]
    if errors or list(arguments) != [a[0] for a in family.args]:
        raise RuntimeError(f"{family.name}: drawn arguments {arguments} do not fit its schema: {errors}")
    result = family.run(arguments)
    fields = {**arguments, **result}
    answer = family.answer.format_map(fields)
    missing = [k for k in family.keys if str(result[k]) not in answer]
    if missing:
        raise RuntimeError(f"{family.name}: answer {answer!r} lacks result value(s) {missing}")
    return _Round(family, arguments, result, r.choice(family.questions).format_map(fields), answer)


def _toolset(r: random.Random, family: Family, pool: Sequence[Family]) -> list[FamilyTool]:
    """The family's tool and 1-3 distractors from `pool` (its split), no two of one topic, shuffled."""
    topic = (lambda f: f.topic or f.name)
    others = [f for f in pool if topic(f) != topic(family)]
    k = min(len(others), r.randint(1, 3), len({topic(f) for f in others}))
    distractors = r.sample(others, k)
    while len({topic(f) for f in distractors}) < k:          # redrawn until the topics differ (built-ins always do)
        distractors = r.sample(others, k)
    chosen = [family, *distractors]
    r.shuffle(chosen)
    return [family_tool(f) for f in chosen]


def _follow_up(r: random.Random, rnd: _Round) -> tuple[str, str]:
    """A second question about the result in the transcript, and its answer (no new call needed)."""
    if rnd.family.compare is not None and r.random() < 0.4:
        key, unit = rnd.family.compare
        v = rnd.result[key]
        x = float(f"{v * r.choice([0.5, 0.8, 1.25, 1.6]):.2g}")
        x = int(x) if x == int(x) else x
        x = x + 1 if x == v else x
        verdict = "Yes, {v}{u} is more than {x}{u}." if v > x else "No, {v}{u} is not more than {x}{u}."
        return f"Is that more than {x}{unit}?", verdict.format(v=v, x=x, u=unit)
    question, answer = r.choice(FOLLOW_UPS)
    fields = {"brief": rnd.family.brief.format_map({**rnd.arguments, **rnd.result}), "answer": rnd.answer,
              "result": result_text(rnd.result), "tool": rnd.family.name}
    return question.format_map(fields), answer.format_map(fields)


def _no_call(r: random.Random) -> tuple[str, str]:
    if r.random() < 0.5:
        return r.choice(NO_CALL_CHAT)
    question, answer, op = r.choice(ARITHMETIC)
    a, b = sorted((r.randint(2, 99), r.randint(2, 99)), reverse=True)
    return question.format(a=a, b=b), answer.format(a=a, b=b, c=op(a, b))


def _turns(r: random.Random, kind: Kind, family: Family, pool: Sequence[Family]) -> list[dict]:
    """The toolkit turns of one conversation (tool calls as "tool_calls"; conversations.py writes them out)."""
    tools = _toolset(r, family, pool)
    turns = [{"role": "system", "content": tools_prompt(tools)}]
    if kind is Kind.NO_CALL:
        question, answer = _no_call(r)
        return [*turns, {"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    rounds = [_draw_round(r, family)]
    if kind is Kind.PARALLEL:
        rounds.append(_draw_round(r, family, avoid=rounds[0].arguments))
    question = rounds[0].question + "".join(" Also, " + x.question[0].lower() + x.question[1:] for x in rounds[1:])
    turns += [{"role": "user", "content": question}, {"role": "assistant", "tool_calls": [x.call() for x in rounds]}]
    turns += [{"role": "tool", "content": result_text(x.result)} for x in rounds]
    turns.append({"role": "assistant", "content": " ".join(x.answer for x in rounds)})
    if kind is Kind.FOLLOW_UP:
        question, answer = _follow_up(r, rounds[0])
        turns += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    return turns


def _check_n(n: int) -> None:
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n={n!r} must be an int >= 1")


def _check_draw(pool: Sequence[Family], n: int) -> None:
    """A draw of n items from `pool`: n an int >= 1, and a tool and a distractor to offer."""
    _check_n(n)
    if len(pool) < 2:
        raise ValueError(f"a pool of {len(pool)} tool families: a round needs its tool and a distractor")


def _checked(n: int, split, kinds) -> tuple[Split, list[Kind]]:
    _check_n(n)
    if split not in [s.value for s in Split]:
        raise ValueError(f"split={split!r} is not one of {[s.value for s in Split]}")
    accepted = [k.value for k in Kind]
    bad = [k for k in (kinds or []) if k not in accepted]
    if bad or (kinds is not None and not kinds):
        raise ValueError(f"kinds={kinds!r}: unknown or none; choose from {accepted}")
    return Split(split), [Kind(k) for k in kinds] if kinds else list(Kind)


def tool_round_conversations(n: int, *, seed: int, split: Split,
                             kinds: Sequence[Kind] | None = None) -> list[Conversation]:
    """n conversations of `split`'s tool families (kinds drawn by KIND_WEIGHTS, among `kinds` if given); conversation
    i is a function of (seed, split, i) alone."""
    split, kinds = _checked(n, split, kinds)
    return pool_conversations(families(split), n, stream=f"tool-rounds:{seed}:{split.value}",
                              where=f"tool-rounds {split.value} seed {seed}", kinds=kinds)


def pool_conversations(pool: Sequence[Family], n: int, *, stream: str, where: str,
                       kinds: Sequence[Kind] = tuple(Kind)) -> list[Conversation]:
    """n conversations over the families of `pool` (each conversation's distractor tools from the same pool);
    conversation i is a function of (pool, stream, i) alone."""
    _check_draw(pool, n)
    kinds = [Kind(k) for k in kinds]
    out = []
    for i in range(n):
        r = random.Random(f"{stream}:{i}")
        kind = r.choices(kinds, weights=[KIND_WEIGHTS[k] for k in kinds])[0]
        family = r.choice(pool)
        out.append(parse_conversation(_turns(r, kind, family, pool), f"{where} #{i} {family.name} {kind.value}"))
    return out


def tool_round_cases(n: int, *, seed: int, split: Split) -> list[ToolRoundCase]:
    """n benchmark cases of `split` (one call each, with fresh tools: the family's and 1-3 distractors)."""
    split, _ = _checked(n, split, None)
    return pool_cases(families(split), n, stream=f"tool-round-cases:{seed}:{split.value}",
                      where=f"tool-round-cases {split.value} seed {seed}")


def pool_cases(pool: Sequence[Family], n: int, *, stream: str, where: str) -> list[ToolRoundCase]:
    """n benchmark cases over the families of `pool`; case i is a function of (pool, stream, i) alone."""
    _check_draw(pool, n)
    out = []
    for i in range(n):
        r = random.Random(f"{stream}:{i}")
        family = r.choice(pool)
        tools = _toolset(r, family, pool)
        rnd = _draw_round(r, family)
        out.append(ToolRoundCase(tools, rnd.question, (family.name, rnd.arguments), result_text(rnd.result),
                                 rnd.values(), rnd.answer, f"{where} #{i} {family.name}"))
    return out


# ---- single turns (RL prompts) -----------------------------------------------------------------------------------

class Turn(str, enum.Enum):
    CALL = "call"        # the question with the tools offered: the one right call, or no call when no tool fits
    ANSWER = "answer"    # the transcript through the tool's result: an answer that holds every result value


@dataclasses.dataclass(frozen=True)
class TurnPrompt:
    """One model turn of a tool round, to be sampled and scored on its own: `messages` (rendered as a session feeds
    them: the tools prompt, the question, and for ANSWER the call and its result) come before the generation prompt.
    Target: CALL {"calls": [{"name", "arguments"}]} ([] when no tool fits); ANSWER {"values": [result values]}.
    `reference` is the turn the SFT data has there (the call written out, or the answer)."""
    messages: tuple[dict, ...]
    turn: Turn
    target: dict
    reference: str
    where: str


def tool_round_turns(n: int, *, seed: int, split: Split, turns: Sequence[Turn] = tuple(Turn)) -> list[TurnPrompt]:
    """n single turns of `split`'s tool families, cut from conversations rendered as the SFT ones are (`_turns`);
    prompt i is a function of (seed, split, i, turns) alone. A call turn is a no-call one (no tool fits) with the
    weight NO_CALL has beside CALL_THEN_ANSWER among the SFT kinds."""
    split, _ = _checked(n, split, None)
    turns = [Turn(t) for t in turns]
    if not turns:
        raise ValueError(f"turns={turns!r}: name at least one of {[t.value for t in Turn]}")
    pool = families(split)
    no_call = KIND_WEIGHTS[Kind.NO_CALL] / (KIND_WEIGHTS[Kind.NO_CALL] + KIND_WEIGHTS[Kind.CALL_THEN_ANSWER])
    out = []
    for i in range(n):
        r = random.Random(f"tool-round-turns:{seed}:{split.value}:{i}")
        turn, family = r.choice(turns), r.choice(pool)
        kind = Kind.NO_CALL if turn is Turn.CALL and r.random() < no_call else Kind.CALL_THEN_ANSWER
        where = f"tool-round-turns {split.value} seed {seed} #{i} {family.name} {turn.value}"
        drawn = _turns(r, kind, family, pool)      # system, user, assistant[, tool, assistant]
        messages = parse_conversation(drawn, where).messages
        if kind is Kind.NO_CALL:
            out.append(TurnPrompt(messages[:2], turn, {"calls": []}, messages[2]["content"], where + " no-call"))
        elif turn is Turn.CALL:
            out.append(TurnPrompt(messages[:2], turn, {"calls": drawn[2]["tool_calls"]}, messages[2]["content"], where))
        else:
            result = json.loads(drawn[3]["content"])
            out.append(TurnPrompt(messages[:4], turn, {"values": [str(result[k]) for k in family.keys]},
                                  messages[4]["content"], where))
    return out


def missing_values(values: Sequence[str], answer: str) -> list[str]:
    """The result values an answer does not hold (case-insensitive): what "grounded in the result" checks."""
    return [v for v in values if v.lower() not in answer.lower()]
