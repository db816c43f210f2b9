"""The verified sources of graded prompt groups (rl/preference/pairs.py): math, instructions, tool-call.

    groups, skipped = build_groups(["math", "tool-call"], n=100, heldout=25, seed=0)

    math          reasoning-gym chain_sum and basic_arithmetic problems (2..3 terms of 1..2 digits); responses
                  worked step by step from the expression (each operation "a op b = c"), the wrong one with one
                  slip (a wrong step propagated, or a correct working with a wrongly copied final answer). Graded by
                  the `math` reward (marked answer = reference): correct 1.0 (and 1.0 by reasoning-gym's own
                  scorer too); unmarked and wrong 0.0, the unmarked one ending in the answer, the wrong one marked.
                  Split by question text (openafm.splits.split_of(question, "prompt"): the rule the RL prompt
                  sets use, so no pool trains on a held-out question); each split draws from its own seed.
    instructions  data/instructions prompts with 2..3 constraints; rl/preference/instruction_responses builds and
                  grades the responses. Split by prompt text, as for math.
    tool-call     BFCL simple_python and multiple questions with one ground-truth call; the exact call (the first
                  acceptable value of each argument), one argument changed, another function (listed when the
                  question has several, else one from another question). Graded by the BFCL AST match
                  (eval/bfcl_data.question_correct: 1.0 exact, else 0.0) and the call's function name. Split by
                  question id, BFCL's own split (eval/bfcl_data.split_of), the one SFT, RL and the eval tasks use.

A response is kept only when its checker confirms its grade; a builder that produces a response its checker does
not confirm raises GradeMismatchError (a bug, never data). Prompts a builder cannot grade three ways are skipped
and counted.
"""

from __future__ import annotations

import ast
import hashlib
import json
import operator
import random
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction

from openafm.data.instructions import TOPICS, instruction_prompts
from openafm.eval.bfcl_data import load_category, package_info, parse_calls_leniently, question_correct
from openafm.eval.bfcl_data import split_of as bfcl_split_of
from openafm.rl.preference.instruction_responses import build_instruction_responses
from openafm.rl.preference.pairs import GradedResponse, GradeMismatchError, PromptGroup, Source
from openafm.rl.rewards.registry import answers_match, extract_answer, make_reward
from openafm.splits import Split, split_of

HELDOUT_SEED_OFFSET = 10_000
MATH_DATASETS = ("chain_sum", "basic_arithmetic")
MATH_CONFIG = dict(min_terms=2, max_terms=3, min_digits=1, max_digits=2)     # short, checkable working
MAX_WORDS = 80          # an instruction group with a longer response is skipped (keeps sequences short)


def build_groups(sources: Sequence[str], n: int, *, heldout: int | None = None, seed: int = 0
                 ) -> tuple[list[PromptGroup], dict[str, int]]:
    """n train and `heldout` (default max(1, n // 4)) held-out prompt groups per source -> (groups, skipped:
    'source: why' -> count)."""
    heldout = max(1, n // 4) if heldout is None else heldout
    if n < 1 or heldout < 0:
        raise ValueError(f"build_groups needs n >= 1 and heldout >= 0, got n={n}, heldout={heldout}")
    groups: list[PromptGroup] = []
    skipped: Counter = Counter()
    for name in sources:
        try:
            source = Source(name)
        except ValueError:
            raise ValueError(f"unknown pair source {name!r}; accepted: {[s.value for s in Source]}") from None
        build = {Source.MATH: math_groups, Source.INSTRUCTIONS: instruction_groups,
                 Source.TOOL_CALL: tool_call_groups}[source]
        groups += build(n, heldout, seed, skipped)
    return groups, dict(skipped)


# --- math --------------------------------------------------------------------------------------------------------

_OPS = {ast.Add: ("+", operator.add), ast.Sub: ("-", operator.sub), ast.Mult: ("*", operator.mul),
        ast.Div: ("/", operator.truediv)}


def worked(expression: str, slip_at: int = -1, delta: int = 0) -> tuple[Fraction, list[str]]:
    """Evaluate `expression` operation by operation -> (value, steps "a op b = c"); the slip_at-th operation's
    result is off by delta (and everything after uses the wrong value)."""
    steps: list[str] = []

    def ev(node) -> Fraction:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return Fraction(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            a, b = ev(node.left), ev(node.right)
            sym, fn = _OPS[type(node.op)]
            value = fn(a, b) + (delta if len(steps) == slip_at else 0)
            steps.append(f"{_fmt(a)} {sym} {_fmt(b)} = {_fmt(value)}")
            return value
        raise ValueError(f"unsupported expression part {ast.dump(node)} in {expression!r}")

    return ev(ast.parse(expression, mode="eval").body), steps


def _fmt(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else str(float(x))


def _math_responses(entry: dict, rng: random.Random) -> list[GradedResponse] | None:
    expression, answer = entry["metadata"]["expression"], entry["answer"]
    value, steps = worked(expression)
    if value.denominator != 1 or not answers_match(_fmt(value), answer):
        return None
    intro = rng.choice(["", "Step by step: ", "Working it out: ", "Let me compute. "])
    body = intro + ", then ".join(steps)
    right = GradedResponse(f"{body}.\nAnswer: {answer}", 2, "correct, with the answer marked", 0.0)
    plain = GradedResponse(f"{body}. So the result is {answer}.", 1, "correct, but no 'Answer:' line", 0.0)
    delta = rng.choice([-10, -2, -1, 1, 2, 10])
    if rng.random() < 0.5 or len(steps) == 1:
        at = rng.randrange(len(steps))
        wrong_value, wrong_steps = worked(expression, at, delta)
        wrong = GradedResponse(f"{intro}{', then '.join(wrong_steps)}.\nAnswer: {_fmt(wrong_value)}", 0,
                               f"a slip in step {at + 1} ({wrong_steps[at]}) carried to a wrong answer", 0.0)
    else:
        wrong_value = value + delta
        wrong = GradedResponse(f"{body}.\nAnswer: {_fmt(wrong_value)}", 0,
                               f"correct working but the answer copied as {_fmt(wrong_value)}", 0.0)
    if wrong_value == value:
        return None
    return [right, plain, wrong]


def _confirm_math(entry: dict, responses: list[GradedResponse], scorer) -> list[GradedResponse]:
    """The verifier value is the `math` reward (the marked answer equals the reference: 1.0 / 0.0); a grade-2
    response must also score 1.0 by reasoning-gym's own scorer."""
    math = make_reward("math")
    out = []
    for r in responses:
        v = math(entry["question"], r.text, entry["answer"])
        marked = extract_answer(r.text) is not None
        ok = {2: v == 1.0 and scorer(entry["question"], r.text, entry) == 1.0,
              1: v == 0.0 and not marked and r.text.rstrip(".").endswith(entry["answer"]),
              0: v == 0.0 and marked}[r.grade]
        if not ok:
            raise GradeMismatchError(f"math response {r.text!r} (grade {r.grade}) scored {v} for answer "
                                     f"{entry['answer']!r}")
        out.append(GradedResponse(r.text, r.grade, r.reason, v))
    return out


def math_groups(n: int, heldout: int, seed: int, skipped: Counter) -> list[PromptGroup]:
    import reasoning_gym  # heavy optional import (loads every dataset module)

    scorer = make_reward("reasoning-gym")
    out: list[PromptGroup] = []
    seen: set[str] = set()
    for split, count, s in ((Split.TRAIN, n, seed), (Split.HELDOUT, heldout, seed + HELDOUT_SEED_OFFSET)):
        rng = random.Random(s)
        per = {name: reasoning_gym.create_dataset(name, size=16 * count + 32, seed=s, **MATH_CONFIG)
               for name in MATH_DATASETS}
        kept, i = 0, 0
        while kept < count and i < len(MATH_DATASETS) * (16 * count + 32):
            name = MATH_DATASETS[i % len(MATH_DATASETS)]
            entry = per[name][i // len(MATH_DATASETS)]
            i += 1
            if split_of(entry["question"], "prompt") is not split or entry["question"] in seen:
                continue                     # the other split's question (openafm.splits), or a repeat
            responses = _math_responses(entry, rng)
            if responses is None:
                skipped["math: not an integer expression"] += 1
                continue
            seen.add(entry["question"])
            out.append(PromptGroup(Source.MATH, f"math {name} seed {s} #{entry['metadata']['source_index']}", split,
                                   entry["question"], tuple(_confirm_math(entry, responses, scorer))))
            kept += 1
    return out


# --- instructions ------------------------------------------------------------------------------------------------

def instruction_groups(n: int, heldout: int, seed: int, skipped: Counter) -> list[PromptGroup]:
    out: list[PromptGroup] = []
    seen: set[str] = set()
    for split, count, s in ((Split.TRAIN, n, seed), (Split.HELDOUT, heldout, seed + HELDOUT_SEED_OFFSET)):
        rng = random.Random(s)
        kept = 0
        for p in instruction_prompts(80 * count + 80, seed=s):
            if kept == count:
                break
            if split_of(p.prompt, "prompt") is not split or p.prompt in seen:
                continue                     # the other split's prompt (openafm.splits), or a repeat
            if len(p.constraints) < 2:
                skipped["instructions: fewer than 2 constraints"] += 1
                continue
            topic = next(t for t in TOPICS if t in p.task)
            responses = build_instruction_responses(p, topic, rng)
            if responses is None:
                skipped["instructions: no response of some grade"] += 1
                continue
            if max(len(r.text.split()) for r in responses) > MAX_WORDS:
                skipped[f"instructions: a response over {MAX_WORDS} words"] += 1
                continue
            seen.add(p.prompt)
            out.append(PromptGroup(Source.INSTRUCTIONS, p.where, split, p.prompt, tuple(responses)))
            kept += 1
    return out


# --- tool calls --------------------------------------------------------------------------------------------------

def tool_prompt(question: str, functions: list[dict]) -> str:
    lines = []
    for f in functions:
        props = f["parameters"].get("properties", {})
        required = set(f["parameters"].get("required", []))
        params = ", ".join(f"{k}: {v.get('type', 'any')}" + ("" if k in required else " = optional")
                           for k, v in props.items())
        lines.append(f"- {f['name']}({params}): {f.get('description', '')[:60]}")
    return f"{question}\n\nCall one of these functions:\n" + "\n".join(lines)


def call_text(name: str, arguments: dict) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


_STRINGS = ["London", "blue", "2019", "metric", "north", "none given"]
_DEFAULTS = {"integer": 1, "float": 1.0, "number": 1.0, "string": "example", "boolean": True, "array": [],
             "dict": {}, "tuple": []}


def _perturbed(value, rng: random.Random):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + rng.choice([1, 2, 7])
    if isinstance(value, float):
        return value * 2 + 1
    if isinstance(value, str):
        return rng.choice([s for s in _STRINGS if s.lower() != value.strip().lower()])
    if isinstance(value, list) and value:
        return value[:-1] if len(value) > 1 else value * 2
    return None


def _tool_responses(q: dict, pool: list[dict], rng: random.Random) -> list[GradedResponse] | None:
    (name, expected), = q["ground_truth"][0].items()
    exact = {}
    for param, values in expected.items():
        given = [v for v in values if v != ""]
        if given:
            exact[param] = given[0]
    truth, functions = q["ground_truth"], q["functions"]
    if not question_correct([{"name": name, "arguments": exact}], truth, functions):
        return None
    wrong_args = None
    for param in rng.sample(sorted(exact), len(exact)):
        changed = _perturbed(exact[param], rng)
        args = {**exact, param: changed}
        if changed is not None and not question_correct([{"name": name, "arguments": args}], truth, functions):
            wrong_args = (args, f"{param}={changed!r} where the question gives {exact[param]!r}")
            break
    if wrong_args is None:
        return None
    others = [f for f in functions if f["name"] != name]
    listed = bool(others)
    other = rng.choice(others) if listed else rng.choice([f for e in pool for f in e["functions"] if f["name"] != name])
    props = other["parameters"].get("properties", {})
    other_args = {p: exact.get(p, _DEFAULTS.get(props.get(p, {}).get("type"), "example"))
                  for p in other["parameters"].get("required", [])}
    return [GradedResponse(call_text(name, exact), 2, f"calls {name} with the question's arguments", 0.0),
            GradedResponse(call_text(name, wrong_args[0]), 1, f"calls {name} but {wrong_args[1]}", 0.0),
            GradedResponse(call_text(other["name"], other_args), 0,
                           f"calls {other['name']} ({'listed' if listed else 'not listed'}) instead of {name}", 0.0)]


def _confirm_tool(q: dict, responses: list[GradedResponse], reward) -> list[GradedResponse]:
    (name, _), = q["ground_truth"][0].items()
    out = []
    for r in responses:
        v = reward(q["question"], r.text, q)
        calls = parse_calls_leniently(r.text)
        same_name = len(calls) == 1 and calls[0]["name"] == name
        ok = {2: v == 1.0, 1: v == 0.0 and same_name, 0: v == 0.0 and not same_name}[r.grade]
        if not ok:
            raise GradeMismatchError(f"{q['id']}: tool-call response {r.text!r} (grade {r.grade}) got reward {v}")
        out.append(GradedResponse(r.text, r.grade, r.reason, v))
    return out


def bfcl_checker(response: str, target: dict) -> bool:
    return question_correct(parse_calls_leniently(response), target["ground_truth"], target["functions"])


def tool_call_groups(n: int, heldout: int, seed: int, skipped: Counter) -> list[PromptGroup]:
    _, data = package_info("reward pairs: tool-call")
    questions = [q for c in ("simple_python", "multiple") for q in load_category(data, c)]
    single = [q for q in questions if len(q["ground_truth"]) == 1]
    skipped["tool-call: more than one ground-truth call"] += len(questions) - len(single)
    reward = make_reward("tool-call", checker=bfcl_checker)
    rng = random.Random(seed)
    order = sorted(single, key=lambda q: hashlib.sha256(f"{seed}:{q['id']}".encode()).hexdigest())
    out: list[PromptGroup] = []
    want = {Split.TRAIN: n, Split.HELDOUT: heldout}
    for q in order:
        split = bfcl_split_of(q["id"])
        if want[split] == 0:
            continue
        responses = _tool_responses(q, single, rng)
        if responses is None:
            skipped["tool-call: no exact call or no argument to change"] += 1
            continue
        out.append(PromptGroup(Source.TOOL_CALL, q["id"], split, tool_prompt(q["question"], q["functions"]),
                               tuple(_confirm_tool(q, responses, reward))))
        want[split] -= 1
        if not any(want.values()):
            break
    return out
