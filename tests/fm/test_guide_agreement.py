"""Every guide's check after generation (GeneratedContent.value) and the grammar that constrains generation agree
on a table of values: each value is accepted by both or refused by both, as the table says.

The grammar is the one guided generation compiles (runtime.constrained.json_schema_grammar), asked whether it
admits the JSON text of ``{"x": value}`` byte by byte; the check is the typed conversion of the same JSON.
A regex guide matches the whole value (Apple's meaning), never a part of it.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

import openafm.fm as fm
from openafm.fm import GeneratedContent, GenerationGuide
from openafm.runtime.constrained import accepts_text, json_schema_grammar

G = GenerationGuide

# (annotation, guide keywords, value, accepted)
TABLE: list[tuple[Any, dict, Any, bool]] = [
    (str, {"regex": r"\w"}, "N", True),
    (str, {"regex": r"\w"}, "NY", False),        # the report: a search let "NY" and "aNYb!" through
    (str, {"regex": r"\w"}, "aNYb!", False),
    (str, {"regex": r"\w"}, "", False),
    (str, {"regex": r"\w"}, "_", True),
    (str, {"regex": r"[A-Z]{2}"}, "NY", True),
    (str, {"regex": r"[A-Z]{2}"}, "NYC", False),
    (str, {"regex": r"[A-Z]{2}"}, "xNYx", False),
    (str, {"regex": r"a|b"}, "a", True),         # the alternation is anchored as a whole: ^(?:a|b)$
    (str, {"regex": r"a|b"}, "b", True),
    (str, {"regex": r"a|b"}, "ab", False),
    (str, {"regex": r"a|b"}, "xb", False),
    (str, {"regex": r"^[A-Z]{2}$"}, "NY", True),  # already anchored: the same meaning
    (str, {"regex": r"^[A-Z]{2}$"}, "NYC", False),
    (str, {"regex": r"\d+"}, "123", True),
    (str, {"regex": r"\d+"}, "12a", False),
    (str, {"regex": r"\d+"}, "\u0663", False),  # ARABIC-INDIC DIGIT THREE: \d is ASCII in the engine
    (str, {"regex": r".+"}, "ab", True),
    (str, {"regex": r".+"}, "a\nb", False),      # '.' excludes the newline
    (str, {"regex": r"[a-z]+"}, "ab\n", False),  # no trailing newline slips through ($ is the end of the text)
    (str, {"regex": r"\p{Lu}\p{Ll}+"}, "Émile", True),   # engine syntax Python's re lacks
    (str, {"regex": r"\p{Lu}\p{Ll}+"}, "émile", False),
    (str, {"regex": r"(?i)abc"}, "AbC", True),
    (str, {"anyOf": ["red", "green"]}, "red", True),
    (str, {"anyOf": ["red", "green"]}, "Red", False),
    (str, {"anyOf": ["red", "green"]}, "redgreen", False),
    (str, {"constant": "v1"}, "v1", True),
    (str, {"constant": "v1"}, "v1 ", False),
    (int, {"minimum": 0}, 0, True),
    (int, {"minimum": 0}, -1, False),
    (float, {"maximum": 10}, 10.0, True),
    (float, {"maximum": 10}, 10.5, False),
    (float, {"minimum": -0.5}, -0.5, True),
    (int, {"range": (1, 5)}, 1, True),
    (int, {"range": (1, 5)}, 5, True),
    (int, {"range": (1, 5)}, 6, False),
    (int, {"range": (1, 5)}, 0, False),
    (list[str], {"count": 2}, ["a", "b"], True),
    (list[str], {"count": 2}, ["a"], False),
    (list[str], {"count": 2}, ["a", "b", "c"], False),
    (list[str], {"min_items": 1}, [], False),
    (list[str], {"min_items": 1}, ["a"], True),
    (list[str], {"max_items": 2}, ["a", "b"], True),
    (list[str], {"max_items": 2}, ["a", "b", "c"], False),
    (list[str], {"element": G.regex(r"[a-z]+")}, ["ab", "c"], True),
    (list[str], {"element": G.regex(r"[a-z]+")}, ["ab", "cD"], False),
    (list[int], {"element": G.range((0, 9))}, [0, 9], True),
    (list[int], {"element": G.range((0, 9))}, [10], False),
    (list[str], {"anyOf": ["a", "b"]}, ["b", "a"], True),
    (list[str], {"anyOf": ["a", "b"]}, ["z"], False),
]


def _probe(annotation, guide_kwargs):
    cls = type("Probe", (), {"__annotations__": {"x": annotation}, "x": fm.guide(**guide_kwargs)})
    return fm.generable(cls)


def grammar_accepts(cls, value) -> bool:
    grammar = json_schema_grammar(cls.generation_schema().to_json_schema())
    return accepts_text(grammar, json.dumps({"x": value}, ensure_ascii=False))


def check_accepts(cls, value) -> bool:
    try:
        GeneratedContent({"x": value}).value(cls)
    except fm.ContentConversionError:
        return False
    return True


@pytest.mark.parametrize("annotation, guide_kwargs, value, accepted", TABLE,
                         ids=[f"{k}={v}-{value!r}" for _, kw, value, _ in TABLE for k, v in kw.items()])
def test_the_check_and_the_grammar_agree_with_the_table(annotation, guide_kwargs, value, accepted):
    cls = _probe(annotation, guide_kwargs)
    assert (grammar_accepts(cls, value), check_accepts(cls, value)) == (accepted, accepted)


def test_every_guide_kind_is_in_the_table():
    covered = {fm.guide(**kw).metadata["guides"][0].guide_type for _, kw, _, _ in TABLE}
    assert covered == set(fm.GuideType)


def test_the_engine_regex_flavour_is_why_the_check_does_not_use_pythons_re():
    """Where Python's re.fullmatch would disagree with the grammar (and so reject, or let through, what the
    grammar decided): Unicode \\d, a trailing newline before $, engine-only syntax."""
    differ = [(r"\d+", "\u0663"), (r"^[A-Z]{2}$", "NY\n"), (r"\p{Lu}\p{Ll}+", "Émile")]
    for regex, value in differ:
        cls = _probe(str, {"regex": regex})
        try:
            python_says = re.search(f"^(?:{regex})$", value) is not None
        except re.error:
            python_says = None   # Python cannot even read it
        assert python_says != grammar_accepts(cls, value) and check_accepts(cls, value) == grammar_accepts(cls, value)


def test_a_raw_json_schema_pattern_keeps_json_schemas_search_meaning():
    schema = fm.GenerationSchema.from_json_schema({"type": "object", "properties": {"x": {"type": "string",
                                                   "pattern": r"\w"}}, "required": ["x"]})
    grammar = json_schema_grammar(schema.to_json_schema())
    assert [accepts_text(grammar, json.dumps({"x": v})) for v in ("N", "NY", "aNYb!", "!")] == [True, True, True, False]
