"""parse_partial_json on every prefix of several documents: snapshots only grow (completed fields never
change, the open one only extends) and the whole document gives json.loads's value."""

import json

import pytest

from openafm.fm import DecodingFailureError, parse_partial_json

DOCUMENTS = [
    json.dumps({"name": "Momo", "age": 12, "weight": -4.25e-1, "big": 1e3, "indoor": True, "owner": None,
                "ok": False, "toys": ["ball", "mouse"], "friends": [{"name": "Kiki", "tags": []}, {}],
                "quote": 'she said "hi"\n\tthen left \\ /', "accent": "caf\u00e9", "emoji": "cat \U0001F431!"}),
    json.dumps({"nested": {"deep": [[1, 2], [3, [4, {"x": "y"}]]]}, "last": 0}, indent=2),
    json.dumps({"escaped": "\u00e9\U0001F431\u2028", "ctl": "\u0001"}, ensure_ascii=True),
    json.dumps([{"a": 1}, "two", 3.5, [], {}, None, True]),
    json.dumps("just a string with \"quotes\" and \\u escapes \u00e9"),
    '  {"spaced" :  [ 1 , 2 ] ,  "x" : "y" }  ',
]


def grows_into(before, after) -> bool:
    """True if `after` is `before` grown: same leading keys/items with equal values, the last one grown."""
    if before is None:
        return True  # nothing yet (only at the top level, before the value starts)
    if type(before) is not type(after):
        return False
    if isinstance(before, dict):
        keys = list(before)
        if list(after)[:len(keys)] != keys:
            return False
        return all(before[k] == after[k] for k in keys[:-1]) and (not keys or grows_into(before[keys[-1]], after[keys[-1]]))
    if isinstance(before, list):
        if len(before) > len(after):
            return False
        done = max(len(before) - 1, 0)
        return before[:done] == after[:done] and (not before or grows_into(before[-1], after[len(before) - 1]))
    if isinstance(before, str):
        return after.startswith(before)
    return before == after


@pytest.mark.parametrize("doc", DOCUMENTS)
def test_every_prefix_gives_a_snapshot_that_only_grows_into_the_document(doc):
    final = json.loads(doc)
    snapshots = [parse_partial_json(doc[:k]) for k in range(len(doc) + 1)]
    assert snapshots[-1] == final and type(snapshots[-1]) is type(final)
    for k, (before, after) in enumerate(zip(snapshots, snapshots[1:], strict=False)):  # consecutive pairs
        assert grows_into(before, after), (doc[:k + 1], before, after)
        assert grows_into(before, final), (doc[:k + 1], before)
    assert len({json.dumps(s) for s in snapshots}) >= 6  # it really streams


def test_the_test_relation_itself_rejects_a_changed_field():
    assert not grows_into({"a": 1, "b": "x"}, {"a": 2, "b": "xy"})
    assert not grows_into({"a": "ab"}, {"a": "ac"})
    assert not grows_into([1, 2], [1, 3, 4])
    assert not grows_into({"b": 1}, {"a": 0, "b": 1})
    assert not grows_into(True, 1)
    assert not grows_into([], {}) and grows_into([], [1]) and grows_into({}, {"a": 1})


@pytest.mark.parametrize("prefix, expected", [
    ("", None), ("  ", None), ("{", {}), ('{"', {}), ('{"na', {}), ('{"name"', {}), ('{"name":', {}),
    ('{"name": "', {"name": ""}), ('{"n": 1', {}), ('{"n": 12,', {"n": 12}), ('{"n": -', {}),
    ('{"n": 1.5e', {}), ('{"b": tr', {}), ('{"b": true', {"b": True}), ('{"b": null', {"b": None}),
    ('[1, 2', [1]), ("[1, 2]", [1, 2]), ('["a", "b', ["a", "b"]), ('[{"a": [', [{"a": []}]),
    ('"ab\\', "ab"), ('"ab\\n', "ab\n"), ('"\\u00', ""), ('"\\u00e9', "\u00e9"),
    ('"\\ud83d', ""), ('"\\ud83d\\ude', ""), ('"\\ud83d\\ude00', "\U0001F600"),
    ("12", 12), ("-", None), ("1.", None), ("1.5 ", 1.5), ("tru", None), ("null", None),
])
def test_prefix_rules(prefix, expected):
    value = parse_partial_json(prefix)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize("text, offset, char", [
    ('{"a" 1}', 5, "1"), ("[1,]", 3, "]"), ('{"a": 1]', 7, "]"), ("nulx", 0, "n"), ('{"a": 01,', 6, "0"),
    ('{1: 2}', 1, "1"), ('"a\x01"', 2, "\x01"), ('"\\x"', 2, "x"), ('"\\u12g4"', 5, "g"), ("{} {}", 3, "{"),
    ('"\\ud83d\\n"', 7, "\\"),
])
def test_text_that_is_no_json_prefix_raises_naming_offset_and_character(text, offset, char):
    with pytest.raises(DecodingFailureError) as info:
        parse_partial_json(text)
    assert f"unexpected {char!r} at offset {offset}" in str(info.value)
