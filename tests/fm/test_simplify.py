"""The exact simplifications of fm/jsonschema/simplify.py: the grammar of a rewritten schema admits exactly the values the
original schema admits (``jsonschema``'s validator is the reference), on tables of valid and invalid values."""

from __future__ import annotations

import json

import jsonschema
import pytest

from openafm.fm import GenerationSchema
from openafm.fm.jsonschema.simplify import simplify
from openafm.runtime.constrained import accepts_text, json_schema_grammar

FORMS = {"type": "object", "properties": {"type": {"enum": ["a", "b", "c", 1]}, "x": {"type": "integer"},
                                          "y": {"type": "string"}},
         "allOf": [{"if": {"properties": {"type": {"const": "a"}}, "required": ["type"]}, "then": {"required": ["x"]}},
                   {"if": {"properties": {"type": {"enum": ["b", "a"]}}}, "then": {"required": ["y"]}},
                   {"if": {"properties": {"type": {"const": 1}}}, "then": {"properties": {"x": {"minimum": 5}}}},
                   {"required": ["type"]}]}
FORM_VALUES = [{"type": "a", "x": 1, "y": "s"}, {"type": "a", "x": 1}, {"type": "a", "y": "s"}, {"type": "b", "y": ""},
               {"type": "b"}, {"type": "c"}, {"type": 1, "x": 7}, {"type": 1, "x": 2}, {"type": 1.0, "x": 2},
               {"type": True}, {"x": 1}, {}]
REPEATED = {"type": "object", "$defs": {"d": {"type": "string", "minLength": 2}},
            "properties": {"k": {"$ref": "#/$defs/d"}, "n": {"type": "integer"}},
            "oneOf": [{"properties": {"k": {"$ref": "#/$defs/d"}}, "required": ["k"]},
                      {"properties": {"n": {"type": "integer"}}, "required": ["n"]}]}
REPEATED_VALUES = [{"k": "ab"}, {"n": 1}, {"k": "ab", "n": 1}, {"k": "a"}, {"k": "a", "n": 1}, {}]


@pytest.mark.parametrize("schema, values", [(FORMS, FORM_VALUES), (REPEATED, REPEATED_VALUES)],
                         ids=["conditionals on one key", "a member repeating the node's property"])
def test_the_rewritten_grammar_admits_exactly_the_valid_values(schema, values):
    grammar = json_schema_grammar(GenerationSchema.from_json_schema(schema).to_json_schema())
    validator = jsonschema.Draft202012Validator(schema)
    verdicts = [(v, validator.is_valid(v), accepts_text(grammar, json.dumps(v, separators=(", ", ": "))))
                for v in values]
    assert [v for v, valid, admitted in verdicts if valid != admitted] == []
    assert any(valid for _, valid, _ in verdicts) and not all(valid for _, valid, _ in verdicts)


def test_conditionals_become_one_branch_per_value():
    branches = simplify(FORMS, lambda ref: None)["allOf"][-1]["anyOf"]
    assert len(branches) == 3 + 3   # the listed values a, b and 1; another value; the key absent; not an object
    assert simplify(FORMS, lambda ref: None)["allOf"][0] == {"required": ["type"]}


def test_a_repeated_property_becomes_true_and_others_stay():
    root = REPEATED

    def resolve(ref):
        return root["$defs"]["d"] if ref == "#/$defs/d" else None

    out = simplify(REPEATED, resolve)
    assert out["oneOf"][0]["properties"] == {"k": True}
    assert out["oneOf"][1]["properties"] == {"n": True}


def test_other_members_are_left_alone():
    node = {"allOf": [{"if": {"properties": {"t": {"const": 1}}}, "then": {"required": ["x"]}},
                      {"if": {"properties": {"u": {"const": 1}}}, "then": {"required": ["y"]}}]}
    assert simplify(node, lambda ref: None) == node   # two keys: no one discriminator
