"""Raw JSON Schemas (the json_schema= path): annotations and unknown keywords are accepted and listed, the keyword
table covers every keyword of every draft jsonschema knows, and each rewrite admits exactly what jsonschema's
validator admits on a table of hand-made instances (the grammar is the one generation compiles)."""

from __future__ import annotations

import json
import logging

import jsonschema
import pytest

import openafm.fm as fm
from openafm.fm import GenerationSchema
from openafm.fm.jsonschema.keywords import KEYWORDS, KeywordKind, kind_of
from openafm.runtime.constrained import accepts_text, json_schema_grammar

# Keywords real schemas carry that constrain nothing (issue 19's list: GitHub, Kubernetes, Snowplow, SchemaStore).
REAL_WORLD_ANNOTATIONS = ["id", "self", "errorMessage", "longDescription", "x-kubernetes-patch-merge-key", "axRole",
                          "gallery_properties", "_format", "_uniqueItems", "markdownDescription", "contentEncoding"]


def test_annotations_and_unknown_keywords_are_accepted_and_listed_with_where_they_were(caplog):
    raw = {"type": "object", "id": "http://x/s.json#", "self": {"vendor": "com.acme", "name": "ev", "format": "j"},
           "properties": {"name": {"type": "string", "errorMessage": "a name", "longDescription": "...",
                                   "x-kubernetes-patch-merge-key": "name", "axRole": "textbox"},
                          "tags": {"type": "array", "items": {"type": "string", "_format": "slug"},
                                   "_uniqueItems": True, "gallery_properties": {"a": 1}},
                          "note": {"type": "string", "markdownDescription": "*x*", "contentEncoding": "base64"}},
           "required": ["name"]}
    with caplog.at_level(logging.DEBUG, logger="openafm.fm.schema"):
        schema = GenerationSchema.from_json_schema(raw)
    assert schema.ignored_keywords == [
        ("#", "id"), ("#", "self"),
        ("#/properties/name", "errorMessage"), ("#/properties/name", "longDescription"),
        ("#/properties/name", "x-kubernetes-patch-merge-key"), ("#/properties/name", "axRole"),
        ("#/properties/tags", "_uniqueItems"), ("#/properties/tags", "gallery_properties"),
        ("#/properties/tags/items", "_format"),
        ("#/properties/note", "markdownDescription"), ("#/properties/note", "contentEncoding")]
    assert {k for _, k in schema.ignored_keywords} == set(REAL_WORLD_ANNOTATIONS)
    assert "ignored 11 annotation keyword(s): id at #, self at #" in caplog.text
    out = schema.to_json_schema()   # what the engine sees: only what constrains, plus the documentation kept
    assert out["properties"]["name"] == {"type": "string"} and out["properties"]["tags"]["items"] == {"type": "string"}


def test_a_ref_into_a_vendor_keyword_still_resolves():
    raw = {"type": "object", "properties": {"a": {"$ref": "#/x-shared/plugins/name"}},
           "x-shared": {"plugins": {"name": {"type": "string", "pattern": "^[a-z]+$"}}}, "required": ["a"]}
    grammar = json_schema_grammar(GenerationSchema.from_json_schema(raw).to_json_schema())
    assert [accepts_text(grammar, json.dumps({"a": v})) for v in ("abc", "ABC")] == [True, False]


def test_the_table_names_every_keyword_of_every_draft_jsonschema_validates():
    drafts = [jsonschema.Draft4Validator, jsonschema.Draft6Validator, jsonschema.Draft7Validator,
              jsonschema.Draft201909Validator, jsonschema.Draft202012Validator]
    validation = set().union(*(d.VALIDATORS for d in drafts))
    assert validation - set(KEYWORDS) == set()
    # every validation keyword is enforced, rewritten or refused; none is taken for an annotation
    assert {k for k in validation if kind_of(k) is KeywordKind.ANNOTATION} == {"$defs", "definitions"} & validation
    assert {kind for kind, _ in KEYWORDS.values()} == set(KeywordKind)


# (schema, instances): each instance's verdict from the grammar must equal jsonschema's.
REWRITES = [
    ({"not": {"type": "string"}}, ["a", 1, None, [], {}]),
    ({"type": "string", "not": {"enum": ["and", "or", "an"]}}, ["and", "or", "an", "a", "andy", "", "o"]),
    ({"type": "number", "not": {"enum": [1, 2.5]}}, [1, 1.0, 2.5, 2, 0, 3]),
    ({"type": "boolean", "not": {"const": True}}, [True, False]),
    ({"type": "object", "properties": {"a": {}, "b": {}}, "not": {"required": ["a", "b"]}},
     [{}, {"a": 1}, {"b": 1}, {"a": 1, "b": 2}]),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "not": {"properties": {"a": {"minimum": 5}}}},
     [{}, {"a": 4}, {"a": 5}, {"a": 9}]),
    ({"type": "string", "not": {"anyOf": [{"minLength": 3}, {"const": "x"}]}}, ["", "x", "y", "ab", "abc"]),
    ({"type": "array", "items": {"type": "integer"}, "not": {"prefixItems": [{"const": 0}]}}, [[], [0], [1], [1, 0]]),
    ({"type": "object", "properties": {"kind": {"type": "string"}, "n": {"type": "integer"}},
      "if": {"properties": {"kind": {"const": "a"}}, "required": ["kind"]},
      "then": {"required": ["n"]}, "else": {"properties": {"n": False}}},
     [{"kind": "a", "n": 1}, {"kind": "a"}, {"kind": "b"}, {"kind": "b", "n": 1}, {}, {"n": 1}]),
    ({"oneOf": [{"type": "string"}, {"type": "string", "minLength": 2}]}, ["", "a", "ab", "abc", 1]),
    ({"$defs": {"e": {"type": "string", "pattern": "^\\$\\{\\{"}}, "oneOf": [{"type": "boolean"}, {"$ref": "#/$defs/e"},
                                                                             {"enum": ["inherit"]}]},
     [True, "${{ x }}", "inherit", "x"]),
    ({"type": "object", "properties": {"uses": {"type": "string"}, "run": {"type": "string"}},
      "oneOf": [{"required": ["uses"]}, {"required": ["run"]}]},
     [{"uses": "a"}, {"run": "b"}, {"uses": "a", "run": "b"}, {}]),
    ({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
      "properties": {"a": {}, "b": {}, "c": {"type": "integer"}},
      "dependencies": {"a": ["b"], "b": {"required": ["c"]}}},
     [{}, {"a": 1}, {"a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3}, {"b": 2, "c": 3}, {"c": 1}]),
    ({"type": "object", "properties": {"a": {}, "b": {}}, "dependentRequired": {"a": ["b"]}},
     [{}, {"a": 1}, {"b": 1}, {"a": 1, "b": 1}]),
    ({"type": "object", "properties": {"a": {}, "b": {"type": "integer"}},
      "dependentSchemas": {"a": {"properties": {"b": {"minimum": 3}}, "required": ["b"]}}},
     [{}, {"a": 1}, {"a": 1, "b": 2}, {"a": 1, "b": 3}, {"b": 1}]),
    ({"type": "array", "items": {"const": "x"}, "uniqueItems": True}, [[], ["x"], ["x", "x"]]),
    ({"type": "array", "maxItems": 1, "uniqueItems": True}, [[], [1], [1, 1]]),
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": False}, [[1, 1]]),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "unevaluatedProperties": False},
     [{}, {"a": 1}, {"b": 1}, {"a": 1, "b": 2}]),
    ({"type": "object", "properties": {"ab": {}, "x": {}}, "additionalProperties": False,
      "propertyNames": {"maxLength": 1}}, [{}, {"x": 1}, {"ab": 1}]),
    ({"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}}, [{}, {"ab": 1}, {"aB": 1}, {"ab": 1, "c": 2}]),
    ({"type": "object", "propertyNames": {"enum": ["a.b", "c"]}}, [{"a.b": 1}, {"c": 2}, {"ab": 1}]),
    # propertyNames written before the keywords its rewrite replaces (CircleCI's `examples`): the order is the source's
    ({"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}, "additionalProperties": {"type": "integer"}},
     [{}, {"ab": 1}, {"./b": 1}, {"ab": "x"}]),
    ({"type": "object", "propertyNames": {"maxLength": 1}, "properties": {"ab": {}, "x": {}},
      "additionalProperties": False}, [{}, {"x": 1}, {"ab": 1}]),
    ({"$schema": "http://json-schema.org/draft-07/schema#", "type": "array", "items": [{"type": "integer"}],
      "additionalItems": {"type": "string"}}, [[], [1], [1, "a"], ["a"], [1, 2]]),
    ({"$schema": "http://json-schema.org/draft-04/schema#", "type": "number", "minimum": 1, "exclusiveMinimum": True,
      "not": {"maximum": 3, "exclusiveMaximum": True}}, [1, 2, 3, 4]),
    ({"if": {"const": 0}}, [0, 1, "a"]),   # `if` alone constrains nothing
]


@pytest.mark.parametrize("raw, instances", REWRITES, ids=[json.dumps(r)[:60] for r, _ in REWRITES])
def test_each_rewrite_admits_exactly_what_jsonschema_validates(raw, instances):
    grammar = json_schema_grammar(GenerationSchema.from_json_schema(raw).to_json_schema())
    validator = jsonschema.validators.validator_for(raw, default=jsonschema.Draft202012Validator)(raw)
    verdicts = [(v, accepts_text(grammar, json.dumps(v)), validator.is_valid(v)) for v in instances]
    assert [(v, ours) for v, ours, theirs in verdicts] == [(v, theirs) for v, ours, theirs in verdicts]
    assert any(theirs for *_, theirs in verdicts) and not all(theirs for *_, theirs in verdicts) \
        or raw == {"if": {"const": 0}} or "uniqueItems" in raw and raw["uniqueItems"] is False


def test_rewritten_keywords_are_listed():
    schema = GenerationSchema.from_json_schema(REWRITES[8][0])
    assert schema.rewritten_keywords == [("#", "if"), ("#", "then"), ("#", "else")]
    assert schema.ignored_keywords == []


@pytest.mark.parametrize("raw, detail", [
    ({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, "exact only where at most one item"),
    ({"not": {"pattern": "^a"}}, "the complement of 'pattern'"),
    ({"not": {"type": "integer"}}, "non-integer numbers"),
    ({"oneOf": [{"type": "object", "additionalProperties": False, "properties": {"a": {}}},
                {"type": "object", "additionalProperties": False, "properties": {"b": {}}}]},
     "the complement of 'additionalProperties'"),
])
def test_a_rewrite_that_would_not_be_exact_raises_saying_why(raw, detail):
    with pytest.raises(fm.InvalidGenerationSchemaError) as info:
        GenerationSchema.from_json_schema(raw)
    assert "no exact rewrite" in str(info.value) and detail in str(info.value)
