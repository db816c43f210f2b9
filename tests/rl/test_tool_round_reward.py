"""The tool-round RL source and its reward: every reference turn of the SFT data scores 1.0 and the benchmark's
failure kinds score less (no call, a wrong argument, text around the call, a dropped result value, a repeated call);
the answer turn's prompt renders the call and its result before the generation prompt."""

from __future__ import annotations

import json

import pytest

from openafm.checkpoint.packaged import packaged_tokenizer
from openafm.data.tool_rounds import Turn, tool_round_turns
from openafm.errors import ConfigError
from openafm.fm.tool import CALL_CLOSE, CALL_OPEN
from openafm.rl.prompts import PromptSource, build_prompts
from openafm.rl.rewards.registry import make_reward
from openafm.rl.run import render
from openafm.splits import Split

REWARD = make_reward("tool-round")


def call_text(calls) -> str:
    return CALL_OPEN + json.dumps(calls) + CALL_CLOSE


def test_turns_are_a_function_of_their_seed_and_both_kinds_of_call_turn_are_drawn():
    a, b = (tool_round_turns(80, seed=4, split=Split.TRAIN) for _ in range(2))
    assert a == b and a != tool_round_turns(80, seed=5, split=Split.TRAIN)
    calls = [t for t in a if t.turn is Turn.CALL]
    assert any(t.target["calls"] for t in calls) and any(not t.target["calls"] for t in calls)
    assert {t.turn for t in tool_round_turns(20, seed=0, split=Split.TRAIN, turns=[Turn.ANSWER])} == {Turn.ANSWER}


def test_every_reference_turn_earns_the_full_reward():
    records = build_prompts(PromptSource.TOOL_ROUNDS, {}, Split.TRAIN, size=300, seed=0)
    turns = tool_round_turns(300, seed=0, split=Split.TRAIN)
    assert [r.where for r in records] == [t.where for t in turns]
    assert all(REWARD(r.prompt, t.reference, r.target) == 1.0 for r, t in zip(records, turns, strict=True))


def test_the_call_turn_pays_only_for_exactly_the_right_call():
    call = {"name": "get_capital", "arguments": {"country": "Vietnam"}}
    target = {"turn": "call", "calls": [call]}
    assert REWARD("q", call_text([call]), target) == 1.0
    assert REWARD("q", " " + call_text([{"arguments": {"country": "Vietnam"}, "name": "get_capital"}]), target) == 1.0
    assert REWARD("q", "Sure! " + call_text([call]), target) == 0.0                     # text around the call
    assert REWARD("q", call_text([call, call]), target) == 0.0                          # called twice
    assert REWARD("q", call_text([{**call, "arguments": {"country": "Laos"}}]), target) == 0.0
    assert REWARD("q", CALL_OPEN + "[{broken" + CALL_CLOSE, target) == 0.0
    assert REWARD("q", "The capital is Hanoi.", target) == 0.0                          # no call
    no_call = {"turn": "call", "calls": []}
    assert REWARD("q", "Hello! How can I help?", no_call) == 1.0
    assert REWARD("q", call_text([call]), no_call) == 0.0 and REWARD("q", "  ", no_call) == 0.0


def test_the_answer_turn_pays_for_each_result_value_it_keeps():
    target = {"turn": "answer", "values": ["34.7", "Obese"]}
    assert REWARD("q", "Your BMI is 34.7, which counts as obese.", target) == 1.0
    assert REWARD("q", "Your BMI is 34.7.", target) == 0.5
    assert REWARD("q", "I could not tell.", target) == 0.0
    assert REWARD("q", "34.7 obese " + call_text([{"name": "bmi", "arguments": {}}]), target) == 0.0   # asks again


@pytest.mark.parametrize("target", [None, {"turn": "call"}, {"turn": "answer", "values": []}, {"turn": "chat"}])
def test_a_bad_target_is_named(target):
    with pytest.raises(ValueError, match="tool-round reward needs"):
        REWARD("q", "a", target)


def test_the_answer_prompt_renders_the_call_and_its_result_before_the_generation_prompt():
    tok = packaged_tokenizer()
    record = build_prompts(PromptSource.TOOL_ROUNDS, {"turns": ["answer"]}, Split.TRAIN, size=1, seed=0)[0]
    text = tok.decode(render(tok, record))
    call, result = (m["content"] for m in record.history)
    assert [m["role"] for m in record.history] == ["assistant", "tool"] and call.startswith(CALL_OPEN)
    assert text.index(record.prompt) < text.index(call) < text.index(result)
    assert text.endswith(tok.apply_chat_template([{"role": "user", "content": "x"}], add_generation_prompt=True)
                         .rsplit("x", 1)[1])


@pytest.mark.parametrize("turns", [[], ["reply"], "call"])
def test_bad_turns_are_named(turns):
    with pytest.raises(ConfigError, match="turns="):
        build_prompts(PromptSource.TOOL_ROUNDS, {"turns": turns}, Split.TRAIN, size=2, seed=0)
