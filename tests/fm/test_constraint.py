"""fm's one grammar policy: a chat completion decodes under the grammar a session builds for the same tools,
tool choice and schema (compared token mask by token mask along seeded random walks through the grammar)."""

import random

import pytest
import torch

import openafm.fm as fm
from openafm.fm.constraint import check_tool_choice, constraint_for
from openafm.fm.structured import StructuredDecoding
from openafm.fm.tool import CALL_OPEN
from openafm.serve.protocol import RequestError, chat_request

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}},
          "required": ["name", "tags"], "additionalProperties": False}


class Weather(fm.Tool):
    name, description = "get_weather", "Weather for a city"

    @property
    def arguments_schema(self):
        return fm.GenerationSchema.from_json_schema(CITY)

    async def call(self, args):
        return "Sunny"


class Time(Weather):
    name, description = "get_time", "The time in a city"          # the same arguments, another name


def body(choice, schema):
    b = {"model": "m", "messages": [{"role": "user", "content": "Weather in Paris?"}], "max_tokens": 64,
         "tools": [{"type": "function", "function": {"name": t.name, "description": t.description, "parameters": CITY}}
                   for t in (Weather(), Time())]}
    if choice is not None:
        b["tool_choice"] = choice
    if schema is not None:
        b["response_format"] = {"type": "json_schema", "json_schema": {"name": "person", "schema": schema}}
    return b


def walk(a, b, vocab: int, seed: int, steps: int = 40) -> int:
    """Take the same random allowed tokens through both constraints; every mask must agree. -> steps taken."""
    rng = random.Random(seed)
    for step in range(steps):
        logits = a.mask_logits(torch.zeros(vocab))      # a steered constraint also shifts logits: compare them all
        assert torch.equal(logits, b.mask_logits(torch.zeros(vocab))), f"masks differ after {step} tokens"
        ids = torch.nonzero(torch.isfinite(logits)).flatten().tolist()
        if not ids or a.done:
            return step
        token = rng.choice(ids)
        a.consume(token)
        b.consume(token)
    return steps


@pytest.mark.parametrize("choice,wire,schema", [
    ("auto", None, None), ("auto", "auto", PERSON), ("required", "required", None), ("none", "none", PERSON),
    ("none", "none", None), ("function:get_time", {"type": "function", "function": {"name": "get_time"}}, None)])
def test_a_chat_completion_decodes_under_the_sessions_grammar(tokenizer, choice, wire, schema):
    plan = chat_request(body(wire, schema), tokenizer=tokenizer, model="m", context=2048)
    target = fm.GenerationSchema.from_json_schema(schema).to_json_schema() if schema else None
    for seed in range(3):
        session_side = constraint_for(tokenizer, tools=[Weather(), Time()], choice=choice, schema=target,
                                      structured=StructuredDecoding(), budget=64)
        assert walk(session_side, plan.constraint(), tokenizer.vocab_size, seed) > 0


def test_required_admits_only_a_call_and_none_never_starts_one(tokenizer):
    opening = tokenizer.encode(CALL_OPEN)[0]
    required = constraint_for(tokenizer, tools=[Weather()], choice="required", schema=None,
                              structured=StructuredDecoding(), budget=64)
    assert torch.nonzero(required.allowed()).flatten().tolist() == [opening]
    none = constraint_for(tokenizer, tools=[Weather()], choice="none", schema=None, structured=StructuredDecoding(),
                          budget=64)
    assert not bool(none.allowed()[opening])
    assert constraint_for(tokenizer, tools=[], choice="auto", schema=None, structured=StructuredDecoding(),
                          budget=64) is None


def test_bad_choices_are_named():
    with pytest.raises(ValueError, match=r"'function:get_rain' names no tool offered; the tools are \['get_weather'\]"):
        check_tool_choice("function:get_rain", [Weather()])
    with pytest.raises(ValueError, match=r"'sometimes' is not one of \['auto', 'required', 'none'\]"):
        check_tool_choice("sometimes", [Weather()])
    with pytest.raises(ValueError, match="'required' needs at least one tool"):
        check_tool_choice("required", [])


def test_the_server_takes_tools_and_a_response_format_together(tokenizer):
    plan = chat_request(body("auto", PERSON), tokenizer=tokenizer, model="m", context=2048)
    assert plan.constraint() is not None and plan.tools
    with pytest.raises(RequestError, match="tool_choice"):
        chat_request(body({"type": "function", "function": {"name": "nope"}}, None), tokenizer=tokenizer, model="m",
                     context=2048)
