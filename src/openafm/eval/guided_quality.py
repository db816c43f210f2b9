"""Whether a structured output that is valid for its schema is also a real answer: the degenerate fills a small
model falls into under a grammar — empty strings, strings of punctuation only, the same item repeated, a count the
prompt asked for ignored, invented keys in an open object.

    problems = degeneracies(value, schema, counts=(("hobbies", 3),))
    problems        # [] for a real answer; else ["$.name: empty string", "$.tags: item 2 repeats item 1", ...]

Rules (each names the JSON path where it fails):
    empty string     a string that is empty or whitespace only, unless the schema forces it (const "", enum [""],
                     maxLength 0)
    no word          a non-empty string without one letter or digit (`"); "`, `"]}]}]}"`: closing brackets
                     written into a string), unless the schema names its values (const, enum) or a pattern
    repeated items   an array with two equal items, unless the schema allows only fewer distinct values than
                     the array's minItems (then repeats are forced)
    ignored count    a root array whose length differs from the count the prompt asked for
    blank key        a key that is empty or whitespace only (an open object's invented "" key)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


def degeneracies(value: Any, schema: dict, *, counts: Sequence[tuple[str, int]] = ()) -> list[str]:
    """Every degenerate fill in `value` (already valid for `schema`), as "<path>: <what>"."""
    problems: list[str] = []
    _walk(value, schema, schema, "$", problems)
    for field, n in counts:
        got = value.get(field) if isinstance(value, dict) else None
        if not isinstance(got, list) or len(got) != n:
            problems.append(f"$.{field}: the prompt asked for {n} items, got "
                            f"{len(got) if isinstance(got, list) else 'none'}")
    return problems


def _resolve(schema: Any, root: dict) -> dict:
    """Follow local $refs ("#", "#/$defs/T", "#/definitions/T"); anything else is returned as it is."""
    seen = 0
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and seen < 32:
        ref, seen = schema["$ref"], seen + 1
        target: Any = root
        for part in ref.lstrip("#").strip("/").split("/") if ref != "#" else []:
            target = target.get(part, {}) if isinstance(target, dict) else {}
        schema = target
    return schema if isinstance(schema, dict) else {}


def _branch(value: Any, schema: dict, root: dict) -> dict:
    """The anyOf / oneOf branch `value` fits best (its type and, for objects, most shared keys)."""
    options = [_resolve(s, root) for s in schema.get("anyOf", schema.get("oneOf", []))]
    if not options:
        return schema
    def fit(s: dict) -> tuple[bool, int]:
        kind = s.get("type")
        typed = kind is None or _type_ok(value, kind)
        shared = len(set(value) & set(s.get("properties", {}))) if isinstance(value, dict) else 0
        return typed, shared
    return max(options, key=fit)


def _type_ok(value: Any, kind: Any) -> bool:
    kinds = kind if isinstance(kind, list) else [kind]
    table = {"string": str, "object": dict, "array": list, "boolean": bool, "null": type(None)}
    for k in kinds:
        if k in ("integer", "number"):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return True
        elif isinstance(value, table.get(k, ())):
            return True
    return False


def _walk(value: Any, schema: Any, root: dict, path: str, problems: list[str]) -> None:
    schema = _branch(value, _resolve(schema, root), root)
    if isinstance(value, str):
        if not value.strip() and not _forces_empty(schema):
            problems.append(f"{path}: empty string")
        elif not any(c.isalnum() for c in value) and not _names_values(schema):
            problems.append(f"{path}: no letter or digit in {value[:20]!r}")
    elif isinstance(value, list):
        items = _resolve(schema.get("items", {}), root)
        keys = [json.dumps(v, sort_keys=True) for v in value]
        distinct = _distinct_values(items, root)
        forced = distinct is not None and distinct < schema.get("minItems", 0)
        for i, k in enumerate(keys):
            if k in keys[:i] and not forced:
                problems.append(f"{path}: item {i} repeats item {keys.index(k)}")
                break
        for i, v in enumerate(value):
            _walk(v, items, root, f"{path}[{i}]", problems)
    elif isinstance(value, dict):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", {})
        for k, v in value.items():
            if not k.strip():
                problems.append(f"{path}: blank key {k!r}")
            _walk(v, props.get(k, extra if isinstance(extra, dict) else {}), root, f"{path}.{k}", problems)


def _forces_empty(schema: dict) -> bool:
    return schema.get("const") == "" or schema.get("enum") == [""] or schema.get("maxLength") == 0


def _names_values(schema: dict) -> bool:
    return "const" in schema or "enum" in schema or "pattern" in schema


def _distinct_values(schema: dict, root: dict) -> int | None:
    """How many distinct values the schema admits, where it is a small finite set (enum, const, boolean)."""
    schema = _resolve(schema, root)
    if "const" in schema:
        return 1
    if "enum" in schema:
        return len(schema["enum"])
    if schema.get("type") == "boolean":
        return 2
    if "anyOf" in schema:
        parts = [_distinct_values(s, root) for s in schema["anyOf"]]
        return None if any(p is None for p in parts) else sum(parts)
    return None
