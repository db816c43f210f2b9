"""Made-up tool families (data/made_tools.py): seeded and distinct, none a built-in family or in a held-out family's
domain, their tools answer from their tables and formulas (checked against the arithmetic written out here), every
conversation's answer holds every value of its tool's result, and no conversation offers two tools of one topic."""

from __future__ import annotations

import asyncio
import json
import math
import random

import jsonschema
import pytest

from openafm.data.made_tools import (DOMAINS, FORMULAS, HELDOUT_WORDS, MADE_FAMILIES, VALIDATION_DOMAINS,
                                     VALIDATION_FORMULAS, formula_family, heldout_words, made_families,
                                     made_tool_cases, made_tool_conversations, validation_families)
from openafm.data.tool_rounds import families, family_tool, pool_cases
from openafm.data.tool_rounds_vocab import FAMILY_BY_NAME, Family
from openafm.fm.content import GeneratedContent
from openafm.fm.tool import tool_spec
from openafm.splits import Split


@pytest.fixture(scope="module")
def pool() -> tuple[Family, ...]:
    return made_families(0)


def call(family: Family, arguments: dict) -> dict:
    return json.loads(asyncio.run(family_tool(family).call(GeneratedContent(arguments))))


def test_the_pool_is_seeded_distinct_and_covers_every_domain_and_formula(pool):
    assert len(pool) == MADE_FAMILIES == len({f.name for f in pool})
    assert not {f.name for f in pool} & set(FAMILY_BY_NAME)
    assert {f.topic for f in pool} == {d.noun for d in DOMAINS} | {f.names[0] for f in FORMULAS}
    again = made_families.__wrapped__(0)
    assert [(f.name, f.description, f.questions) for f in again] == [(f.name, f.description, f.questions) for f in pool]
    assert [f.name for f in made_families.__wrapped__(1)] != [f.name for f in pool]


def test_no_made_family_touches_a_heldout_domain(pool):
    heldout = families(Split.HELDOUT)
    assert heldout and not {f.name for f in pool} & {f.name for f in heldout}
    assert all(heldout_words(f) == [] for f in pool)
    # the check itself finds the words: every held-out family trips it
    assert all(heldout_words(f) for f in heldout), [f.name for f in heldout if not heldout_words(f)]
    assert "weather" in HELDOUT_WORDS and "package" in HELDOUT_WORDS


def test_lookups_answer_from_their_table_and_name_an_unknown_entity(pool):
    lookup = next(f for f in pool if f.topic == "ferry" and len(f.args) == 2)
    name = lookup.draw(random.Random(3))["ferry"]
    got = call(lookup, {"ferry": name.upper(), "passengers": 3})
    fare = lookup.run({"ferry": name, "passengers": 1})["fare_usd"]
    assert got["ferry"] == name and got["passengers"] == 3 and got["total_usd"] == 3 * fare
    assert "error" in call(lookup, {"ferry": "Nowhere Ferry", "passengers": 2})
    with pytest.raises(ValueError, match="no ferry 'Nowhere Ferry'; known: "):
        lookup.run({"ferry": "Nowhere Ferry", "passengers": 2})


@pytest.mark.parametrize("names, arguments, expected", [
    ("rectangle_area", {"width_m": 7, "length_m": 12}, {"area_m2": 84, "perimeter_m": 38}),
    ("split_bill", {"total_usd": 100, "people": 3}, {"per_person_usd": "33.33"}),
    ("fuel_cost", {"distance_km": 250, "litres_per_100km": 6, "price_per_litre": 1.8},
     {"litres": 15.0, "cost_usd": "27.00"}),
    ("circle_area", {"radius_cm": 10},
     {"area_cm2": round(math.pi * 100, 1), "circumference_cm": round(20 * math.pi, 1)}),
    ("savings_plan", {"goal_usd": 1000, "monthly_usd": 300}, {"months": 4}),
    ("hypotenuse", {"leg_a_cm": 3, "leg_b_cm": 4}, {"hypotenuse_cm": 5.0}),
    ("train_fare", {"from_station": "Kingsmead", "to_station": "Elm Park"}, {"zones": 4, "fare_usd": "8.50"}),
])
def test_formulas_compute_what_the_arithmetic_says(names, arguments, expected):
    formula = next(f for f in FORMULAS if f.names[0] == names)
    family = formula_family(random.Random(0), formula)
    assert call(family, arguments) == expected


def test_every_conversation_calls_a_valid_tool_and_answers_with_every_value(pool):
    by_name = {f.name: f for f in pool}
    convs = made_tool_conversations(300, seed=0)
    assert convs[5].messages == made_tool_conversations(6, seed=0)[5].messages
    kinds = {c.where.rsplit(" ", 1)[-1] for c in convs}
    assert kinds == {"call-then-answer", "no-call", "follow-up", "parallel"}
    for conv in convs:
        offered = [t["name"] for t in json.loads(conv.messages[0]["content"].split("<tools>")[1].split("</tools>")[0])]
        topics = [by_name[n].topic for n in offered]
        assert len(set(topics)) == len(topics), (conv.where, offered)
        calls = [m for m in conv.messages if m["role"] == "assistant" and "<tool_call>" in m["content"]]
        if not calls:
            continue
        listed = json.loads(calls[0]["content"].removeprefix("<tool_call>").removesuffix("</tool_call>"))
        results = [json.loads(m["content"]) for m in conv.messages if m["role"] == "tool"]
        answer = next(m["content"] for m in conv.messages[conv.messages.index(calls[0]) + 1:]
                      if m["role"] == "assistant")
        for c, result in zip(listed, results, strict=True):
            family = by_name[c["name"]]
            jsonschema.validate(c["arguments"], tool_spec(family_tool(family))["parameters"])
            assert result == family.run(c["arguments"])
            assert all(str(result[k]) in answer for k in family.keys), (conv.where, answer, result)


def test_validation_tools_are_none_that_training_draws_and_their_cases_are_answerable():
    trained = {f.topic for seed in (0, 1, 2) for f in made_families(seed)} | set(FAMILY_BY_NAME)
    valid = validation_families(0)
    assert {f.topic for f in valid} == {d.noun for d in VALIDATION_DOMAINS} | {f.names[0] for f in VALIDATION_FORMULAS}
    assert not {f.topic for f in valid} & trained and not {f.name for f in valid} & set(FAMILY_BY_NAME)
    assert not {f.name for f in valid} & {f.name for seed in (0, 1, 2) for f in made_families(seed)}
    assert all(heldout_words(f) == [] for f in valid)
    cases = made_tool_cases(40, seed=0)
    assert [c.question for c in cases[:5]] == [c.question for c in made_tool_cases(5, seed=0)]
    for case in cases:
        name, arguments = case.expected_call
        family = next(f for f in valid if f.name == name)
        assert name in {t.name for t in case.tools}
        jsonschema.validate(arguments, tool_spec(family_tool(family))["parameters"])
        assert json.loads(case.result) == family.run(arguments) and all(v in case.answer for v in case.result_values)
    route = next(f for f in valid if f.topic == "route_length")
    assert route.run({"start": "North Gate", "end": "Town Hall"}) == {"stops": 3, "minutes": 9}
    draws = [route.draw(random.Random(i)) for i in range(30)]
    assert all(d["start"] != d["end"] for d in draws)
    with pytest.raises(ValueError, match="no place 'Nowhere'; known: North Gate, "):
        route.run({"start": "Nowhere", "end": "Harbor"})


def test_bad_sizes_are_named():
    with pytest.raises(ValueError, match="n=0 must be an int >= 1"):
        made_tool_conversations(0, seed=0)
    with pytest.raises(ValueError, match="n=-1 must be an int >= 1"):
        made_tool_cases(-1, seed=0)
    with pytest.raises(ValueError, match="a pool of 1 tool families: a round needs its tool and a distractor"):
        pool_cases(made_families(0)[:1], 3, stream="s", where="w")
    with pytest.raises(ValueError, match="cannot draw 5000 made tool families"):
        made_families.__wrapped__(0, 5000)
