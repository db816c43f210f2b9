"""Exact simplifications of a schema node that keep the engine's intersections small (same values, fewer nodes).

The engine (llguidance) builds ``allOf`` and the siblings of ``anyOf`` by intersecting schemas, distributing over
every ``anyOf``, and caps what it builds (50,000 nodes: "schema too large"). Real schemas (SchemaStore) hit the cap
through two patterns this module rewrites, both exactly:

- A member (``allOf``/``anyOf``/``oneOf`` entry, ``if``/``then``/``else``, ``not``) repeating a property constraint
  of its node — ``{"properties": {"k": {"$ref": "#/.../properties/k"}}}`` beside the node's own ``k`` — says
  nothing the node does not: the constraint becomes ``true`` (no intersection with the referenced schema).
- An ``allOf`` of conditionals on one discriminator, ``{"if": {"properties": {"type": {"const": "a"}}}, "then":
  A}``, ``{"if": ... "b" ...}``, ...: k members become 2^k intersections; as one ``anyOf`` with a branch per value
  (its ``then`` parts), one for other values and one for the key absent, it is k + 2.

>>> node = {"type": "object", "properties": {"t": {"enum": ["a", "b"]}}, "allOf": [
...     {"if": {"properties": {"t": {"const": "a"}}, "required": ["t"]}, "then": {"required": ["x"]}},
...     {"if": {"properties": {"t": {"const": "b"}}, "required": ["t"]}, "then": {"required": ["y"]}}]}
>>> for branch in simplify(node, lambda ref: None)["allOf"][0]["anyOf"]:
...     print(branch)
{'allOf': [{'type': 'object', 'properties': {'t': {'const': 'a'}}, 'required': ['t']}, {'required': ['x']}]}
{'allOf': [{'type': 'object', 'properties': {'t': {'const': 'b'}}, 'required': ['t']}, {'required': ['y']}]}
{'type': 'object', 'properties': {'t': {'not': {'enum': ['a', 'b']}}}, 'required': ['t']}
{'allOf': [{'type': 'object', 'properties': {'t': False}}]}
{'allOf': [{'type': ['null', 'boolean', 'array', 'string', 'number']}, {'required': ['x']}, {'required': ['y']}]}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

Resolve = Callable[[str], Any]
_MEMBER_LISTS = ("allOf", "anyOf", "oneOf")
_MEMBER_ONE = ("if", "then", "else", "not")
_NOTES = frozenset({"title", "description", "$comment", "markdownDescription", "examples", "default"})


def simplify(schema: dict, resolve: Resolve) -> dict:
    """``schema`` with both rewrites of the module docstring applied (a new dict; the input is not changed)."""
    own = schema.get("properties")
    out = dict(schema)
    if isinstance(own, dict) and own:
        for key in _MEMBER_LISTS:
            if isinstance(out.get(key), list):
                out[key] = [_drop_repeated(m, own, resolve) for m in out[key]]
        for key in _MEMBER_ONE:
            if key in out:
                out[key] = _drop_repeated(out[key], own, resolve)
    if isinstance(out.get("allOf"), list):
        out["allOf"] = _merge_conditionals(out["allOf"])
    return out


def _drop_repeated(member: Any, own: dict, resolve: Resolve, depth: int = 0) -> Any:
    """``member`` with each property constraint that repeats the node's own (``own``) made ``true``."""
    if not isinstance(member, dict) or depth > 8:
        return member
    out = dict(member)
    props = out.get("properties")
    if isinstance(props, dict):
        out["properties"] = {k: (True if k in own and _same(s, own[k], resolve) else s) for k, s in props.items()}
    for key in _MEMBER_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [_drop_repeated(m, own, resolve, depth + 1) for m in out[key]]
    for key in _MEMBER_ONE:
        if key in out:
            out[key] = _drop_repeated(out[key], own, resolve, depth + 1)
    return out


def _same(mine: Any, theirs: Any, resolve: Resolve) -> bool:
    if mine == theirs:
        return True
    if isinstance(mine, dict) and isinstance(mine.get("$ref"), str) and set(mine) - _NOTES == {"$ref"}:
        target = resolve(mine["$ref"])
        return target is not None and (target is theirs or target == theirs)
    return False


def _merge_conditionals(members: list) -> list:
    """Conditionals on one discriminator key (two or more) -> one anyOf member; the other members unchanged.

    Each value ``x`` passes exactly one branch: an object whose key holds a listed value (the ``then`` of every
    conditional listing it), an object whose key holds another value (none), an object without the key (the
    ``then`` of each ``if`` not requiring the key), or not an object (each ``if`` not requiring an object).
    """
    found = [(i, c) for i, m in enumerate(members) if (c := _conditional(m)) is not None]
    if len(found) < 2 or len({c.key for _, c in found}) != 1:
        return members
    key = found[0][1].key
    values: list[Any] = []
    for _, c in found:
        values += [v for v in c.values if not _listed(v, values)]
    branches: list[Any] = []
    for v in values:
        thens = [c.then for _, c in found if _listed(v, c.values)]
        branches.append({"allOf": [{"type": "object", "properties": {key: {"const": v}}, "required": [key]}, *thens]})
    branches.append({"type": "object", "properties": {key: {"not": {"enum": values}}}, "required": [key]})
    absent = [c.then for _, c in found if not c.needs_key]
    branches.append({"allOf": [{"type": "object", "properties": {key: False}}, *absent]})
    other_types = [c.then for _, c in found if not c.needs_object]
    branches.append({"allOf": [{"type": ["null", "boolean", "array", "string", "number"]}, *other_types]})
    taken = {i for i, _ in found}
    return [m for i, m in enumerate(members) if i not in taken] + [{"anyOf": branches}]


@dataclass(frozen=True)
class _Conditional:
    key: str
    values: list
    needs_key: bool      # the `if` requires the key (an object without it fails the `if`)
    needs_object: bool   # the `if` has type object (a value that is not an object fails it)
    then: Any


def _conditional(member: Any) -> _Conditional | None:
    """``{"if": {"properties": {key: {"const"|"enum": ...}}}, "then": ...}`` (no else, nothing else that
    constrains) read as a :class:`_Conditional`; None for any other member."""
    if not isinstance(member, dict) or set(member) - _NOTES != {"if", "then"}:
        return None
    cond = member["if"]
    if not isinstance(cond, dict) or set(cond) - _NOTES - {"required", "type"} != {"properties"}:
        return None
    if cond.get("type", "object") != "object":
        return None
    props = cond["properties"]
    if not isinstance(props, dict) or len(props) != 1:
        return None
    (key, sub), = props.items()
    if not isinstance(sub, dict) or set(sub) - _NOTES not in ({"const"}, {"enum"}):
        return None
    values = [sub["const"]] if "const" in sub else sub["enum"]
    if not isinstance(values, list) or any(isinstance(v, (dict, list)) for v in values):
        return None
    required = cond.get("required", [])
    if required not in ([], [key]):
        return None
    return _Conditional(key, values, bool(required), cond.get("type") == "object", member["then"])


def _listed(value: Any, values: list) -> bool:
    """JSON equality (1 and 1.0 are one value; true is not 1)."""
    def number(x: Any) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool)

    return any((type(value) is type(v) or number(value) and number(v)) and value == v for v in values)
