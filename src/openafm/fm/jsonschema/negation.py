r"""The exact complement of a JSON Schema, where the engine's JSON Schema can say it; and disjointness of two schemas.

The decoding engine has no ``not``. The rewrites of ``not``, ``if``/``then``/``else`` and overlapping ``oneOf``
branches (``raw_schema.py``) need the complement of a subschema: :func:`negate` builds it from keywords the
engine enforces, admitting exactly the values the schema refuses, or raises :class:`CannotNegate` saying why.
A schema is the conjunction of its keywords, so its complement is the union of each keyword's complement, each
guarded by the type the keyword applies to (``minLength`` says nothing of a number):

>>> negate({"type": "string", "minLength": 2}, lambda ref: None)
{'anyOf': [{'type': ['null', 'boolean', 'object', 'array', 'number']}, {'type': 'string', 'maxLength': 1}]}
>>> negate({"required": ["a", "b"]}, lambda ref: None)
{'anyOf': [{'type': 'object', 'properties': {'a': False}}, {'type': 'object', 'properties': {'b': False}}]}

A string outside a finite set is a regex over the set's trie (any text that leaves the trie or stops off a word):

>>> not_strings_pattern(["ab"])
'^(?:|[^a][\\s\\S]*|a(?:|[^b][\\s\\S]*|b(?:[\\s\\S]+)))$'
"""

from __future__ import annotations

import itertools
import json
from typing import Any, Callable

from openafm.fm.guide import pattern_accepts
from openafm.fm.jsonschema.keywords import KeywordKind, kind_of
from openafm.fm.jsonschema.narrowing import Narrowing

JSON_TYPES = ("null", "boolean", "object", "array", "string", "number")
ALL_TYPES = frozenset(JSON_TYPES)
_MAX_DEPTH = 16
MAX_NARROWED_NODES = 400   # narrowed: a complement with more nodes than this keeps only one part of its union
Resolve = Callable[[str], Any]   # a $ref -> the subschema it names (None: not a local reference)


class CannotNegate(Exception):
    """The complement of a schema is not expressible exactly with the keywords the engine enforces."""


def negate(schema: Any, resolve: Resolve, depth: int = 0, narrowing: Narrowing | None = None) -> Any:
    """A raw JSON Schema admitting exactly the JSON values ``schema`` refuses.

    With ``narrowing``, a keyword whose complement is not expressible contributes only the part that is (or
    nothing), so the result admits a subset of those values; what was left out is recorded there.
    """
    if depth > _MAX_DEPTH:
        raise CannotNegate("the complement of a recursive $ref")
    if schema is True or schema == {}:
        return False
    if schema is False:
        return True
    if not isinstance(schema, dict):
        raise CannotNegate(f"not a schema: {schema!r}")
    parts: list[Any] = []
    for key, value in schema.items():
        try:
            parts.extend(_negate_keyword(key, value, schema, resolve, depth, narrowing))
        except CannotNegate as e:
            if narrowing is None:
                raise
            narrowing.give_up(str(e))
            parts.extend(_narrowed_complement(key, value))
    parts = [p for p in parts if p is not False]
    if narrowing is not None and len(parts) > 1 and size_over(parts, MAX_NARROWED_NODES) is None:
        fitting = [p for p in parts if depth or narrowing.context is None
                   or not disjoint(p, narrowing.context, resolve)] or parts
        parts = [min(fitting, key=lambda p: size_over(p, 10**9))]   # a subset of the union: its smallest part
        narrowing.give_up("only one part of a large complement")
    if not parts:
        return False
    return parts[0] if len(parts) == 1 else {"anyOf": parts}


def size_over(schema: Any, limit: int) -> int | None:
    """How many nodes (dicts, lists, values) ``schema`` has, counted up to ``limit``; None past it."""
    count, stack = 0, [schema]
    while stack:
        node = stack.pop()
        count += 1
        if count > limit:
            return None
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return count


def _narrowed_complement(key: str, value: Any) -> list[Any]:
    """The part of keyword ``key``'s complement that is expressible, where it has no exact one."""
    if key == "type":
        types = {value} if isinstance(value, str) else set(value)
        rest = [t for t in JSON_TYPES if t not in types and t != "number"]   # not the non-integer numbers
        return [{"type": rest}] if rest else []
    if key in ("enum", "const"):
        values = value if key == "enum" else [value]
        composite = {json_type(v) for v in values} & {"object", "array"}   # no complement said for these kinds
        out = []
        for part in not_values([v for v in values if json_type(v) not in composite]):
            if isinstance(part.get("type"), list):
                part = {**part, "type": [t for t in part["type"] if t not in composite]}
            if part.get("type") != []:
                out.append(part)
        return out
    return []


def _negate_keyword(key: str, value: Any, schema: dict, resolve: Resolve, depth: int,
                    narrowing: Narrowing | None) -> list[Any]:
    """The alternatives whose union is every value failing keyword ``key`` (with its siblings where they pair)."""
    alone = ("then", "else", "additionalItems", "minContains", "maxContains")
    if key in alone or kind_of(key) is KeywordKind.ANNOTATION:
        return []   # alone (or annotations) they constrain nothing; then/else are read with `if`
    if key == "type":
        types = {value} if isinstance(value, str) else set(value)
        if "integer" in types and "number" not in types:
            raise CannotNegate("the complement of type integer holds the non-integer numbers")
        rest = [t for t in JSON_TYPES if t not in types]
        return [{"type": rest}] if rest else []
    if key in ("enum", "const"):
        return not_values(value if key == "enum" else [value])
    if key == "required":
        return [{"type": "object", "properties": {name: False}} for name in value]
    if key == "properties":
        out = []
        for name, sub in value.items():
            n = negate(sub, resolve, depth + 1, narrowing)
            if n is not False:
                out.append({"type": "object", "required": [name], "properties": {name: n}})
        return out
    if key in _BOUND_COMPLEMENTS:
        kind, other = _BOUND_COMPLEMENTS[key]
        if key.startswith("min") and key != "minimum" and value <= 0:
            return []   # minLength 0 refuses nothing
        return [{"type": kind, other: value - 1 if key.startswith("min") else value + 1}]
    if key in ("minimum", "maximum"):
        exclusive = schema.get("exclusiveMinimum" if key == "minimum" else "exclusiveMaximum") is True  # draft-04
        if key == "minimum":
            return [{"type": "number", "maximum" if exclusive else "exclusiveMaximum": value}]
        return [{"type": "number", "minimum" if exclusive else "exclusiveMinimum": value}]
    if key in ("exclusiveMinimum", "exclusiveMaximum"):
        if isinstance(value, bool):
            return []   # draft-04: read with minimum / maximum
        return [{"type": "number", "maximum" if key == "exclusiveMinimum" else "minimum": value}]
    return _negate_applicator(key, value, schema, resolve, depth, narrowing)


def _negate_applicator(key: str, value: Any, schema: dict, resolve: Resolve, depth: int,
                       narrowing: Narrowing | None) -> list[Any]:
    """_negate_keyword for the keywords that apply subschemas (items, combinators, $ref, if, contains, ...)."""
    if key == "prefixItems" or (key == "items" and isinstance(value, list)):
        out = []
        for i, sub in enumerate(value):
            n = negate(sub, resolve, depth + 1, narrowing)
            if n is not False:
                out.append({"type": "array", "minItems": i + 1, "prefixItems": [True] * i + [n]})
        return out
    if key == "anyOf":
        return [{"allOf": [negate(s, resolve, depth + 1, narrowing) for s in value]}]
    if key == "allOf":
        return [negate(s, resolve, depth + 1, narrowing) for s in value]
    if key == "not":
        return [value]
    if key == "$ref":
        target = resolve(value)
        if target is None:
            raise CannotNegate(f"$ref {value!r} is not a local reference")
        return [negate(target, resolve, depth + 1, narrowing)]
    if key == "if":
        out = []
        if "then" in schema:
            out.append({"allOf": [value, negate(schema["then"], resolve, depth + 1, narrowing)]})
        if "else" in schema:
            out.append({"allOf": [negate(value, resolve, depth + 1, narrowing),
                                  negate(schema["else"], resolve, depth + 1, narrowing)]})
        return out
    if key == "uniqueItems" and value is False:
        return []
    if key == "additionalProperties" and narrowing is not None and narrowing.names:
        listed, patterns = schema.get("properties", {}), schema.get("patternProperties", {})
        extra = [n for n in narrowing.names if n not in listed and not any(pattern_accepts(p, n) for p in patterns)]
        inner = negate(value, resolve, depth + 1, narrowing)
        narrowing.give_up("objects whose extra keys are not among the surrounding schema's properties")
        return [] if inner is False else [{"type": "object", "required": [n], "properties": {n: inner}}
                                          for n in extra]
    if key == "contains":
        if "maxContains" in schema or schema.get("minContains", 1) != 1:
            raise CannotNegate("the complement of contains with minContains/maxContains")
        return [{"type": "array", "items": negate(value, resolve, depth + 1, narrowing)}]   # no item matches
    if key == "oneOf":   # none matches (two matching is the rest of the complement: empty when disjoint)
        if not all(disjoint(a, b, resolve) for a, b in itertools.combinations(value, 2)):
            if narrowing is None:
                raise CannotNegate("the complement of overlapping oneOf branches holds values matching two")
            narrowing.give_up("values matching two oneOf branches")
        return [{"allOf": [negate(s, resolve, depth + 1, narrowing) for s in value]}]
    raise CannotNegate(f"the complement of {key!r} is not expressible with the keywords the engine enforces")


# minLength n fails exactly where maxLength n-1 holds (for strings), and so on.
_BOUND_COMPLEMENTS = {
    "minLength": ("string", "maxLength"), "maxLength": ("string", "minLength"),
    "minItems": ("array", "maxItems"), "maxItems": ("array", "minItems"),
    "minProperties": ("object", "maxProperties"), "maxProperties": ("object", "minProperties"),
}


def not_values(values: list[Any]) -> list[Any]:
    """Alternatives admitting every JSON value except ``values``."""
    kinds = {json_type(v) for v in values}
    if kinds & {"object", "array"}:
        raise CannotNegate("the complement of an object or array value in enum/const")
    out: list[Any] = []
    absent = [t for t in JSON_TYPES if t not in kinds]
    if absent:
        out.append({"type": absent})
    strings = [v for v in values if isinstance(v, str)]
    if strings:
        out.append({"type": "string", "pattern": not_strings_pattern(strings)})
    booleans = {v for v in values if isinstance(v, bool)}
    if len(booleans) == 1:
        out.append({"type": "boolean", "const": not booleans.pop()})
    numbers = sorted({v for v in values if json_type(v) == "number"})
    if numbers:
        out.append({"type": "number", "exclusiveMaximum": numbers[0]})
        out += [{"type": "number", "exclusiveMinimum": a, "exclusiveMaximum": b} for a, b in zip(numbers, numbers[1:])]
        out.append({"type": "number", "exclusiveMinimum": numbers[-1]})
    return out


def not_strings_pattern(words: list[str]) -> str:
    """A JSON Schema pattern matching exactly the strings not in ``words``."""
    trie: dict = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}   # end of a word

    def rest(node: dict) -> str:
        children = [c for c in node if c]
        alts = [] if "" in node else [""]
        if children:
            alts.append("[^" + "".join(_escape(c) for c in children) + r"][\s\S]*")
        else:
            alts.append(r"[\s\S]+")
        alts += [_escape(c) + "(?:" + rest(node[c]) + ")" for c in children]
        return "|".join(alts)

    return "^(?:" + rest(trie) + ")$"


def _escape(ch: str) -> str:
    return ch if ch.isalnum() or ch == "_" else "\\x{%x}" % ord(ch)


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}[type(value)]


# ---- disjointness -----------------------------------------------------------------------------------------

def types_of(schema: Any, resolve: Resolve, depth: int = 0) -> frozenset[str]:
    """The JSON types a value of ``schema`` can have (a superset; integer counts as number)."""
    if schema is False:
        return frozenset()
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return ALL_TYPES
    out = ALL_TYPES
    if "type" in schema:
        named = [schema["type"]] if isinstance(schema["type"], str) else schema["type"]
        out &= {"number" if t == "integer" else t for t in named}
    if "const" in schema:
        out &= {json_type(schema["const"])}
    if isinstance(schema.get("enum"), list):
        out &= {json_type(v) for v in schema["enum"]}
    if isinstance(schema.get("$ref"), str) and (target := resolve(schema["$ref"])) is not None:
        out &= types_of(target, resolve, depth + 1)
    for s in schema.get("allOf", []):
        out &= types_of(s, resolve, depth + 1)
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            out &= frozenset().union(*(types_of(s, resolve, depth + 1) for s in schema[key]))
    return out


def disjoint(a: Any, b: Any, resolve: Resolve, depth: int = 0) -> bool:
    """True only when no JSON value satisfies both ``a`` and ``b`` (False: they may overlap)."""
    if depth > _MAX_DEPTH:
        return False
    if not types_of(a, resolve) & types_of(b, resolve):
        return True
    a, b = _deref(a, resolve), _deref(b, resolve)
    if not isinstance(a, dict) or not isinstance(b, dict):
        return a is False or b is False
    va, vb = _values(a), _values(b)
    if va is not None and vb is not None and not va & vb:
        return True
    for values, other in ((a, b), (b, a)):   # every listed value fails the other schema
        listed = values.get("enum", [values["const"]] if "const" in values else None)
        if isinstance(listed, list) and all(fails(v, other, resolve, depth + 1) for v in listed):
            return True
    if types_of(a, resolve) == types_of(b, resolve) == {"array"} and min(a.get("minItems", 0), b.get("minItems", 0)) \
            and isinstance(a.get("items"), dict) and isinstance(b.get("items"), dict) \
            and disjoint(a["items"], b["items"], resolve, depth + 1):
        return True   # the first item cannot be both
    return _discriminated(a, b, resolve, depth) or _discriminated(b, a, resolve, depth)


def fails(value: Any, schema: Any, resolve: Resolve, depth: int = 0) -> bool:
    """True only when ``value`` certainly fails ``schema`` (a keyword read here refuses it); False: it may pass."""
    if schema is False:
        return True
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return False
    kind = json_type(value)
    if kind not in types_of({k: v for k, v in schema.items() if k in ("type", "const", "enum")}, resolve) \
            and not (kind == "number" and schema.get("type") == "integer" and float(value).is_integer()):
        return True
    if "const" in schema and _canonical(schema["const"]) != _canonical(value):
        return True
    if isinstance(schema.get("enum"), list) and _canonical(value) not in {_canonical(v) for v in schema["enum"]}:
        return True
    if kind == "string":
        if len(value) < schema.get("minLength", 0) or len(value) > schema.get("maxLength", len(value)):
            return True
        if isinstance(schema.get("pattern"), str) and not pattern_accepts(schema["pattern"], value):
            return True
    if kind == "number" and (value < schema.get("minimum", value) or value > schema.get("maximum", value)):
        return True
    if isinstance(schema.get("$ref"), str) and (target := resolve(schema["$ref"])) is not None \
            and fails(value, target, resolve, depth + 1):
        return True
    if any(fails(value, s, resolve, depth + 1) for s in schema.get("allOf", [])):
        return True
    if _surely_passes(value, schema.get("not")):
        return True
    return any(isinstance(schema.get(k), list) and all(fails(value, s, resolve, depth + 1) for s in schema[k])
               for k in ("anyOf", "oneOf"))


def _surely_passes(value: Any, schema: Any) -> bool:
    """True only when ``value`` certainly passes ``schema`` (read: a list of values, with a type)."""
    if schema is True or schema == {}:
        return True
    if not isinstance(schema, dict) or set(schema) - _NOTES - {"type"} not in ({"enum"}, {"const"}):
        return False
    listed = schema["enum"] if "enum" in schema else [schema["const"]]
    named = schema.get("type", JSON_TYPES)
    named = [named] if isinstance(named, str) else named
    kind = json_type(value)
    typed = kind in named or kind == "number" and "integer" in named and float(value).is_integer()
    return isinstance(listed, list) and typed and _canonical(value) in {_canonical(v) for v in listed}


def _discriminated(a: dict, b: dict, resolve: Resolve, depth: int) -> bool:
    """``a`` is object-only and requires a property whose value ``b`` cannot share (or forbids outright)."""
    if types_of(a, resolve) != {"object"}:
        return False
    for name in a.get("required", []):
        mine = a.get("properties", {}).get(name, True)
        if name in b.get("properties", {}):
            theirs = b["properties"][name]
        elif b.get("additionalProperties") is False and not b.get("patternProperties"):
            theirs = False
        else:
            continue
        if theirs is False or disjoint(mine, theirs, resolve, depth + 1):
            return True
    return False


def _deref(schema: Any, resolve: Resolve) -> Any:
    for _ in range(_MAX_DEPTH):
        if not (isinstance(schema, dict) and set(schema) - _NOTES == {"$ref"}):
            break
        target = resolve(schema["$ref"])
        if target is None:
            break
        schema = target
    return schema


_NOTES = frozenset({"title", "description", "$comment", "default", "examples", "markdownDescription"})


def _values(schema: dict) -> set[str] | None:
    """The allowed values (canonical JSON) when the schema lists them, else None."""
    if "const" in schema:
        return {_canonical(schema["const"])}
    if isinstance(schema.get("enum"), list):
        return {_canonical(v) for v in schema["enum"]}
    return None


def _canonical(value: Any) -> str:
    if json_type(value) == "number":
        return repr(float(value))
    return json.dumps(value, sort_keys=True)
