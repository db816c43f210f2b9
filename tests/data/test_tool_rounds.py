"""Tool round-trip conversations: a function of their seed, every kind drawn, train and held-out tool families
disjoint (distractors included), calls valid for the tool's schema and answered by the tool with exactly the tool
turn, answers grounded in the result, the system turn what a session with those tools sends, and the messages
rendered by the real chat template with a loss on assistant tokens only."""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter

import jsonschema
import llguidance
import pytest

from openafm.checkpoint.packaged import packaged_tokenizer
from openafm.data.tool_rounds import (
    FAMILIES,
    FAMILY_BY_NAME,
    NAMESPACE,
    Kind,
    family_tool,
    families,
    tool_round_cases,
    tool_round_conversations,
)
from openafm.fm.content import GeneratedContent
from openafm.fm.session import LanguageModelSession
from openafm.fm.tool import CALL_CLOSE, CALL_OPEN, tool_call_grammar, tool_spec, tools_prompt
from openafm.runtime.constrained import accepts_text
from openafm.splits import Split, split_of
from openafm.train.adapter_toolkit import conversation_tokens

N = 200


@pytest.fixture(scope="module")
def convs():
    return {s: tool_round_conversations(N, seed=0, split=s) for s in Split}


def _kind(conv) -> Kind:
    return Kind(conv.where.rsplit(" ", 1)[1])


def _tool_names(conv) -> list[str]:
    system = conv.messages[0]
    assert system["role"] == "system"
    return [t["name"] for t in json.loads(re.search(r"<tools>(.*)</tools>", system["content"]).group(1))]


def _calls(conv) -> list[list[dict]]:
    return [json.loads(m["content"][len(CALL_OPEN):-len(CALL_CLOSE)]) for m in conv.messages
            if m["role"] == "assistant" and m["content"].startswith(CALL_OPEN)]


def _run(name: str, arguments: dict) -> str:
    return asyncio.run(family_tool(name).call(GeneratedContent(arguments)))


def test_conversations_are_a_function_of_their_seed_and_every_kind_is_drawn(convs):
    again = tool_round_conversations(N, seed=0, split=Split.TRAIN)
    assert again == convs[Split.TRAIN]
    assert tool_round_conversations(N, seed=1, split=Split.TRAIN) != again
    assert tool_round_conversations(5, seed=0, split="train") == again[:5]      # item i does not depend on n
    for split in Split:
        kinds = Counter(_kind(c) for c in convs[split])
        assert set(kinds) == set(Kind), kinds
    assert convs[Split.TRAIN][12].where.startswith("tool-rounds train seed 0 #12 ")


def test_train_and_heldout_families_are_disjoint_and_tools_come_from_their_split(convs):
    train, heldout = ({f.name for f in families(s)} for s in Split)
    assert train and heldout and not train & heldout
    assert train | heldout == set(FAMILY_BY_NAME) and len(FAMILIES) == len(FAMILY_BY_NAME)
    for split, own in zip(Split, (train, heldout), strict=True):
        assert all(split_of(name, NAMESPACE) is split for name in own)
        for conv in convs[split]:
            names = _tool_names(conv)
            assert set(names) <= own and 2 <= len(names) <= 4 and len(set(names)) == len(names), conv.where
            assert conv.where.split()[5] in names
            assert all(c["name"] in names for calls in _calls(conv) for c in calls)
        for case in tool_round_cases(40, seed=0, split=split):
            assert {t.name for t in case.tools} <= own and case.expected_call[0] in {t.name for t in case.tools}


def test_the_system_turn_is_what_a_session_with_those_tools_sends(convs):
    for conv in convs[Split.TRAIN][:50] + convs[Split.HELDOUT][:50]:
        tools = [family_tool(n) for n in _tool_names(conv)]
        assert conv.messages[0]["content"] == tools_prompt(tools)
        assert LanguageModelSession(tools=tools)._messages[0] == conv.messages[0]     # no model is loaded


def test_every_assistant_turn_is_admitted_by_the_sessions_grammar(convs):
    for split in Split:
        for conv in convs[split][:60]:
            tools = [family_tool(n) for n in _tool_names(conv)]
            grammar = llguidance.LLMatcher.grammar_from_lark(tool_call_grammar(tools, None))
            for i in conv.assistant_turns():
                assert accepts_text(grammar, conv.messages[i]["content"]), (conv.where, i)


def test_calls_validate_and_the_tool_returns_exactly_the_tool_turns(convs):
    for split in Split:
        for conv in convs[split]:
            roles = [m["role"] for m in conv.messages]
            for calls in _calls(conv):
                at = roles.index("tool")
                results = [m["content"] for m in conv.messages[at:at + len(calls)]]
                assert roles[at:at + len(calls)] == ["tool"] * len(calls)
                for call, result in zip(calls, results, strict=True):
                    jsonschema.validate(call["arguments"], tool_spec(family_tool(call["name"]))["parameters"])
                    assert _run(call["name"], call["arguments"]) == result


def test_answers_contain_the_results_key_values(convs):
    for conv in convs[Split.TRAIN] + convs[Split.HELDOUT]:
        kind, msgs = _kind(conv), conv.messages
        calls = _calls(conv)
        assert len(calls) == (0 if kind is Kind.NO_CALL else 1), conv.where
        assert sum(m["role"] == "tool" for m in msgs) == (2 if kind is Kind.PARALLEL else len(calls))
        if kind is Kind.NO_CALL:
            assert [m["role"] for m in msgs] == ["system", "user", "assistant"]
            continue
        assert len(calls[0]) == (2 if kind is Kind.PARALLEL else 1)
        answer_at = [i for i, m in enumerate(msgs) if m["role"] == "assistant"][1]
        for call, tool_turn in zip(calls[0], [m for m in msgs if m["role"] == "tool"], strict=True):
            result = json.loads(tool_turn["content"])
            for key in FAMILY_BY_NAME[call["name"]].keys:
                assert str(result[key]) in msgs[answer_at]["content"], (conv.where, key)
        if kind is Kind.FOLLOW_UP:
            assert [m["role"] for m in msgs[answer_at + 1:]] == ["user", "assistant"]
            result = json.loads(msgs[answer_at - 1]["content"])
            values = [str(result[k]) for k in FAMILY_BY_NAME[calls[0][0]["name"]].keys]
            assert any(v in msgs[-1]["content"] for v in values), conv.where
            assert not msgs[-1]["content"].startswith(CALL_OPEN)


def test_cases_carry_fresh_tools_that_record_calls_and_a_grounded_reference():
    cases = tool_round_cases(30, seed=3, split=Split.HELDOUT)
    again = tool_round_cases(30, seed=3, split=Split.HELDOUT)
    for case, twin in zip(cases, again, strict=True):
        assert (case.question, case.expected_call, case.result) == (twin.question, twin.expected_call, twin.result)
        assert all(a is not b for a, b in zip(case.tools, twin.tools, strict=True))
        name, arguments = case.expected_call
        tool = next(t for t in case.tools if t.name == name)
        assert tool.calls == []
        assert asyncio.run(tool.call(GeneratedContent(arguments))) == case.result
        assert tool.calls == [arguments]
        assert case.result_values and all(v in case.result and v in case.answer for v in case.result_values)
    assert cases[0].where == f"tool-round-cases heldout seed 3 #0 {cases[0].expected_call[0]}"


def test_a_tool_answers_an_unknown_value_with_an_error_result():
    assert json.loads(_run("get_capital", {"country": "Atlantis"}))["error"].startswith("no country 'Atlantis'")
    assert json.loads(_run("get_capital", {"country": "  japan "})) == {"country": "Japan", "capital": "Tokyo"}


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match=r"n=0 must be an int >= 1"):
        tool_round_conversations(0, seed=0, split=Split.TRAIN)
    with pytest.raises(ValueError, match=r"split='test' is not one of \['train', 'heldout'\]"):
        tool_round_conversations(3, seed=0, split="test")
    with pytest.raises(ValueError, match=r"kinds=\['chat'\]: unknown or none; choose from \['call-then-answer'"):
        tool_round_conversations(3, seed=0, split=Split.TRAIN, kinds=["chat"])
    with pytest.raises(ValueError, match=r"unknown tool family 'nope'; known: get_weather"):
        family_tool("nope")
    only = tool_round_conversations(20, seed=0, split=Split.TRAIN, kinds=[Kind.NO_CALL])
    assert {_kind(c) for c in only} == {Kind.NO_CALL}


def test_conversations_render_with_the_chat_template_and_only_assistant_tokens_carry_a_loss(convs):
    tokenizer = packaged_tokenizer()
    picked = [next(c for c in convs[s] if _kind(c) is k) for s in Split for k in Kind]
    for conv in picked:
        text = tokenizer.apply_chat_template(list(conv.messages), add_generation_prompt=False)
        assert all(m["content"] in text for m in conv.messages)
        tokens = conversation_tokens(tokenizer, conv)
        assert len(tokens.ids) == len(tokens.labeled) < 4000
        runs, run = [], []
        for token, labeled in zip(tokens.ids, tokens.labeled, strict=True):
            if labeled:
                run.append(token)
            elif run:
                runs, run = [*runs, run], []
        runs += [run] if run else []
        assistant = [m["content"] for m in conv.messages if m["role"] == "assistant"]
        assert [tokenizer.decode(r) for r in runs] == [a + "<|im_end|>" for a in assistant], conv.where
