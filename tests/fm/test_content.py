"""GeneratedContent: the SDK's API, round trips through generable instances, and validation failures
that name the field."""

import datetime
import enum
import json
from typing import List, Optional

import pytest

import openafm.fm as fm
from openafm.fm import GeneratedContent, GenerationGuide


class Colour(enum.Enum):
    TABBY = "tabby"
    BLACK = "black"


@fm.generable
class Age:
    years: int = fm.guide(range=(0, 30))
    months: int = fm.guide(range=(0, 11))


@fm.generable("A cat")
class Cat:
    name: str = fm.guide(regex=r"[A-Z][a-z]+")
    age: Age
    colour: Colour
    weight: float = fm.guide(minimum=0.5)
    indoor: bool
    toys: List[str] = fm.guide(max_items=2, element=GenerationGuide.anyOf(["ball", "mouse", "string"]))
    nickname: Optional[str]
    friends: Optional[list["Cat"]]
    scores: dict[str, int]


MOMO = {"name": "Momo", "age": {"years": 3, "months": 2}, "colour": "tabby", "weight": 4.5, "indoor": True,
        "toys": ["ball"], "friends": [{"name": "Kiki", "age": {"years": 1, "months": 0}, "colour": "black",
                                       "weight": 3, "indoor": False, "toys": [], "scores": {}}],
        "scores": {"speed": 7}}


def test_content_converts_to_the_generable_instance_and_back():
    cat = GeneratedContent(MOMO).value(Cat)
    kiki = Cat(name="Kiki", age=Age(1, 0), colour=Colour.BLACK, weight=3.0, indoor=False, toys=[], nickname=None,
               friends=None, scores={})
    assert cat == Cat(name="Momo", age=Age(3, 2), colour=Colour.TABBY, weight=4.5, indoor=True, toys=["ball"],
                      nickname=None, friends=[kiki], scores={"speed": 7})
    assert isinstance(cat.friends[0].weight, float)
    assert Cat._from_generated_content(GeneratedContent(MOMO)) == cat
    # back: None-valued optional fields are left out, enums written by value, ints stay ints
    back = cat.generated_content
    assert isinstance(back, GeneratedContent)
    assert back.value() == {**MOMO, "friends": [{**MOMO["friends"][0], "weight": 3.0}]}
    assert GeneratedContent.from_json(back.to_json()).value(Cat) == cat


def test_value_without_type_returns_the_raw_json_and_properties_one_by_one():
    content = GeneratedContent.from_json(json.dumps(MOMO))
    assert content.value() == MOMO and content.value() is not content.value()  # a copy
    assert content.value(str, for_property="name") == "Momo"
    assert content.value(dict, for_property="age") == {"years": 3, "months": 2}
    assert content.value(Age, for_property="age") == Age(3, 2)
    assert content.value(List[str], for_property="toys") == ["ball"]
    assert content.value(for_property="nickname") is None
    assert content.value(Optional[str], for_property="nickname") is None
    assert content.is_complete and json.loads(content.to_json()) == MOMO
    assert content == GeneratedContent(MOMO) and content.id != GeneratedContent(MOMO).id


def cat_with(**changes):
    data = json.loads(json.dumps(MOMO))
    for path, value in changes.items():
        node, *keys = path.split("__")
        target = data
        for key in [node, *keys][:-1]:
            target = target[int(key)] if isinstance(target, list) else target[key]
        last = [node, *keys][-1]
        if value is KeyError:
            del target[last]
        else:
            target[int(last) if isinstance(target, list) else last] = value
    return data


@pytest.mark.parametrize("changes, message", [
    ({"name": 3}, "Cat.name: expected str, got int 3"),
    ({"name": "momo"}, "Cat.name: \"momo\" does not match the pattern '^(?:[A-Z][a-z]+)$'"),
    ({"age__years": "3"}, 'Cat.age.years: expected int, got str "3"'),
    ({"age__years": True}, "Cat.age.years: expected int, got bool true"),
    ({"age__years": 3.5}, "Cat.age.years: expected int, got float 3.5"),
    ({"age__months": 12}, "Cat.age.months: 12 is above the maximum 11"),
    ({"age__months": KeyError}, "Cat.age.months: required field is missing"),
    ({"age": None}, "Cat.age: required field is null"),
    ({"colour": "ginger"}, "Cat.colour: \"ginger\" is not a value of Colour (one of ['tabby', 'black'])"),
    ({"weight": 0.1}, "Cat.weight: 0.1 is below the minimum 0.5"),
    ({"indoor": 1}, "Cat.indoor: expected bool, got int 1"),
    ({"toys": ["ball", "mouse", "string"]}, "Cat.toys: 3 items, more than maxItems 2"),
    ({"toys": ["ball", "laser"]}, "Cat.toys[1]: \"laser\" is not one of ['ball', 'mouse', 'string']"),
    ({"toys": "ball"}, 'Cat.toys: expected List[str], got str "ball"'),
    ({"friends__0__age__years": 31}, "Cat.friends[0].age.years: 31 is above the maximum 30"),
    ({"scores__speed": "fast"}, "Cat.scores['speed']: expected int, got str \"fast\""),
    ({"owner": "Ann"}, "Cat: Cat has no field 'owner' (fields: ['name', 'age', 'colour', 'weight', 'indoor', "
                       "'toys', 'nickname', 'friends', 'scores'])"),
])
def test_content_that_does_not_fit_raises_naming_the_field(changes, message):
    with pytest.raises(fm.ContentConversionError) as info:
        GeneratedContent(cat_with(**changes)).value(Cat)
    assert str(info.value) == message
    assert isinstance(info.value, fm.DecodingFailureError) and isinstance(info.value, ValueError)


def test_a_missing_or_null_property_is_none_as_in_the_sdk():
    # apple tests/test_error_handling.py: contents.value(int, "invalid_key") is None
    assert GeneratedContent({"key1": "value1", "key2": 42}).value(int, "invalid_key") is None
    assert GeneratedContent(MOMO).value(str, for_property="nickname") is None
    assert GeneratedContent({"a": None}).value(int, for_property="a") is None
    assert GeneratedContent({"a": 3}).value(int, for_property="a") == 3


def test_property_access_errors():
    with pytest.raises(fm.ContentConversionError, match="not an object; it has no property 'a'"):
        GeneratedContent([1, 2]).value(int, for_property="a")
    with pytest.raises(fm.ContentConversionError, match=r"^content: cannot convert to set\[int\]"):
        GeneratedContent([1]).value(set[int])
    with pytest.raises(fm.ContentConversionError, match=r"^Age: expected Age, got list \[1\]"):
        GeneratedContent([1]).value(Age)


def test_content_holds_json_only():
    assert GeneratedContent().value() == {}  # as the SDK
    assert GeneratedContent({"t": (1, 2)}).value() == {"t": [1, 2]}
    # apple tests/test_error_handling.py: a date inside -> TypeError mentioning "serializable"
    with pytest.raises(TypeError, match=r"not JSON serializable: content_dict\['when'\]\['on'\]: date 2024-02-29"):
        GeneratedContent({"when": {"on": datetime.date(2024, 2, 29)}})
    with pytest.raises(TypeError, match=r"content_dict\['t'\]\[1\]: object"):
        GeneratedContent({"t": [1, object()]})
    with pytest.raises(TypeError, match=r"content_dict\['x'\]: nan \(JSON numbers are finite\)"):
        GeneratedContent({"x": float("nan")})
    with pytest.raises(TypeError, match=r"key \(1, 2\) of type tuple"):
        GeneratedContent({(1, 2): 3})
    assert GeneratedContent({1: "a"}).value() == {"1": "a"}  # json.dumps writes scalar keys as strings
    with pytest.raises(fm.DecodingFailureError, match="not a JSON document"):
        GeneratedContent.from_json('{"a": ')


def test_streamed_snapshots_fill_partially_generated_field_by_field():
    text = json.dumps(MOMO)
    snapshots = [Cat.PartiallyGenerated._from_generated_content(GeneratedContent.from_partial_json(text[:k]))
                 for k in range(len(text) + 1)]
    names = [s.name for s in snapshots if s.name is not None]
    assert names[0] == "" and names[1] == "M" and names[-1] == "Momo"
    ages = [s.age for s in snapshots if s.age is not None]
    assert ages[0] == Age.PartiallyGenerated(years=None, months=None, id=ages[0].id)
    assert (ages[-1].years, ages[-1].months) == (3, 2)
    final = snapshots[-1]
    full = GeneratedContent(MOMO).value(Cat)
    assert final.colour is Colour.TABBY and final.toys == ["ball"] and final.scores == {"speed": 7}
    assert final.friends[0].name == "Kiki" and final.friends[0].age.years == 1
    assert [final.name, final.weight, final.indoor, final.nickname] == [full.name, full.weight, full.indoor, None]
    assert not GeneratedContent.from_partial_json(text[:-1]).is_complete
    assert GeneratedContent.from_partial_json(text).is_complete
