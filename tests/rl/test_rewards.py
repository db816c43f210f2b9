"""The reward registry: math answer extraction and matching, instruction rewards against the checkers' verdicts,
reasoning-gym's own scorer, checker-backed tool calls and reward models, and the typed error for unknown names."""

from __future__ import annotations

import pytest
import reasoning_gym

from openafm.data.guided import guided_example
from openafm.data.instructions import Constraint, Kind, Relation, instruction_prompts
from openafm.errors import ConfigError
from openafm.rl.rewards.registry import (
    REWARDS,
    UnknownRewardError,
    answers_match,
    extract_answer,
    extracted,
    make_reward,
)
from openafm.rl.prompts import PromptSource, build_prompts
from openafm.splits import Split


@pytest.mark.parametrize("response, answer", [
    ("6 x 7 = 42.\nAnswer: 42", "42"),
    ("answer: 3/4 and more text\nnext line", "3/4 and more text"),
    ("Answer: 1\nwait, Answer: \\boxed{-2.5}", "-2.5"),                  # the last marker counts
    ("so the total is \\boxed{\\frac{1}{2}} dollars", "\\frac{1}{2}"),    # no marker: the last box
    ("x = \\boxed{{a}+1}", "{a}+1"),                                     # nested braces
    ("no answer here", None),
    ("Answer:", None),
])
def test_extract_answer(response, answer):
    assert extract_answer(response) == answer


@pytest.mark.parametrize("given, reference, same", [
    ("1,000", "1000", True), ("1000.0", "1000", True), ("$12.50", "12.5", True), ("\\frac{1}{2}", "0.5", True),
    ("2000/2", "1000", True), ("42.", "42", True), ("41.999", "42", False), ("-7", "7", False),
    ("Paris", " paris.", True), ("\\text{Blue}", "blue", True), ("Lyon", "Paris", False),
])
def test_answers_match(given, reference, same):
    assert answers_match(given, reference) is same


def test_math_reward():
    reward = make_reward("math")
    assert reward("q", "Work... Answer: 1,024", "1024") == 1.0
    assert reward("q", "Work... Answer: 1023", "1024") == 0.0
    assert reward("q", "1024", "1024") == 0.0                  # no marked answer, no reward
    assert make_reward("math", marker="####")("q", "so #### 5", 5) == 1.0


def test_instructions_reward_follows_the_checkers():
    cs = [Constraint(Kind.NO_COMMAS), Constraint(Kind.WORDS, n=3, relation=Relation.AT_MOST), Constraint(Kind.JSON)]
    text = "Sure, here:\n[1, 2]"      # loose: JSON and <= 3 words (first line dropped); strict: none (4 words)
    assert make_reward("instructions")("p", text, cs) == pytest.approx(2 / 3)
    assert make_reward("instructions", level="strict")("p", text, cs) == 0.0
    assert make_reward("instructions", aggregate="all")("p", text, cs) == 0.0
    assert make_reward("instructions", aggregate="all")("p", "[1, 2]", cs[1:]) == 1.0
    p = instruction_prompts(1, seed=0)[0]
    dicts = p.to_dict()["constraints"]                         # as a JSONL prompt set stores them
    assert make_reward("instructions")("p", "x", dicts) == make_reward("instructions")("p", "x", p.constraints)
    with pytest.raises(ValueError, match="list of constraints"):
        make_reward("instructions")("p", "x", [])


def test_reasoning_gym_reward_uses_the_dataset_scorer():
    entry = reasoning_gym.create_dataset("chain_sum", size=1, seed=0)[0]
    reward = make_reward("reasoning-gym")
    assert reward(entry["question"], f"Answer: {entry['answer']}", entry) == 1.0
    assert reward(entry["question"], f"Answer: {int(entry['answer']) + 1}", entry) == 0.0
    assert reward(entry["question"], entry["answer"], entry) == 0.0     # unmarked


def test_tool_call_and_reward_model_take_callables():
    reward = make_reward("tool-call", checker=lambda response, target: response.strip() == target)
    assert reward("p", " f(x=1) ", "f(x=1)") == 1.0 and reward("p", "f(x=2)", "f(x=1)") == 0.0
    assert make_reward("reward-model", scorer=lambda p, r: len(r) - len(p))("ab", "abcde", None) == 3.0
    with pytest.raises(ConfigError, match="checker="):
        make_reward("tool-call")
    with pytest.raises(ConfigError, match="scorer="):
        make_reward("reward-model")


def test_unknown_reward_names_the_known_ones():
    with pytest.raises(UnknownRewardError) as e:
        make_reward("maths")
    assert "'maths'" in str(e.value) and all(name in str(e.value) for name in REWARDS)
    with pytest.raises(TypeError, match="markr"):
        make_reward("math", markr="x")


def test_last_number_extraction_reads_prose_answers():
    reward = make_reward("math", extract="last-number")
    assert reward("", "The answer is -41.", "-41") == 1.0
    assert reward("", "So 12 + 29 = 41, not 40", "40") == 1.0        # the last number, whatever it is
    assert reward("", "The total is 1,000.", "1000") == 1.0
    assert reward("", "no digits here", "1") == 0.0
    assert extracted("Answer: 5 apples, 6 pears", "marker", "Answer:") == "5 apples, 6 pears"
    with pytest.raises(ValueError, match="'first-number'"):
        make_reward("math", extract="first-number")


def test_guided_reward_pays_for_valid_and_real_content_only():
    reward = make_reward("guided")
    schema = {"type": "object", "properties": {"name": {"type": "string"},
                                               "tags": {"type": "array", "items": {"type": "string"}}},
              "required": ["name", "tags"]}
    target = {"schema": schema, "counts": [["tags", 2]]}
    assert reward("", '{"name": "Ann", "tags": ["a", "b"]}', target) == 1.0
    assert reward("", '{"name": "Ann", "tags": ["a", "a"]}', target) == 0.5      # valid, but a repeat
    assert reward("", '{"name": "Ann", "tags": ["a"]}', target) == 0.5           # the asked count missed
    assert reward("", '{"name": "Ann"}', target) == 0.0                          # not valid
    assert reward("", "Sure! Here it is", target) == 0.0                         # not JSON
    records = build_prompts(PromptSource.GUIDED, {}, Split.TRAIN, size=4, seed=0)
    for r in records:        # the generator's own instance is a perfect answer to its prompt
        assert reward(r.prompt, guided_response(r.where), r.target) == 1.0


def guided_response(where: str) -> str:
    _, split, _, seed, index = where.split()
    return guided_example(int(seed), int(index.lstrip("#")), Split(split)).response
