"""SchemaFit.NARROWED: where a keyword has no exact rewrite, the engine admits a subset of its values.

Each case: the exact fit raises naming the keyword; the narrowed fit compiles, lists the narrowing, admits at least
one value, and every candidate the grammar admits is valid by ``jsonschema``'s validator (the reference) — the
property that makes narrowing safe. The expected admitted/refused sets pin what each narrowing gives up.
"""

from __future__ import annotations

import asyncio
import json

import jsonschema
import pytest

from openafm.fm import GenerationSchema, InvalidGenerationSchemaError, LanguageModelSession, SchemaFit
from openafm.runtime.constrained import accepts_text, json_schema_grammar

CASES = {
    "uniqueItems over listed values": (
        {"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True, "minItems": 1},
        "uniqueItems",
        {"admitted": [["a"], ["a", "c"], ["a", "b", "c"]], "refused": [[], ["a", "a"], ["c", "a"]]},
    ),
    "uniqueItems over free items": (
        {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "uniqueItems",
        {"admitted": [[], ["x"]], "refused": [["x", "y"], ["x", "x"]]},
    ),
    "oneOf of overlapping closed objects": (
        {"oneOf": [{"type": "object", "additionalProperties": False, "properties": {"env": {"type": "string"}}},
                   {"type": "object", "additionalProperties": False, "properties": {"file": {"type": "string"}}}]},
        "oneOf",
        {"admitted": [{"env": "A"}, {"file": "f"}], "refused": [{}, {"env": "A", "file": "f"}]},
    ),
    "not of a pattern beside other types": (
        {"not": {"type": "string", "pattern": "^x"}},
        "not",
        {"admitted": [1, None, True, [1]], "refused": ["xyz", "abc"]},
    ),
    "oneOf of integer and number": (
        {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 10}]},
        "oneOf",
        {"admitted": [3], "refused": [12, 12.5, 2.5]},
    ),
    "unevaluatedProperties beside a conditional member": (
        {"type": "object", "allOf": [{"properties": {"a": {"type": "integer"}}},
                                     {"anyOf": [{"properties": {"b": {"type": "integer"}}, "required": ["b"]},
                                                {"required": ["a"]}]}],
         "unevaluatedProperties": False},
        "unevaluatedProperties",
        {"admitted": [{"a": 1}], "refused": [{"a": 1, "z": 2}, {"b": 2}]},
    ),
    "min/maxProperties over optional properties": (
        {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
         "minProperties": 1, "maxProperties": 1},
        "maxProperties",
        {"admitted": [{"x": 1}, {"y": 2}], "refused": [{}, {"x": 1, "y": 2}, {"z": 1}]},
    ),
    "contains": (
        {"type": "array", "items": {"type": "integer"}, "contains": {"const": 7}},
        "contains",
        {"admitted": [[7], [7, 1]], "refused": [[], [1, 7], [1]]},
    ),
    "format uri-reference": (
        {"type": "string", "format": "uri-reference"},
        "format",
        {"admitted": ["https://example.com/a"], "refused": []},
    ),
    "propertyNames of a shape not read exactly": (
        {"type": "object", "properties": {"x-a": {"type": "integer"}, "b": {"type": "integer"}},
         "propertyNames": {"not": {"pattern": "^x-"}}},
        "propertyNames",
        {"admitted": [{"b": 1}, {}], "refused": [{"x-a": 1}, {"c": 1}]},
    ),
}


def _text(value) -> str:
    return json.dumps(value, separators=(", ", ": "))


@pytest.mark.parametrize("name", list(CASES))
def test_exact_fit_raises_naming_the_keyword(name):
    schema, keyword, _ = CASES[name]
    with pytest.raises(InvalidGenerationSchemaError, match=keyword):   # by name (the engine names min/maxProperties)
        GenerationSchema.from_json_schema(schema)


@pytest.mark.parametrize("name", list(CASES))
def test_narrowed_fit_admits_only_valid_values(name):
    schema, keyword, expected = CASES[name]
    made = GenerationSchema.from_json_schema(schema, fit=SchemaFit.NARROWED)
    assert made.fit is SchemaFit.NARROWED
    assert keyword in {k for _, k, _ in made.narrowed_keywords}
    grammar = json_schema_grammar(made.to_json_schema())
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    for value in expected["admitted"]:
        assert validator.is_valid(value), value          # the table itself is right
        assert accepts_text(grammar, _text(value)), value
    for value in expected["refused"]:
        assert not accepts_text(grammar, _text(value)), value
    for value in expected["admitted"] + expected["refused"]:
        if accepts_text(grammar, _text(value)):
            assert validator.is_valid(value), value


def test_a_remote_ref_under_an_optional_property_is_left_out():
    schema = {"type": "object", "properties": {"k": {"$ref": "https://example.com/other.json#/x"},
                                               "n": {"type": "integer"}}}
    with pytest.raises(InvalidGenerationSchemaError):
        GenerationSchema.from_json_schema(schema)
    made = GenerationSchema.from_json_schema(schema, fit=SchemaFit.NARROWED)
    grammar = json_schema_grammar(made.to_json_schema())
    assert accepts_text(grammar, _text({"n": 1}))
    assert not accepts_text(grammar, _text({"k": 1}))


def test_a_root_narrowed_to_nothing_raises():
    with pytest.raises(InvalidGenerationSchemaError, match="no value at all"):
        GenerationSchema.from_json_schema({"$ref": "https://example.com/other.json"}, fit=SchemaFit.NARROWED)


def test_an_unknown_format_still_raises_when_narrowed():
    with pytest.raises(InvalidGenerationSchemaError, match="simple-template"):
        GenerationSchema.from_json_schema({"type": "string", "format": "simple-template"}, fit=SchemaFit.NARROWED)


def test_exact_schemas_are_not_narrowed():
    schema = {"type": "object", "properties": {"a": {"type": "integer", "not": {"const": 0}}}}
    exact = GenerationSchema.from_json_schema(schema)
    narrowed = GenerationSchema.from_json_schema(schema, fit=SchemaFit.NARROWED)
    assert narrowed.narrowed_keywords == [] and narrowed.to_json_schema() == exact.to_json_schema()


def test_fit_must_be_a_schema_fit():
    with pytest.raises(TypeError, match="EXACT, NARROWED"):
        GenerationSchema.from_json_schema({"type": "string"}, fit="narrowed")


@pytest.mark.real_model
def test_a_session_answers_a_narrowed_schema_with_a_valid_value():
    raw = {"type": "object", "required": ["tags"], "properties": {
        "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "uniqueItems": True, "minItems": 1}}}
    schema = GenerationSchema.from_json_schema(raw, fit=SchemaFit.NARROWED)

    async def go():
        return await LanguageModelSession().respond("Pick colour tags for a forest.", schema=schema)

    content = asyncio.run(go())
    jsonschema.validate(json.loads(content.to_json()), raw)
