"""Narrowing: where a keyword has no exact rewrite, a rewrite admitting a subset of its values — opt-in, listed.

``GenerationSchema.from_json_schema(schema)`` is exact by default (:attr:`SchemaFit.EXACT`): what the engine is
given admits exactly the schema's values, and a validation keyword with no exact rewrite raises. With
``fit=SchemaFit.NARROWED`` such a keyword is replaced by a *narrowing*: keywords the engine enforces that admit
only values the original keyword admits, but not all of them. Every generated value is then still valid
(tested against ``jsonschema``'s validator); some valid values can no longer be generated. Each narrowing is
listed on the schema (``narrowed_keywords``: where, keyword, what was given up). The narrowings:

- ``uniqueItems`` over items listed by ``enum``/``const``: the distinct values in the listed order (every
  ordered subset within minItems..maxItems, up to 64 of them); over any other items: at most one item.
- ``not``, ``if``, overlapping ``oneOf``: a complement that is not expressible keeps only the parts that are
  (``type: integer``'s complement loses the non-integer numbers; a ``pattern``'s is dropped), so the rewrite
  admits fewer values; a ``oneOf`` branch left with no value is dropped.
- ``unevaluatedProperties`` beside ``allOf``/``$ref``: the keys named by ``properties`` of the node and of
  every member that must hold; keys a member evaluates otherwise (``patternProperties``, a conditional
  branch) fall to ``unevaluatedProperties``' schema.
- ``minProperties``/``maxProperties`` over optional properties (the engine counts only required ones):
  ``maxProperties: 1`` becomes one branch per listed property; otherwise the first listed optional
  properties become required (to reach ``minProperties``) and the object is closed after enough of them.
- ``format`` values the engine lacks, by a narrower one it has or a pattern (:data:`FORMAT_NARROWINGS`):
  ``uri-reference``/``iri``/``iri-reference`` by ``uri``, ``idn-hostname`` by ``hostname``, ``idn-email`` by
  ``email``; ``regex``, ``uri-template``, ``json-pointer`` by patterns of plain characters. Others still raise.
- ``contains`` (``minContains`` n, default 1): the first n items match. ``maxContains`` still raises.
- ``propertyNames`` of a shape not read exactly: the listed properties whose names it certainly admits, and no
  other key.
- a remote ``$ref`` (never fetched): no value at all (``false``), so an optional property under it is left out.

>>> unique_items({"items": {"enum": ["a", "b"]}, "minItems": 1})["anyOf"]
[{'prefixItems': [{'enum': ['a', 'b'], 'const': 'a'}], 'minItems': 1, 'items': False}, \
{'prefixItems': [{'enum': ['a', 'b'], 'const': 'b'}], 'minItems': 1, 'items': False}, \
{'prefixItems': [{'enum': ['a', 'b'], 'const': 'a'}, {'enum': ['a', 'b'], 'const': 'b'}], 'minItems': 2, \
'items': False}]
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable

Resolve = Callable[[str], Any]

MAX_UNIQUE_BRANCHES = 64
REGEX_FORMAT_PATTERN = r"^[A-Za-z0-9_ -]*$"   # text of these characters is a regex matching itself
# format -> keywords admitting a subset of its strings (the URI forms: every URI is a URI reference and an IRI).
FORMAT_NARROWINGS: dict[str, dict[str, str]] = {
    "uri-reference": {"format": "uri"}, "iri": {"format": "uri"}, "iri-reference": {"format": "uri"},
    "idn-hostname": {"format": "hostname"}, "idn-email": {"format": "email"},
    "regex": {"pattern": REGEX_FORMAT_PATTERN},
    "uri-template": {"pattern": r"^[A-Za-z0-9/_.:-]*$"},   # literal text only: no {expressions}
    "json-pointer": {"pattern": r"^(/[A-Za-z0-9_-]*)*$"},
    "relative-json-pointer": {"pattern": r"^(0|[1-9][0-9]*)(#|(/[A-Za-z0-9_-]*)*)$"},
}
_MAX_DEPTH = 16


class SchemaFit(Enum):
    """How what the engine enforces must fit a raw JSON Schema."""

    EXACT = "exact"         # the same values; a keyword with no exact rewrite raises
    NARROWED = "narrowed"   # a subset of the values where no exact rewrite exists; each narrowing listed


class CannotNarrow(Exception):
    """Not even a narrowing is expressible (for example ``uniqueItems`` with ``minItems: 2`` over free items)."""


@dataclass
class Narrowing:
    """What one keyword's rewrite gave up, collected while it is built."""

    given_up: list[str] = field(default_factory=list)
    names: tuple[str, ...] = ()   # keys the surrounding schema lists: a narrowed "some extra key" may require one
    context: Any = None           # what the complement is intersected with: a part disjoint from it is no use

    def give_up(self, what: str) -> None:
        self.given_up.append(what)


def unique_items(schema: dict) -> dict:
    """Keywords (added beside ``schema``'s own) under which every array of ``schema`` has distinct items."""
    low, high = schema.get("minItems", 0), schema.get("maxItems")
    items = schema.get("items")
    listed = _listed_values(items)
    if listed is not None:
        sizes = range(low, min(len(listed), high if high is not None else len(listed)) + 1)
        count = sum(math.comb(len(listed), k) for k in sizes)
        if 0 < count <= MAX_UNIQUE_BRANCHES:
            branches = [_ordered_subset(items, list(subset))
                        for k in sizes for subset in itertools.combinations(listed, k)]
            return {"anyOf": branches}
    if low > 1:
        raise CannotNarrow(f"uniqueItems with minItems {low} over items that are not a short list of values")
    return {"maxItems": 1}


def _listed_values(items: Any) -> list[Any] | None:
    if not isinstance(items, dict):
        return None
    if "const" in items:
        return [items["const"]]
    if isinstance(items.get("enum"), list):
        out: list[Any] = []
        for v in items["enum"]:
            if v not in out:
                out.append(v)
        return out
    return None


def _ordered_subset(items: dict, values: list[Any]) -> dict:
    if not values:
        return {"maxItems": 0}
    return {"prefixItems": [{**items, "const": v} for v in values], "minItems": len(values), "items": False}


def evaluated_names(schema: Any, resolve: Resolve, depth: int = 0) -> tuple[set[str], bool]:
    """(the keys that ``properties`` of ``schema`` and of its required members name, whether that is all it evaluates).

    Members that must hold are ``allOf`` entries and ``$ref`` targets; a key evaluated some other way
    (``patternProperties``, ``additionalProperties``, a conditional or alternative branch) makes it not all.
    """
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return set(), schema in (True, False)
    names = set(schema.get("properties", {})) if isinstance(schema.get("properties"), dict) else set()
    complete = not any(k in schema for k in ("patternProperties", "additionalProperties", "unevaluatedProperties",
                                             "anyOf", "oneOf", "if", "dependentSchemas", "dependencies",
                                             "$dynamicRef", "$recursiveRef"))
    members = list(schema.get("allOf", []))
    if isinstance(schema.get("$ref"), str):
        target = resolve(schema["$ref"])
        if target is None:
            complete = False
        else:
            members.append(target)
    for member in members:
        more, whole = evaluated_names(member, resolve, depth + 1)
        names |= more
        complete = complete and whole
    return names, complete


def property_counts(schema: dict) -> tuple[dict, str | None]:
    """``schema``'s ``minProperties``/``maxProperties`` as keywords the engine takes: (replacements, given up).

    The replacements take the place of the node's keywords of those names (None: drop it); the two counts go.
    The engine enforces the counts only when every listed property is required. A count implied by the rest
    (``maxProperties`` over a closed object with no more properties listed, ``minProperties`` up to the
    required count) is dropped exactly (given up: None); otherwise the replacement is a narrowing.
    """
    props = schema.get("properties", {}) if isinstance(schema.get("properties"), dict) else {}
    required = [n for n in schema.get("required", []) if isinstance(n, str)]
    closed = schema.get("additionalProperties") is False and not schema.get("patternProperties")
    low, high = schema.get("minProperties", 0), schema.get("maxProperties")
    out: dict[str, Any] = {}
    if high is not None and closed and len(props) <= high:
        high = None
    if low <= len(set(required)):
        low = 0
    if not low and high is None:
        return out, None
    optional = [n for n in props if n not in required and props[n] is not False]
    if not optional:
        out.update({"minProperties": low} if low else {})
        out.update({"maxProperties": high} if high is not None else {})
        return out, None
    if high == 1 and len(required) <= 1:
        choices = [n for n in (required or optional) if n in props]
        # Each branch carries its one property's schema and the node keeps none: the engine intersects nothing.
        out["anyOf"] = [{"properties": {n: props[n]}, "required": [n], "additionalProperties": False} for n in choices]
        if low == 0 and not required:
            out["anyOf"].append({"type": "object", "additionalProperties": False})
        out.update({"properties": None, "additionalProperties": None, "patternProperties": None, "required": None})
        return out, "objects with one key: only the listed properties, not other keys"
    need = max(low - len(set(required)), 0)
    if need > len(optional):
        raise CannotNarrow(f"minProperties {low} needs keys beyond the {len(props)} listed properties")
    chosen = optional[:need]
    out["required"] = required + chosen
    given_up = f"the first {need} optional properties are always present" if need else ""
    if high is not None:
        room = high - len(set(required)) - need
        if room < 0:
            raise CannotNarrow(f"maxProperties {high} is below the required count")
        kept = set(chosen) | set(optional[need:need + room]) | set(required)
        out["properties"] = {n: (s if n in kept else False) for n, s in props.items()}
        out["additionalProperties"] = False
        out["patternProperties"] = None
        given_up = (given_up + "; " if given_up else "") + f"at most {high} keys: only listed properties, in order"
    return out, given_up


def contains(schema: dict, value: Any) -> dict:
    """Keywords (added beside ``schema``'s own) under which some item matches ``value``: the first ones do."""
    if "maxContains" in schema:
        raise CannotNarrow("maxContains (at most n items match) has no narrowing here")
    count = schema.get("minContains", 1)
    if isinstance(count, bool) or not isinstance(count, (int, float)) or count < 0 or not float(count).is_integer():
        raise CannotNarrow(f"minContains must be a non-negative integer, got {count!r}")
    count = int(count)
    return {"prefixItems": [value] * count, "minItems": count} if count else {}
