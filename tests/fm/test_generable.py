"""@generable: the SDK's decorator forms, what it adds, enums, the Generable protocol and decorator errors."""

import dataclasses
import enum
from typing import Optional

import pytest

import openafm.fm as fm


def schema_of(cls) -> dict:
    return cls.generation_schema().to_json_schema()


def test_the_sdk_decorator_forms_and_a_keyword_description():
    @fm.generable
    class Bare:
        a: int

    @fm.generable()
    class Empty:
        a: int

    @fm.generable("Described")
    class Positional:
        a: int

    @fm.generable(description="By keyword")
    class Keyword:
        a: int

    assert [c._generable_description for c in (Bare, Empty, Positional, Keyword)] == [None, None, "Described",
                                                                                      "By keyword"]
    assert "description" not in schema_of(Bare) and schema_of(Positional)["description"] == "Described"
    for cls in (Bare, Empty, Positional, Keyword):
        assert dataclasses.is_dataclass(cls) and cls._generable is True
        assert isinstance(cls.generation_schema(), fm.GenerationSchema)
        assert cls.generation_schema().type_class is cls
    with pytest.raises(fm.GenerableDecoratorError, match="two descriptions"):
        fm.generable("one", description="two")


def test_existing_dataclasses_in_either_decorator_order():
    @dataclasses.dataclass
    @fm.generable("Inner first")
    class A:
        x: int
        tags: list[str] = dataclasses.field(default_factory=list)

    @fm.generable
    @dataclasses.dataclass
    class B:
        x: int

    for cls in (A, B):
        assert isinstance(cls, fm.Generable) and schema_of(cls)["required"][0] == "x"
    assert A(1).tags == [] and schema_of(A)["required"] == ["x", "tags"]  # a default does not make it optional


def test_local_classes_may_name_each_other_and_themselves_in_quotes():
    @fm.generable
    class Leaf:
        label: str

    @fm.generable
    class Tree:
        leaves: list["Leaf"]
        children: list["Tree"]
        parent: Optional["Tree"]

    schema = schema_of(Tree)
    assert schema["properties"]["leaves"]["items"] == {"$ref": "#/$defs/Leaf"}
    assert schema["properties"]["children"]["items"] == {"$ref": "#"} and schema["properties"]["parent"] == {"$ref": "#"}
    assert schema["required"] == ["leaves", "children"]


def test_generable_enums():
    @fm.generable("A traffic light")
    class Light(enum.Enum):
        RED = "red"
        GREEN = "green"

    assert schema_of(Light) == {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "Light",
                                "description": "A traffic light", "type": "string", "enum": ["red", "green"]}
    assert Light._from_generated_content(fm.GeneratedContent("green")) is Light.GREEN
    assert Light.RED.generated_content.value() == "red"
    assert isinstance(Light, fm.Generable) and [m.name for m in Light] == ["RED", "GREEN"]
    with pytest.raises(fm.ContentConversionError, match=r"\"amber\" is not a value of Light"):
        Light._from_generated_content(fm.GeneratedContent("amber"))


def test_enum_values_must_be_json_strings_or_numbers():
    @fm.generable
    class Bad(enum.Enum):
        A = (1, 2)

    with pytest.raises(fm.InvalidGenerationSchemaError, match=r"enum Bad: member A has value \(1, 2\)"):
        Bad.generation_schema()


def test_generable_protocol_matches_classes_and_instances_and_refuses_subclassing():
    @fm.generable
    class Note:
        text: str

    class Plain:
        text: str

    assert isinstance(Note, fm.Generable) and isinstance(Note("x"), fm.Generable)
    assert not isinstance(Plain, fm.Generable)
    with pytest.raises(TypeError, match="Subclassing Protocol Generable is not allowed"):
        class Sub(fm.Generable):  # noqa: F841
            pass


def test_partially_generated_has_every_field_optional_and_an_id():
    @fm.generable
    class Pair:
        left: int
        right: str

    partial = Pair.PartiallyGenerated()
    assert (partial.left, partial.right) == (None, None) and isinstance(partial.id, fm.GenerationID)
    content = fm.GeneratedContent.from_partial_json('{"left": 3, "right": "ab')
    snapshot = Pair.PartiallyGenerated._from_generated_content(content)
    assert (snapshot.left, snapshot.right, snapshot.id) == (3, "ab", content.id)

    @fm.generable
    class WithId:
        id: int

    assert WithId.PartiallyGenerated._from_generated_content(fm.GeneratedContent({"id": 7})).id == 7


@pytest.mark.parametrize("make, phrases", [
    (lambda: fm.generable(type("NoFields", (), {"x": 1})), ["NoFields", "type-annotated fields"]),
    (lambda: fm.generable(type("Mutable", (), {"__annotations__": {"tags": list}, "tags": []})),
     ["Mutable", "default_factory"]),
    (lambda: fm.generable(type("Order", (), {"__annotations__": {"a": int, "b": int}, "a": 1})),
     ["Order", "fields without defaults must come before"]),
    (lambda: fm.generable(type("Unresolved", (), {"__annotations__": {"x": "UndefinedType"}})),
     ["type hints", "Unresolved", "UndefinedType"]),
    (lambda: fm.generable(lambda: None), ["can only be applied to classes"]),
    (lambda: fm.generable()(len), ["can only be applied to classes", "len"]),
    (lambda: fm.generable(3), ["can only be applied to classes", "int 3"]),
])
def test_decorator_misuse_raises_a_schema_error_naming_the_class(make, phrases):
    with pytest.raises(fm.GenerableDecoratorError) as info:
        make()
    assert isinstance(info.value, fm.InvalidGenerationSchemaError)
    for phrase in phrases:
        assert phrase in str(info.value)
