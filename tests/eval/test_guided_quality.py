"""The degenerate fills a valid structured output can still hold, each named by its JSON path."""

from openafm.eval.guided_quality import degeneracies

PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                           "tags": {"type": "array", "items": {"type": "string"}}},
          "required": ["name", "age", "tags"]}


def test_a_real_answer_has_no_problems():
    assert degeneracies({"name": "Ann Lee", "age": 30, "tags": ["chess", "tea"]}, PERSON,
                        counts=[("tags", 2)]) == []


def test_empty_strings_repeats_ignored_counts_and_blank_keys_are_each_named():
    # the raw model's answer in the issue: {"name": "{}", "age": 30, "tags": [""]}
    assert degeneracies({"name": "{}", "age": 30, "tags": [""]}, PERSON) == ["$.name: no letter or digit in '{}'",
                                                                              "$.tags[0]: empty string"]
    assert degeneracies({"name": " ", "age": 1, "tags": ["a", "b", "a"]}, PERSON, counts=[("tags", 2)]) == [
        "$.name: empty string", "$.tags: item 2 repeats item 0", "$.tags: the prompt asked for 2 items, got 3"]
    assert degeneracies({"": ""}, {"type": "object"}) == ["$: blank key ''", "$.: empty string"]


def test_what_the_schema_forces_is_not_a_fill():
    forced = {"type": "object", "properties": {
        "blank": {"const": ""}, "flags": {"type": "array", "items": {"type": "boolean"}, "minItems": 3}}}
    assert degeneracies({"blank": "", "flags": [True, False, True]}, forced) == []   # 2 values, 3 items: repeats forced


def test_refs_and_any_of_branches_are_followed():
    schema = {"$defs": {"Node": {"type": "object", "properties": {"label": {"type": "string"},
                                                                    "kids": {"type": "array",
                                                                             "items": {"$ref": "#/$defs/Node"}}}}},
              "anyOf": [{"type": "null"}, {"$ref": "#/$defs/Node"}]}
    value = {"label": "root", "kids": [{"label": "", "kids": []}]}
    assert degeneracies(value, schema) == ["$.kids[0].label: empty string"]


def test_brackets_written_into_a_string_are_a_fill_unless_the_schema_names_its_values():
    # openafm-135m on SchemaStore's taskfile.json: {"duration": "); "}
    schema = {"type": "object", "properties": {"duration": {"type": "string"}, "sep": {"enum": [";", ","]},
                                               "glyph": {"type": "string", "pattern": "^[*+-]$"}}}
    assert degeneracies({"duration": "); ", "sep": ";", "glyph": "*"}, schema) == [
        "$.duration: no letter or digit in '); '"]
    assert degeneracies({"duration": "3 min", "sep": ",", "glyph": "-"}, schema) == []
    assert degeneracies({"duration": "\u00e9t\u00e9"}, schema) == []        # letters of any script count
