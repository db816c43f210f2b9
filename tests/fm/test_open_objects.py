"""Open objects narrowed for decoding (fm/jsonschema/open_objects.py): declared keys only, or a bounded number of
keys, and never where narrowing could widen or empty a schema. The soundness check runs over every schema and
instance of the JSON-Schema-Test-Suite: an instance the narrowed schema accepts, the schema accepts."""

from __future__ import annotations

import re

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from referencing.exceptions import Unresolvable

from openafm.fm import StructuredDecoding
from openafm.fm.jsonschema.open_objects import bound_open_objects
from schema_suite import cases  # noqa: F401  (a module fixture: the suite's schemas)

OBJ = {"type": "object", "properties": {"a": {"type": "string"}}}


def test_declared_properties_only_and_property_less_maps_bounded():
    assert bound_open_objects(OBJ, 3) == {**OBJ, "additionalProperties": False}
    assert bound_open_objects({"type": "object"}, 3) == {"type": "object", "maxProperties": 3}
    strings = {"type": "object", "additionalProperties": {"type": "string"}}          # a map of strings
    assert bound_open_objects(strings, 3) == {**strings, "maxProperties": 3}
    keyed = {"type": "object", "properties": {"id": {}}, "required": ["id"], "additionalProperties": {}}
    assert bound_open_objects(keyed, 3) == {**keyed, "maxProperties": 3}
    optional = {"type": "object", "properties": {"id": {}}, "additionalProperties": {}}   # the engine cannot count
    assert bound_open_objects(optional, 3) == optional
    assert bound_open_objects({"type": "object", "minProperties": 5}, 3) == {"type": "object", "minProperties": 5,
                                                                           "maxProperties": 5}
    nested = {"type": "array", "items": {"type": "object", "properties": {"m": {"type": "object"}}}}
    assert bound_open_objects(nested, 2)["items"] == {"type": "object", "additionalProperties": False,
                                                      "properties": {"m": {"type": "object", "maxProperties": 2}}}
    assert OBJ == {"type": "object", "properties": {"a": {"type": "string"}}}          # the input is not changed


@pytest.mark.parametrize("schema", [
    {**OBJ, "patternProperties": {"^x": {}}},                           # keys already constrained otherwise
    {**OBJ, "required": ["b"]},                                         # requires a key it does not declare
    {"not": OBJ},                                                       # narrowing under not widens
    {"oneOf": [OBJ, {"type": "object", "properties": {"b": {}}}]},      # ... and under oneOf
    {"if": OBJ, "then": {"required": ["a"]}},
    {"allOf": [OBJ, {"properties": {"b": {}}, "required": ["b"]}]},     # closing a branch would empty the whole
    {"anyOf": [OBJ], "required": ["b"]},
    {"$defs": {"o": OBJ}, "allOf": [{"$ref": "#/$defs/o"}, {"required": ["b"]}]},       # a definition used there
    {"$defs": {"o": OBJ, "p": {"allOf": [{"$ref": "#/$defs/o"}]}}, "$ref": "#/$defs/p"},  # ... through another
    {"$defs": {"o": OBJ}, "$ref": "#/$defs/o", "required": ["z"]},      # a $ref beside other constraints
])
def test_guarded_places_are_left_as_they_are(schema):
    narrowed = bound_open_objects(schema, 2)
    closed = [n for n in _nodes(narrowed) if n.get("additionalProperties") is False and n.get("properties") == OBJ[
        "properties"]]
    assert closed == [] or schema.get("additionalProperties") is False, narrowed


def test_a_definition_used_only_plainly_is_narrowed():
    schema = {"$defs": {"o": OBJ}, "type": "object", "properties": {"x": {"$ref": "#/$defs/o"}}, "required": ["x"]}
    narrowed = bound_open_objects(schema, 2)
    assert narrowed["$defs"]["o"]["additionalProperties"] is False and narrowed["additionalProperties"] is False


def test_structured_decoding_narrows_open_objects_by_default_and_can_stop():
    assert StructuredDecoding().bounded_schema(OBJ)["additionalProperties"] is False
    assert StructuredDecoding(max_open_keys=None).bounded_schema(OBJ) == OBJ
    with pytest.raises(ValueError, match=r"max_open_keys=0 must be a positive integer"):
        StructuredDecoding(max_open_keys=0)


def test_the_narrowing_never_admits_what_the_schema_refuses(cases):  # noqa: F811
    """Over the whole suite (1,825 instances): narrowed-valid implies valid, and the narrowing did happen."""
    checked, narrowed_schemas = 0, 0
    for case in cases:
        if not isinstance(case.schema, dict):
            continue
        narrowed = bound_open_objects(case.schema, 2)
        narrowed_schemas += narrowed != case.schema
        original_v, narrowed_v = Draft202012Validator(case.schema), Draft202012Validator(narrowed)
        for test in case.tests:
            try:
                accepted = narrowed_v.is_valid(test["data"])
                valid = original_v.is_valid(test["data"])
            except (re.error, Unresolvable, SchemaError):
                continue      # a remote ref, an ECMA-only regex: the reference validator cannot judge either
            assert valid or not accepted, (case.id, test["description"], narrowed)
            checked += 1
    assert checked > 1500 and narrowed_schemas >= 30, (checked, narrowed_schemas)   # 1,825 and 40 today


def _nodes(node):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _nodes(value)
    elif isinstance(node, list):
        for value in node:
            yield from _nodes(value)
