"""The sft stage's built-in sets: single-turn examples as conversations, and math-steps' chains of thought correct by
construction (each step's arithmetic, and the answer reasoning-gym's)."""

from __future__ import annotations

import re

import pytest

from openafm.data.chat import ChatExample
from openafm.pipelines.sft_data import as_conversation, builtin_conversations, math_steps


def test_math_steps_work_left_to_right_one_operation_a_sentence():
    assert math_steps("15 - 43 - 75") == "15 - 43 = -28. -28 - 75 = -103. The answer is -103."
    assert math_steps("7 + 5") == "7 + 5 = 12. The answer is 12."
    for bad in ("7", "7 +", "2 * 3", "1 + 2 +"):
        with pytest.raises(ValueError, match="math_steps takes"):
            math_steps(bad)


def test_math_steps_examples_end_with_reasoning_gyms_answer_and_every_step_is_right():
    convs = builtin_conversations("math-steps", n=40, seed=0)
    assert len(convs) == 40
    for conv in convs:
        answer = conv.messages[-1]["content"]
        for a, op, b, c in re.findall(r"(-?\d+) ([+-]) (\d+) = (-?\d+)\.", answer):
            assert int(c) == (int(a) + int(b) if op == "+" else int(a) - int(b))
        question = conv.messages[-2]["content"]
        expression = question.split(": ", 1)[1].rstrip(" =")
        assert answer.endswith(f"The answer is {eval(expression)}.")      # the question's own arithmetic


def test_a_single_turn_example_becomes_a_conversation_with_its_system_turn_only_when_it_has_one():
    plain = as_conversation(ChatExample("q", "a", "x:1"))
    assert [m["role"] for m in plain.messages] == ["user", "assistant"] and plain.where == "x:1"
    system = as_conversation(ChatExample("q", "a", "x:2", system="tools"))
    assert system.messages[0] == {"role": "system", "content": "tools"}
