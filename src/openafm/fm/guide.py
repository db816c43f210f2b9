r"""Generation guides: constraints on one field of a generable type (``apple_fm_sdk`` names).

A guide is attached to a dataclass-style field with :func:`guide`, which returns a
``dataclasses.field`` carrying the description and the guides as metadata (as in the SDK):

>>> import openafm.fm as fm
>>> @fm.generable("A cat's profile")
... class Cat:
...     name: str = fm.guide("Cat's name")
...     age: int = fm.guide("Age in years", range=(0, 20))
...     food: str = fm.guide("Favourite food", anyOf=["fish", "chicken", "tuna"])
...     toys: list[str] = fm.guide(min_items=1, max_items=3, element=fm.GenerationGuide.regex(r"[a-z]+"))
>>> fm.GenerationGuide.range((0, 20))
GenerationGuide.range((0, 20))
>>> Cat.generation_schema().to_json_schema()["properties"]["age"]
{'description': 'Age in years', 'type': 'integer', 'minimum': 0, 'maximum': 20}

What each guide kind means, the types it applies to, and its JSON Schema keyword:

=========  ===========================  ==========================================
guide      applies to                   JSON Schema
=========  ===========================  ==========================================
anyOf      str (and list[str] items)    ``enum`` (GuideType.anyOf's value is "enum")
constant   str                          ``enum`` of one value (as the SDK encodes it)
regex      str                          ``pattern``, anchored: ``^(?:regex)$``
minimum    int, float                   ``minimum``
maximum    int, float                   ``maximum``
range      int, float                   ``minimum`` and ``maximum``
count      list                         ``minItems`` = ``maxItems``
minItems   list                         ``minItems``
maxItems   list                         ``maxItems``
element    list                         the inner guide, applied to ``items``
=========  ===========================  ==========================================

Guides of one field combine by intersection (``range=(0, 10), minimum=5`` means 5..10). A guide
on a type it does not apply to raises :class:`UnsupportedGuideError`; guides that leave no value
(``minimum`` above ``maximum``) raise :class:`InvalidGenerationSchemaError`. Both are raised when
the schema is built, naming the field, as the SDK raises them on first use rather than at class
definition. A malformed guide value raises :class:`GuideValueError` at once.

A regex guide means the *whole* value matches (as Apple's guide does), so it is written into the
JSON Schema anchored, ``^(?:regex)$``: JSON Schema's ``pattern`` is a search (``"a"`` matches
``"cat"``), and a pattern given unanchored in a raw JSON Schema keeps that meaning. The regex is in
the decoding engine's syntax (llguidance, Rust ``regex`` flavour: ``\d`` and ``\w`` are ASCII, ``\s``
Unicode, ``\p{L}`` classes, no look-around), and :func:`pattern_accepts` checks values with the same
engine, so the check after generation and the grammar during it cannot disagree:

>>> whole_match(r"\w")
'^(?:\\w)$'
>>> [pattern_accepts(whole_match(r"\w"), v) for v in ("N", "NY", "aNYb!")]
[True, False, False]
>>> [pattern_accepts(r"\w", v) for v in ("N", "NY", "aNYb!", "!")]
[True, True, True, False]
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import field
from enum import Enum
from typing import Any, Sequence

import llguidance

from openafm.fm.errors import GuideValueError, InvalidGenerationSchemaError, UnsupportedGuideError
from openafm.runtime.constrained import accepts_text


class GuideType(Enum):
    """The kinds of generation guide (names and values as in ``apple_fm_sdk.GuideType``)."""

    anyOf = "enum"  # one of a set of strings
    constant = "constant"  # exactly this string
    count = "count"  # exactly this many items
    element = "element"  # a guide applied to each item of a list
    maxItems = "maxItems"
    maximum = "maximum"
    minItems = "minItems"
    minimum = "minimum"
    range = "range"  # (minimum, maximum)
    regex = "regex"  # a pattern the whole string matches


# The factory (and guide() keyword) that makes each kind, for messages and repr.
_FACTORY_NAME = {GuideType.maxItems: "max_items", GuideType.minItems: "min_items"}


class GenerationGuide:
    """One constraint on generated values: a :class:`GuideType` and its value.

    Make them with the factories (``GenerationGuide.range((1, 5))``) or through :func:`guide`.

    >>> GenerationGuide.element(GenerationGuide.anyOf(["tech", "home"]))
    GenerationGuide.element(GenerationGuide.anyOf(['tech', 'home']))
    >>> GenerationGuide.count(0)
    Traceback (most recent call last):
    ...
    openafm.fm.errors.GuideValueError: count must be a positive integer, got 0
    """

    guide_type: GuideType
    value: Any

    def __init__(self, guide_type: GuideType, value: Any = None):
        self.guide_type = guide_type
        self.value = value

    @property
    def name(self) -> str:
        """The guide's name as written in ``guide(...)`` keywords, e.g. ``"max_items"``."""
        return _FACTORY_NAME.get(self.guide_type, self.guide_type.name)

    def __repr__(self) -> str:
        return f"GenerationGuide.{self.name}({self.value!r})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, GenerationGuide) and self.guide_type == other.guide_type
                and self.value == other.value)

    def __hash__(self) -> int:
        return hash((self.guide_type, repr(self.value)))

    @classmethod
    def anyOf(cls, values: list[str]) -> GenerationGuide:
        """The value is one of ``values`` (a non-empty list of strings)."""
        if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
            raise GuideValueError(f"anyOf must be a non-empty list of strings, got {values!r}")
        return cls(GuideType.anyOf, values)

    @classmethod
    def constant(cls, value: str) -> GenerationGuide:
        """The value is exactly the string ``value``."""
        if not isinstance(value, str):
            raise GuideValueError(f"constant must be a string, got {value!r}")
        return cls(GuideType.constant, value)

    @classmethod
    def count(cls, count: int) -> GenerationGuide:
        """The list has exactly ``count`` items (a positive integer)."""
        if not _is_int(count) or count <= 0:
            raise GuideValueError(f"count must be a positive integer, got {count!r}")
        return cls(GuideType.count, count)

    @classmethod
    def element(cls, guide: GenerationGuide) -> GenerationGuide:
        """Apply ``guide`` to every item of the list."""
        if not isinstance(guide, GenerationGuide):
            raise GuideValueError(f"element must be a GenerationGuide, got {guide!r}")
        return cls(GuideType.element, guide)

    @classmethod
    def max_items(cls, value: int) -> GenerationGuide:
        """The list has at most ``value`` items (a non-negative integer)."""
        if not _is_int(value) or value < 0:
            raise GuideValueError(f"max_items must be a non-negative integer, got {value!r}")
        return cls(GuideType.maxItems, value)

    @classmethod
    def maximum(cls, value: int | float) -> GenerationGuide:
        """The number is at most ``value``."""
        if not _is_number(value):
            raise GuideValueError(f"maximum must be a finite number, got {value!r}")
        return cls(GuideType.maximum, value)

    @classmethod
    def min_items(cls, value: int) -> GenerationGuide:
        """The list has at least ``value`` items (a non-negative integer)."""
        if not _is_int(value) or value < 0:
            raise GuideValueError(f"min_items must be a non-negative integer, got {value!r}")
        return cls(GuideType.minItems, value)

    @classmethod
    def minimum(cls, value: int | float) -> GenerationGuide:
        """The number is at least ``value``."""
        if not _is_number(value):
            raise GuideValueError(f"minimum must be a finite number, got {value!r}")
        return cls(GuideType.minimum, value)

    @classmethod
    def range(cls, range_tuple: tuple) -> GenerationGuide:
        """The number lies in ``range_tuple = (minimum, maximum)``, both ends included."""
        if not (isinstance(range_tuple, tuple) and len(range_tuple) == 2 and all(map(_is_number, range_tuple))):
            raise GuideValueError(f"range must be a tuple (minimum, maximum) of finite numbers, got {range_tuple!r}")
        return cls(GuideType.range, range_tuple)

    @classmethod
    def regex(cls, pattern: str) -> GenerationGuide:
        """The whole string matches ``pattern``."""
        if not isinstance(pattern, str):
            raise GuideValueError(f"regex must be a string, got {pattern!r}")
        return cls(GuideType.regex, pattern)


def guide(
    description: str | None = None,
    *,
    anyOf: list[str] | None = None,
    constant: str | None = None,
    count: int | None = None,
    element: GenerationGuide | None = None,
    max_items: int | None = None,
    maximum: int | float | None = None,
    min_items: int | None = None,
    minimum: int | float | None = None,
    range: tuple | None = None,
    regex: str | None = None,
) -> Any:
    """A dataclass field with a description and guides (the SDK's ``guide``, Swift's ``@Guide``).

    Returns ``dataclasses.field(metadata={"description": ..., "guides": [...]})``; the field has
    no default, as in the SDK, so the model always generates it.

    >>> f = guide("Age in years", range=(0, 120))
    >>> f.metadata["description"], f.metadata["guides"]
    ('Age in years', [GenerationGuide.range((0, 120))])
    >>> guide(anyOf="red")
    Traceback (most recent call last):
    ...
    openafm.fm.errors.GuideValueError: anyOf must be a non-empty list of strings, got 'red'
    """
    if description is not None and not isinstance(description, str):
        raise GuideValueError(f"description must be a string, got {description!r}")
    G = GenerationGuide
    requested = [(anyOf, G.anyOf), (constant, G.constant), (count, G.count), (element, G.element),
                 (max_items, G.max_items), (maximum, G.maximum), (min_items, G.min_items),
                 (minimum, G.minimum), (range, G.range), (regex, G.regex)]
    guides = [make(value) for value, make in requested if value is not None]
    metadata: dict[str, Any] = {"description": description}
    if guides:
        metadata["guides"] = guides
    return field(metadata=metadata)


# ---- guides -> JSON Schema keywords (used by schema.py) ---------------------------------------

GUIDES_BY_KIND: dict[str, frozenset[GuideType]] = {
    "string": frozenset({GuideType.anyOf, GuideType.constant, GuideType.regex}),
    "integer": frozenset({GuideType.minimum, GuideType.maximum, GuideType.range}),
    "number": frozenset({GuideType.minimum, GuideType.maximum, GuideType.range}),
    "array": frozenset({GuideType.count, GuideType.minItems, GuideType.maxItems, GuideType.element,
                        GuideType.anyOf}),  # anyOf on a list constrains its items, as in the SDK
    "boolean": frozenset(),
    "object": frozenset(),
}


def check_applicable(guides: Sequence[GenerationGuide], kind: str, where: str, type_name: str) -> None:
    """Raise :class:`UnsupportedGuideError` for the first guide that does not apply to ``kind``."""
    allowed = GUIDES_BY_KIND[kind]
    for g in guides:
        if g.guide_type not in allowed:
            names = ", ".join(sorted(_FACTORY_NAME.get(t, t.name) for t in allowed)) or "none"
            raise UnsupportedGuideError(f"guide {g.name} ({g!r}) does not apply to {where} of type {type_name}; "
                                        f"guides that apply to {type_name}: {names}")


def split_array_guides(guides: Sequence[GenerationGuide]) -> tuple[list[GenerationGuide], list[GenerationGuide]]:
    """Split a list field's guides into (guides on the list, guides on each item).

    ``element(g)`` contributes ``g`` to the items; ``anyOf`` on a list constrains its items.
    """
    own, items = [], []
    for g in guides:
        if g.guide_type is GuideType.element:
            items.append(g.value)
        elif g.guide_type is GuideType.anyOf:
            items.append(g)
        else:
            own.append(g)
    return own, items


def guide_keywords(guides: Sequence[GenerationGuide], kind: str, where: str, type_name: str) -> dict[str, Any]:
    """The JSON Schema keywords for ``guides`` on a value of JSON type ``kind``.

    >>> guide_keywords([GenerationGuide.range((0, 10)), GenerationGuide.minimum(5)], "integer", "field 'x'", "int")
    {'minimum': 5, 'maximum': 10}
    >>> guide_keywords([GenerationGuide.minimum(3), GenerationGuide.maximum(1)], "number", "field 'P.w'", "float")
    Traceback (most recent call last):
    ...
    openafm.fm.errors.InvalidGenerationSchemaError: invalid generation schema: field 'P.w': ... 3 > maximum 1)
    """
    check_applicable(guides, kind, where, type_name)
    if not guides:
        return {}
    if kind == "string":
        return _string_keywords(guides, where)
    if kind in ("integer", "number"):
        return _bounds(guides, where, GuideType.minimum, GuideType.maximum, "minimum", "maximum")
    return _bounds(guides, where, GuideType.minItems, GuideType.maxItems, "minItems", "maxItems")  # array


def _string_keywords(guides: Sequence[GenerationGuide], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    choices: list[str] | None = None
    for g in guides:
        if g.guide_type in (GuideType.anyOf, GuideType.constant):
            values = g.value if g.guide_type is GuideType.anyOf else [g.value]
            choices = list(values) if choices is None else [c for c in choices if c in values]
    if choices is not None:
        if not choices:
            raise InvalidGenerationSchemaError(f"{where}: guides {_names(guides)} allow no string at all")
        out["enum"] = list(dict.fromkeys(choices))
    patterns = [g.value for g in guides if g.guide_type is GuideType.regex]
    if len(patterns) > 1:
        raise InvalidGenerationSchemaError(f"{where}: at most one regex guide per value, got {patterns!r}")
    if patterns:
        out["pattern"] = whole_match(patterns[0])
    return out


def whole_match(regex: str) -> str:
    """The JSON Schema ``pattern`` that a whole string matching ``regex`` satisfies (and nothing else)."""
    return f"^(?:{regex})$"


def pattern_accepts(pattern: str, value: str) -> bool:
    """Whether ``value`` satisfies the JSON Schema ``pattern`` (a search, as JSON Schema defines it),
    decided by the decoding engine that enforces the pattern during generation."""
    return accepts_text(_string_grammar(pattern), json.dumps(value, ensure_ascii=False))


@functools.lru_cache(maxsize=256)
def _string_grammar(pattern: str) -> str:
    return llguidance.LLMatcher.grammar_from_json_schema(json.dumps({"type": "string", "pattern": pattern}))


def _bounds(guides: Sequence[GenerationGuide], where: str, low_type: GuideType, high_type: GuideType,
            low_key: str, high_key: str) -> dict[str, Any]:
    """Intersect minimum/maximum/range (or minItems/maxItems/count) guides into two keywords."""
    lows, highs = [], []
    for g in guides:
        if g.guide_type is low_type:
            lows.append(g.value)
        elif g.guide_type is high_type:
            highs.append(g.value)
        elif g.guide_type in (GuideType.range, GuideType.count):
            low, high = g.value if g.guide_type is GuideType.range else (g.value, g.value)
            lows.append(low)
            highs.append(high)
    out: dict[str, Any] = {}
    if lows:
        out[low_key] = max(lows)
    if highs:
        out[high_key] = min(highs)
    if lows and highs and out[low_key] > out[high_key]:
        raise InvalidGenerationSchemaError(f"{where}: guides {_names(guides)} leave no value "
                                           f"({low_key} {out[low_key]} > {high_key} {out[high_key]})")
    return out


def _names(guides: Sequence[GenerationGuide]) -> str:
    return ", ".join(f"{g.name}({g.value!r})" for g in guides)


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
