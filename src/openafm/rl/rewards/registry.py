"""Rewards and verifiers: a registry from name to reward function, each prompt set of RL or rejection sampling
naming its own. A reward function maps (prompt, response, target) -> float, where the target is what the prompt
set stores beside each prompt (a reference answer, a list of constraints, an expected tool call, a reasoning-gym
entry). Nothing here knows about batching, devices or scheduling, so the synchronous loop and the asynchronous RL
system call the same functions.

    reward = make_reward("math")                          # 1.0 when the extracted answer equals the target
    reward("What is 6 x 7?", "6 x 7 = 42. Answer: 42", "42")   # -> 1.0

    name            target                       reward
    math            the reference answer (str)   1.0 if the answer after the last marker ("Answer:" by default;
                                                 else the last \\boxed{...}) equals it, numerically when both
                                                 parse as numbers (1,000 = 1000.0 = 2000/2), else as normalised
                                                 text; 0.0 otherwise, also when no answer is marked
    instructions    constraints (data/instructions.Constraint or their dicts)
                                                 the fraction of constraints followed (level: loose or strict;
                                                 aggregate: fraction or all -> 1.0 / 0.0)
    reasoning-gym   a reasoning-gym entry        the dataset's own scorer on the extracted answer (0.0 .. 1.0)
                    (math and reasoning-gym take extract=last-number: the last number in the response instead
                    of a marked answer, lm-eval's "flexible extract", for models that answer in prose)
    chrf            the reference text (str)     chrF (character n-gram F-score, sacrebleu's, n=6, beta=2) of the
                                                 response against the reference, scaled to 0.0 .. 1.0 (translation,
                                                 answers in a given language: rl/multilingual_prompts.py)
    tool-call       whatever `checker` reads     1.0 if checker(response, target) else 0.0; the checker is passed
                                                 in (the BFCL AST match lives with the evaluation code)
    reward-model    ignored                      scorer(prompt, response): a trained reward model's score
    tool-round      {"turn": "call", "calls":    call: 1.0 when the response is exactly the expected calls (the
                     [{"name", "arguments"}]}    framework's <tool_call>[...]</tool_call>, nothing around it, JSON
                    or {"turn": "answer",        equal), or for calls [] a plain answer with no call; answer: the
                     "values": [str]}            fraction of the values the answer holds (case-insensitive, as the
                                                 default-model benchmark checks them), 0.0 if it calls a tool again
    guided          {"schema": JSON Schema,      1.0 when the response is JSON valid for the schema with no degenerate
                     "counts": [[field, n]]}     fill (eval/guided_quality: empty strings, repeats, an asked count
                                                 missed, blank keys); 0.5 valid but degenerate; 0.0 otherwise
"""

from __future__ import annotations

import enum
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import jsonschema
from sacrebleu.metrics import CHRF

from openafm.data.instructions import Constraint, check
from openafm.data.tool_rounds import missing_values
from openafm.errors import ConfigError, OpenAFMError
from openafm.eval.guided_quality import degeneracies
from openafm.fm.tool import CALL_CLOSE, CALL_OPEN

RewardFn = Callable[[str, str, Any], float]          # (prompt, response, target) -> reward

DEFAULT_MARKER = "Answer:"


class UnknownRewardError(OpenAFMError, KeyError):
    def __init__(self, name: str, known: Sequence[str]):
        self.name, self.known = name, list(known)
        super().__init__(name)

    def __str__(self) -> str:
        return f"unknown reward {self.name!r}; known rewards: {', '.join(self.known)}"


# --- math answers ------------------------------------------------------------------------------------------------

def _boxed(text: str) -> str | None:
    """The content of the last \\boxed{...}, braces balanced."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 0, start + len("\\boxed{") - 1
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i + 1:j]
    return None


def extract_answer(response: str, marker: str = DEFAULT_MARKER) -> str | None:
    """The answer a response gives: the rest of the line after the last `marker` (case-insensitive), else the
    last \\boxed{...}; None when there is neither."""
    at = response.lower().rfind(marker.lower())
    if at >= 0:
        line = response[at + len(marker):].strip().split("\n", 1)[0].strip()
        return _boxed(line) or line or None
    return _boxed(response)


class Extract(str, enum.Enum):
    MARKER = "marker"              # the answer after the last marker (else the last \\boxed{...})
    LAST_NUMBER = "last-number"    # the last number anywhere in the response ("The answer is -41." -> "-41")


LAST_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?")


def extracted(response: str, extract: Extract | str, marker: str) -> str | None:
    """The response's answer under the extraction kind (None: it gives none)."""
    if Extract(extract) is Extract.MARKER:
        return extract_answer(response, marker)
    found = LAST_NUMBER.findall(response)
    return found[-1].replace(",", "") if found else None


def _number(text: str) -> Fraction | None:
    t = text.strip().replace(",", "").replace("$", "").replace(" ", "").rstrip(".")
    t = re.sub(r"^\\frac\{(-?\d+)\}\{(-?\d+)\}$", r"\1/\2", t)
    t = t.removesuffix("%")
    try:
        return Fraction(t)
    except (ValueError, ZeroDivisionError):
        return None


def normalise_answer(text: str) -> str:
    t = text.strip().strip("$").rstrip(".").strip()
    t = re.sub(r"^\\text\{(.*)\}$", r"\1", t)
    return re.sub(r"\s+", " ", t).lower()


def answers_match(given: str, reference: str, *, tolerance: float = 1e-6) -> bool:
    """Numerically when both are numbers (relative tolerance), else as normalised text."""
    a, b = _number(given), _number(reference)
    if a is not None and b is not None:
        return math.isclose(float(a), float(b), rel_tol=tolerance, abs_tol=tolerance)
    return normalise_answer(given) == normalise_answer(reference)


def math_reward(*, marker: str = DEFAULT_MARKER, tolerance: float = 1e-6, extract: Extract | str = Extract.MARKER
                ) -> RewardFn:
    extract = Extract(extract)

    def reward(prompt: str, response: str, target: Any) -> float:
        answer = extracted(response, extract, marker)
        return float(answer is not None and answers_match(answer, str(target), tolerance=tolerance))
    return reward


# --- instruction following ---------------------------------------------------------------------------------------

class Level(str, enum.Enum):
    STRICT = "strict"
    LOOSE = "loose"          # IFEval's relaxations (data/instructions.loose_variants)


class Aggregate(str, enum.Enum):
    FRACTION = "fraction"    # the fraction of constraints followed (a denser signal for RL)
    ALL = "all"              # 1.0 when every constraint is followed (IFEval's prompt-level accuracy)


def constraints_of(target: Any) -> list[Constraint]:
    if not isinstance(target, Sequence) or not target:
        raise ValueError(f"the instructions reward needs a non-empty list of constraints as target, got {target!r}")
    return [c if isinstance(c, Constraint) else Constraint.from_dict(c) for c in target]


def instructions_reward(*, level: Level | str = Level.LOOSE, aggregate: Aggregate | str = Aggregate.FRACTION
                        ) -> RewardFn:
    level, aggregate = Level(level), Aggregate(aggregate)

    def reward(prompt: str, response: str, target: Any) -> float:
        verdict = check(constraints_of(target), response)
        followed = verdict.loose if level is Level.LOOSE else verdict.strict
        return float(all(followed)) if aggregate is Aggregate.ALL else sum(followed) / len(followed)
    return reward


# --- reference texts ----------------------------------------------------------------------------------------------

def chrf_reward(*, word_order: int = 0) -> RewardFn:
    """chrF (word_order=0) or chrF++ (word_order=2) of the response against the target text, in 0.0 .. 1.0."""
    metric = CHRF(word_order=word_order)

    def reward(prompt: str, response: str, target: Any) -> float:
        if not isinstance(target, str) or not target:
            raise ValueError(f"the chrf reward needs the reference text as target, got {target!r}")
        return metric.sentence_score(response.strip(), [target]).score / 100.0
    return reward


# --- reasoning-gym, tool calls, a reward model -------------------------------------------------------------------

def reasoning_gym_reward(*, marker: str = DEFAULT_MARKER, extract: Extract | str = Extract.MARKER) -> RewardFn:
    from reasoning_gym import get_score_answer_fn  # heavy optional import (loads every dataset module)

    extract = Extract(extract)

    def reward(prompt: str, response: str, target: Any) -> float:
        if not isinstance(target, Mapping) or "metadata" not in target:
            raise ValueError(f"the reasoning-gym reward needs a reasoning-gym entry as target, got {target!r}")
        answer = extracted(response, extract, marker)
        if answer is None:
            return 0.0
        score = get_score_answer_fn(target["metadata"]["source_dataset"])
        return float(score(answer, target))
    return reward


def tool_call_reward(*, checker: Callable[[str, Any], bool] | None = None) -> RewardFn:
    if checker is None:
        raise ConfigError("the tool-call reward needs checker=callable(response, target) -> bool (e.g. the BFCL "
                          "AST match); none was given")

    def reward(prompt: str, response: str, target: Any) -> float:
        return float(bool(checker(response, target)))
    return reward


def reward_model_reward(*, scorer: Callable[[str, str], float] | None = None) -> RewardFn:
    if scorer is None:
        raise ConfigError("the reward-model reward needs scorer=callable(prompt, response) -> float (a trained "
                          "reward model's score); none was given")

    def reward(prompt: str, response: str, target: Any) -> float:
        return float(scorer(prompt, response))
    return reward


def guided_reward(*, degenerate: float = 0.5) -> RewardFn:
    """Schema validity plus real content (a @generable request answered with JSON)."""
    def reward(prompt: str, response: str, target: Any) -> float:
        if not isinstance(target, Mapping) or not isinstance(target.get("schema"), Mapping):
            raise ValueError(f"the guided reward needs {{'schema': ..., 'counts': [...]}} as target, got {target!r}")
        try:
            value = json.loads(response)
            jsonschema.validate(value, target["schema"])
        except (ValueError, jsonschema.ValidationError):
            return 0.0
        counts = [tuple(c) for c in target.get("counts", ())]
        return degenerate if degeneracies(value, dict(target["schema"]), counts=counts) else 1.0
    return reward


def _calls_in(response: str) -> list | None:
    """The calls of a response that is one <tool_call>[...]</tool_call> and nothing else; None otherwise."""
    text = response.strip()
    if not (text.startswith(CALL_OPEN) and text.endswith(CALL_CLOSE)):
        return None
    try:
        calls = json.loads(text[len(CALL_OPEN):-len(CALL_CLOSE)])
    except ValueError:
        return None
    return calls if isinstance(calls, list) else None


def tool_round_reward() -> RewardFn:
    """One turn of a tool round (rl/prompts.py's tool-rounds source): the right call, or an answer from the result."""
    def reward(prompt: str, response: str, target: Any) -> float:
        turn = target.get("turn") if isinstance(target, Mapping) else None
        if turn == "call" and isinstance(target.get("calls"), list):
            if not target["calls"]:
                return float(CALL_OPEN not in response and bool(response.strip()))
            return float(_calls_in(response) == target["calls"])
        if turn == "answer" and isinstance(target.get("values"), list) and target["values"]:
            if CALL_OPEN in response:
                return 0.0
            values = [str(v) for v in target["values"]]
            return 1.0 - len(missing_values(values, response)) / len(values)
        raise ValueError(f"the tool-round reward needs {{'turn': 'call', 'calls': [...]}} or {{'turn': 'answer', "
                         f"'values': [...]}} as target, got {target!r}")
    return reward


REWARDS: dict[str, Callable[..., RewardFn]] = {
    "math": math_reward,
    "instructions": instructions_reward,
    "reasoning-gym": reasoning_gym_reward,
    "chrf": chrf_reward,
    "tool-call": tool_call_reward,
    "reward-model": reward_model_reward,
    "guided": guided_reward,
    "tool-round": tool_round_reward,
}


def make_reward(name: str, **options: Any) -> RewardFn:
    """The reward function registered as `name`, built with `options` (an unknown option raises TypeError)."""
    if name not in REWARDS:
        raise UnknownRewardError(name, sorted(REWARDS))
    return REWARDS[name](**options)
