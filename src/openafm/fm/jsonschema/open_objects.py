"""Open objects narrowed for decoding: where a schema lets an object hold keys it does not declare (no
additionalProperties), a small model invents keys — `"": ""` pairs, nested `"data"` objects — until its token
budget runs out. `bound_open_objects` returns a copy in which

- an object that declares properties and says nothing of others admits only those (``additionalProperties:
  false``);
- a map — an object whose undeclared keys are allowed (no ``additionalProperties``, or a schema for their
  values) and whose declared keys, if any, are all required — admits at most ``max(max_keys, minProperties)``
  keys (``maxProperties``).

Every value the narrowed schema admits, the schema admits (a narrowing, never a widening), and no narrowed node
loses every value: a node is left as it is wherever narrowing it could widen the whole or empty it — under `not`,
`if`, `oneOf` (narrowing can turn a value that matched two branches into a valid one), or beside another
constraint on the same object (`allOf`, `anyOf`, `then`/`else`, `$ref` with siblings, `dependentSchemas`,
`dependencies`, `contains`, `propertyNames`, `unevaluatedProperties`), in a definition any such place refers to,
and in an object that constrains its keys some other way or requires a key it does not declare.

    >>> bound_open_objects({"type": "object", "properties": {"a": {"type": "object"}}}, max_keys=2)
    {'type': 'object', 'properties': {'a': {'type': 'object', 'maxProperties': 2}}, 'additionalProperties': False}
    >>> bound_open_objects({"type": "object", "properties": {"a": {}}, "required": ["b"]}, max_keys=2)
    {'type': 'object', 'properties': {'a': {}}, 'required': ['b']}
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from openafm.fm.jsonschema.raw_schema import pointer, resolve_pointer

# Keys whose subschemas are combined with their neighbours (or negated): nothing under them is narrowed.
GUARDED = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "dependencies", "contains",
           "propertyNames", "unevaluatedProperties", "unevaluatedItems")
# Keys whose subschemas constrain values independently (narrowing them narrows the whole, monotonically).
PLAIN = ("properties", "patternProperties", "additionalProperties", "items", "prefixItems", "additionalItems")
# An object with any of these constrains its keys some other way: it is not closed.
KEY_CONSTRAINTS = ("patternProperties", "unevaluatedProperties", "propertyNames",
                   "dependentRequired", "dependentSchemas", "dependencies", "maxProperties", "$ref", *GUARDED)
DEFS = ("$defs", "definitions")
ANNOTATIONS = ("$schema", "$id", "$comment", "title", "description", "examples", "default", "deprecated",
               "readOnly", "writeOnly")


def bound_open_objects(schema: Any, max_keys: int) -> Any:
    """A copy of `schema` with its open objects narrowed (see the module doc); `schema` is not changed. A schema
    whose guarded places refer into the main tree (a "#" or "#/properties/..." ref under allOf, say) is returned
    as it is: which nodes those refs combine with is not worth working out."""
    out = copy.deepcopy(schema)
    guarded = _guarded_refs(out)
    if any(_definition_key(ref) is None for ref in guarded):
        return out
    _narrow(out, max_keys, safe=True)
    for key in DEFS:
        defs = out.get(key) if isinstance(out, dict) else None
        if isinstance(defs, dict):
            for name, node in defs.items():
                if pointer("#", key, name) not in guarded:
                    _narrow(node, max_keys, safe=True)
    return out


def _narrow(node: Any, max_keys: int, *, safe: bool) -> None:
    """Close the safe open objects under `node`, in place; definitions are handled by the caller."""
    if isinstance(node, list):
        for child in node:
            _narrow(child, max_keys, safe=safe)
        return
    if not isinstance(node, dict):
        return
    alone = safe and not any(k in node for k in (*GUARDED, "$ref"))
    if alone:
        _close(node, max_keys)
    for key, value in node.items():
        if key in PLAIN:
            for child in _subschemas(key, value):
                _narrow(child, max_keys, safe=alone)


def _subschemas(key: str, value: Any) -> Iterable[Any]:
    """The subschemas a PLAIN keyword holds: the values of a name -> schema map, else the value itself (a schema,
    or a list of them for tuple `items` / `prefixItems`)."""
    if key in ("properties", "patternProperties") and isinstance(value, dict):
        return value.values()
    return [value]


def _close(node: dict, max_keys: int) -> None:
    """Narrow one safe object node in place (see the module doc)."""
    is_object = node.get("type") == "object" or (node.get("type") is None and "properties" in node)
    declared = node.get("properties", {})
    if not is_object or not isinstance(declared, dict) or any(k in node for k in KEY_CONSTRAINTS):
        return
    required = set(node.get("required", []))
    extra = node.get("additionalProperties", True)
    if extra is True and declared and required <= set(declared):
        node["additionalProperties"] = False              # the declared keys only
    elif extra is not False and required >= set(declared):
        # a map (undeclared keys of any name, each valid for `extra`): a bounded number of keys. The engine
        # bounds the count only where every declared key is required, which this branch checks.
        node["maxProperties"] = max(max_keys, node.get("minProperties", 0), len(required))


def _guarded_refs(root: Any) -> set[str]:
    """The refs made from a guarded place (under GUARDED keys, or by a $ref with siblings), directly or through
    the definitions they reach, each as its top-level definition ('#/$defs/name'; another ref as it is written).
    Every definition is read too (a guarded place inside one counts wherever it is used). Only schema keywords
    are followed: an `examples` value that looks like a schema is data."""
    guarded: set[str] = set()
    defs = [d for k in DEFS if isinstance(root, dict) and isinstance(root.get(k), dict) for d in root[k].values()]
    todo: list[tuple[Any, bool]] = [(root, False), *((d, False) for d in defs)]
    seen: set[tuple[int, bool]] = set()
    while todo:
        node, under_guard = todo.pop()
        if (id(node), under_guard) in seen:
            continue
        seen.add((id(node), under_guard))
        if isinstance(node, list):
            todo.extend((child, under_guard) for child in node)
            continue
        if not isinstance(node, dict):
            continue
        ref = node.get("$ref")
        if isinstance(ref, str) and (under_guard or _has_siblings(node)):
            key = _definition_key(ref)
            guarded.add(key or ref)
            target = resolve_pointer(root, key) if key else None
            if target is not None:
                todo.append((target, True))
        for key, value in node.items():
            if key in GUARDED:
                todo.append((value, True))
            elif key in PLAIN:
                todo.extend((child, under_guard or isinstance(ref, str)) for child in _subschemas(key, value))
    return guarded


def _has_siblings(node: dict) -> bool:
    """Whether a node with a $ref constrains values beside it (annotations and definitions do not)."""
    return any(k not in ANNOTATIONS and k not in DEFS and k != "$ref" for k in node)


def _definition_key(ref: str) -> str | None:
    """'#/$defs/name/...' -> '#/$defs/name' (likewise 'definitions'); any other ref -> None."""
    parts = ref.split("/")
    if len(parts) >= 3 and parts[0] == "#" and parts[1] in DEFS:
        return "/".join(parts[:3])
    return None
