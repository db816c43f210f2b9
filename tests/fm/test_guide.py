"""Guides: the SDK's factories and guide() keywords, malformed values, and which types each applies to."""

from typing import List, Optional

import pytest

import openafm.fm as fm
from openafm.fm import GenerationGuide, GuideType


def test_guide_types_have_the_sdk_names_and_values():
    assert {t.name: t.value for t in GuideType} == {
        "anyOf": "enum", "constant": "constant", "count": "count", "element": "element", "maxItems": "maxItems",
        "maximum": "maximum", "minItems": "minItems", "minimum": "minimum", "range": "range", "regex": "regex"}


def test_factories_make_the_sdk_guide_objects():
    made = {
        GuideType.anyOf: (GenerationGuide.anyOf(["red", "green"]), ["red", "green"]),
        GuideType.constant: (GenerationGuide.constant("v1"), "v1"),
        GuideType.count: (GenerationGuide.count(5), 5),
        GuideType.element: (GenerationGuide.element(GenerationGuide.range((1, 10))), GenerationGuide.range((1, 10))),
        GuideType.maxItems: (GenerationGuide.max_items(10), 10),
        GuideType.maximum: (GenerationGuide.maximum(100), 100),
        GuideType.minItems: (GenerationGuide.min_items(2), 2),
        GuideType.minimum: (GenerationGuide.minimum(0), 0),
        GuideType.range: (GenerationGuide.range((1, 10)), (1, 10)),
        GuideType.regex: (GenerationGuide.regex(r"^[A-Z]{2}$"), r"^[A-Z]{2}$"),
    }
    assert set(made) == set(GuideType)
    for kind, (g, value) in made.items():
        assert (g.guide_type, g.value) == (kind, value)


def test_guide_returns_a_dataclass_field_with_the_sdk_metadata():
    f = fm.guide("Tags", min_items=1, max_items=5, element=GenerationGuide.regex("[a-z]+"))
    assert f.metadata["description"] == "Tags"
    assert f.metadata["guides"] == [GenerationGuide.element(GenerationGuide.regex("[a-z]+")),
                                    GenerationGuide.max_items(5), GenerationGuide.min_items(1)]
    assert "guides" not in fm.guide("Only a description").metadata
    assert fm.guide(description="kw").metadata["description"] == "kw"


@pytest.mark.parametrize("kwargs, message", [
    ({"anyOf": "red"}, "anyOf must be a non-empty list of strings, got 'red'"),
    ({"anyOf": []}, "anyOf must be a non-empty list of strings, got []"),
    ({"anyOf": ["a", 1]}, "anyOf must be a non-empty list of strings, got ['a', 1]"),
    ({"constant": 3}, "constant must be a string, got 3"),
    ({"count": 0}, "count must be a positive integer, got 0"),
    ({"count": True}, "count must be a positive integer, got True"),
    ({"element": "x"}, "element must be a GenerationGuide, got 'x'"),
    ({"max_items": -1}, "max_items must be a non-negative integer, got -1"),
    ({"min_items": 1.5}, "min_items must be a non-negative integer, got 1.5"),
    ({"minimum": "0"}, "minimum must be a finite number, got '0'"),
    ({"maximum": float("nan")}, "maximum must be a finite number, got nan"),
    ({"range": (1, 2, 3)}, "range must be a tuple (minimum, maximum) of finite numbers, got (1, 2, 3)"),
    ({"range": [1, 2]}, "range must be a tuple (minimum, maximum) of finite numbers, got [1, 2]"),
    ({"regex": 5}, "regex must be a string, got 5"),
])
def test_malformed_guide_values_raise_naming_guide_and_value(kwargs, message):
    with pytest.raises(fm.GuideValueError) as info:
        fm.guide(**kwargs)
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)  # what the SDK raises here


def probe(annotation, **guide_kwargs):
    """A generable class with one guided field named `field`."""
    return fm.generable(type("Probe", (), {"__annotations__": {"field": annotation},
                                           "field": fm.guide(**guide_kwargs)}))


# (annotation, guide) pairs the SDK's tests expect UnsupportedGuideError for, plus bool/enum/object cases.
UNSUPPORTED = [
    (str, {"minimum": 1}), (str, {"maximum": 1}), (str, {"range": (1, 2)}), (str, {"count": 2}),
    (str, {"min_items": 1}), (str, {"max_items": 1}),
    (int, {"anyOf": ["a"]}), (int, {"regex": r"\d+"}), (int, {"count": 2}), (int, {"min_items": 1}),
    (int, {"max_items": 1}), (int, {"constant": "1"}),
    (float, {"anyOf": ["a"]}), (float, {"regex": r"\d+"}), (float, {"count": 2}),
    (List[int], {"anyOf": ["a"]}), (List[int], {"regex": r"\d+"}), (List[int], {"minimum": 0}),
    (List[int], {"maximum": 9}), (List[int], {"range": (0, 9)}),
    (List[float], {"anyOf": ["a"]}), (List[float], {"range": (0.0, 1.0)}),
    (List[str], {"regex": "[a-z]+"}), (List[str], {"minimum": 1}), (List[str], {"range": (1, 10)}),
    (bool, {"constant": "true"}), (Optional[bool], {"minimum": 0}),
    (List[int], {"element": GenerationGuide.regex("x")}),  # the item guide is the one named
    (str, {"element": GenerationGuide.minimum(1)}),
]


@pytest.mark.parametrize("annotation, kwargs", UNSUPPORTED, ids=lambda x: str(x))
def test_a_guide_on_a_type_it_does_not_apply_to_raises_naming_field_and_guide(annotation, kwargs):
    cls = probe(annotation, **kwargs)  # defining the class works, as in the SDK ...
    with pytest.raises(fm.UnsupportedGuideError) as info:
        cls.generation_schema()  # ... the schema, built on first use, refuses it
    message = str(info.value)
    named = next(iter(kwargs))
    if named == "element" and annotation is not str:
        named = kwargs["element"].name
    assert f"guide {named} " in message and "field 'Probe.field" in message, message


@pytest.mark.parametrize("annotation, kwargs, field_schema", [
    (str, {"anyOf": ["a"]}, {"type": "string", "enum": ["a"]}),
    (str, {"constant": "a"}, {"type": "string", "enum": ["a"]}),
    (str, {"regex": "a+"}, {"type": "string", "pattern": "^(?:a+)$"}),
    (int, {"range": (0, 3)}, {"type": "integer", "minimum": 0, "maximum": 3}),
    (float, {"minimum": 0.5}, {"type": "number", "minimum": 0.5}),
    (Optional[int], {"maximum": 3}, {"type": "integer", "maximum": 3}),
    (List[str], {"anyOf": ["a", "b"]}, {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}),
    (List[int], {"count": 2}, {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2}),
    (List[List[int]], {"element": GenerationGuide.element(GenerationGuide.minimum(0))},
     {"type": "array", "items": {"type": "array", "items": {"type": "integer", "minimum": 0}}}),
])
def test_supported_guides_per_type_are_accepted(annotation, kwargs, field_schema):
    schema = probe(annotation, **kwargs).generation_schema().to_json_schema()
    assert schema["properties"]["field"] == field_schema


def test_messages_list_the_guides_that_would_apply():
    with pytest.raises(fm.UnsupportedGuideError) as info:
        probe(int, regex=r"\d+").generation_schema()
    assert str(info.value) == (r"guide regex (GenerationGuide.regex('\\d+')) does not apply to field 'Probe.field' "
                               "of type int; guides that apply to int: maximum, minimum, range")


@pytest.mark.parametrize("annotation, kwargs, detail", [
    (int, {"minimum": 5, "maximum": 1}, "maximum(1), minimum(5) leave no value (minimum 5 > maximum 1)"),
    (float, {"range": (10.0, 1.0)}, "range((10.0, 1.0)) leave no value (minimum 10.0 > maximum 1.0)"),
    (int, {"range": (0, 10), "minimum": 11}, "leave no value (minimum 11 > maximum 10)"),
    (List[str], {"count": 3, "max_items": 2}, "leave no value (minItems 3 > maxItems 2)"),
    (List[str], {"min_items": 4, "max_items": 2}, "leave no value (minItems 4 > maxItems 2)"),
    (str, {"anyOf": ["a", "b"], "constant": "c"}, "allow no string at all"),
])
def test_contradictory_guides_raise_invalid_schema_naming_field_and_guides(annotation, kwargs, detail):
    with pytest.raises(fm.InvalidGenerationSchemaError) as info:
        probe(annotation, **kwargs).generation_schema()
    message = str(info.value)
    assert message.startswith("invalid generation schema: field 'Probe.field': guides ") and detail in message


def test_guides_intersect():
    schema = probe(int, range=(0, 10), minimum=5).generation_schema().to_json_schema()
    assert schema["properties"]["field"] == {"type": "integer", "minimum": 5, "maximum": 10}
    schema = probe(List[str], count=3, min_items=1).generation_schema().to_json_schema()
    assert schema["properties"]["field"] == {"type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 3}
    schema = probe(str, anyOf=["a", "b"], constant="b").generation_schema().to_json_schema()
    assert schema["properties"]["field"] == {"type": "string", "enum": ["b"]}
