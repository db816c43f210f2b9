"""`StructuredDecoding` (openafm extension): decoding-side remedies that make structured responses finish.

A small model asked for a recursive type, or a list with no upper bound, can nest or repeat until the token
budget runs out; the request then fails with DecodingFailureError (a value cut short is never returned as if
complete). Each remedy here narrows or steers decoding without ever admitting an output the schema forbids:

- max_items: arrays whose schema sets no maxItems get this bound in the grammar (never below their minItems);
- max_open_keys: objects that allow keys they do not declare (no additionalProperties) admit only their declared
  properties, or, declaring none, at most this many keys (fm/jsonschema/open_objects.py says where it is safe);
- max_depth: a recursive type ($ref back into itself) is unrolled to this many levels in the grammar; below the
  last level its lists are empty (a required non-list self-reference is left as it is: it cannot end anyway).
  Only refs that reach a cycle are inlined. Where unrolling would grow the schema past MAX_UNROLL_GROWTH times
  its size (real schemas with many mutually recursive definitions: CircleCI's grows 17x), the recursion is
  left as it is and an INFO log line says so; the other remedies still apply;
- repetition_penalty: content tokens (words, digits: no quote, bracket or comma) the response already produced are
  penalised (runtime.steering), so a list does not repeat its items: on 40 validation schemas (training-split
  schemas, not the held-out ones) the default model answered 20 non-degenerate with it off, 35 at 1.3;
- close_within: once this few tokens of budget remain, decoding walks toward the end of the value: each allowed
  token is favoured by how many strings, lists and objects it closes (runtime.steering's closing walk).

The prompt still shows the caller's schema; only the grammar that masks tokens is narrowed. A schema without
recursion is not unrolled (its $refs stay as they are). Requests that may call tools are not affected. Which remedies are on
by default, and what each buys, is measured by benchmarks/structured_finish.py (docs/results/structured_finish.json).

    >>> StructuredDecoding.off().bounded_schema({"type": "array", "items": {"type": "string"}, "minItems": 1})
    {'type': 'array', 'items': {'type': 'string'}, 'minItems': 1}
    >>> StructuredDecoding(max_items=4).bounded_schema({"type": "array", "items": {"type": "string"}, "minItems": 1})
    {'type': 'array', 'items': {'type': 'string'}, 'minItems': 1, 'maxItems': 4}
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
from typing import Any

from openafm.fm.jsonschema.open_objects import bound_open_objects
from openafm.runtime.constrained import COMPACT_JSON
from openafm.runtime.steering import SteeredConstraint


_log = logging.getLogger(__name__)
MAX_UNROLL_GROWTH = 4   # an unrolled schema larger than this many times the schema is not used

SCHEMA_INSTRUCTION = "\n\nRespond with JSON that matches this JSON Schema:\n"


def prompt_with_schema(prompt: str, schema: dict) -> str:
    """The user turn of a structured request when the schema is included in the prompt (the session's format,
    and the format the guided-generation training data uses)."""
    return prompt + SCHEMA_INSTRUCTION + json.dumps(schema, separators=(", ", ": "))


def response_json(value: Any) -> str:
    """A value as the constrained decoder writes it: compact JSON with the grammar's own separators."""
    return json.dumps(value, separators=(COMPACT_JSON["item_separator"], COMPACT_JSON["key_separator"]),
                      ensure_ascii=False)


@dataclasses.dataclass(frozen=True)
class StructuredDecoding:
    max_items: int | None = 4
    max_open_keys: int | None = 4
    max_depth: int | None = 1
    repetition_penalty: float | None = 1.3
    close_within: int | None = 96

    def __post_init__(self) -> None:
        for name in ("max_items", "max_open_keys", "max_depth", "close_within"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"StructuredDecoding.{name}={value!r} must be a positive integer, or None (off)")
        p = self.repetition_penalty
        if p is not None and (isinstance(p, bool) or not isinstance(p, (int, float)) or p < 1):
            raise ValueError(f"StructuredDecoding.repetition_penalty={p!r} must be a number >= 1, or None (off)")

    @classmethod
    def off(cls) -> StructuredDecoding:
        """No remedy: the grammar is exactly the schema and decoding is not steered."""
        return cls(max_items=None, max_open_keys=None, max_depth=None, repetition_penalty=None, close_within=None)

    def replace(self, **changes) -> StructuredDecoding:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def bounded_schema(self, schema: dict) -> dict:
        """The schema the grammar enforces: `schema` narrowed by max_depth, max_items and max_open_keys (a copy)."""
        schema = copy.deepcopy(schema)
        if self.max_depth is not None and _is_recursive(schema):
            unrolled = _unroll(schema, schema, self.max_depth, (), _reaching_cycles(schema))
            for key in ("$defs", "definitions"):   # still the home of the refs left in place
                if key in schema:
                    unrolled.setdefault(key, schema[key])
            before, after = len(json.dumps(schema)), len(json.dumps(unrolled))
            if after <= MAX_UNROLL_GROWTH * before:
                schema = unrolled
            else:
                _log.info("StructuredDecoding.max_depth: unrolling %r would grow it %.1fx (limit %d): its "
                          "recursion is left as it is", schema.get("title", "the schema"), after / before,
                          MAX_UNROLL_GROWTH)
        if self.max_items is not None:
            _bound_arrays(schema, self.max_items)
        if self.max_open_keys is not None:
            schema = bound_open_objects(schema, self.max_open_keys)
        return schema

    def steer(self, constraint, budget: int):
        """The constraint, wrapped to steer decoding when a steering remedy is on."""
        if self.repetition_penalty is None and self.close_within is None:
            return constraint
        return SteeredConstraint(constraint, budget=budget, repetition_penalty=self.repetition_penalty,
                                 close_within=self.close_within)


def _refs(node: Any) -> set[str]:
    """The $ref strings inside a schema node (not following them)."""
    if isinstance(node, list):
        return set().union(*(_refs(n) for n in node)) if node else set()
    if not isinstance(node, dict):
        return set()
    found = {node["$ref"]} if isinstance(node.get("$ref"), str) else set()
    return found.union(*(_refs(v) for k, v in node.items() if k not in ("$defs", "definitions")))


def _is_recursive(root: dict) -> bool:
    """Whether following local $refs from the root can come back to a schema already on the path."""
    acyclic: set[str] = set()                             # refs already explored without finding a cycle

    def visit(ref: str, path: tuple[str, ...]) -> bool:
        if ref in path:
            return True
        if ref in acyclic or not ref.startswith("#"):
            return False
        try:
            target = _resolve(root, ref)
        except (KeyError, TypeError, ValueError):
            return False
        if any(visit(r, path + (ref,)) for r in sorted(_refs(target))):
            return True
        acyclic.add(ref)
        return False
    return visit("#", ())


def _resolve(root: dict, ref: str) -> dict:
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        raise ValueError(f"$ref {ref!r}: only references inside the schema ('#', '#/...') can be unrolled")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def _reaching_cycles(root: dict) -> set[str]:
    """The local refs from which following refs can reach a cycle: only these need inlining to bound recursion
    (a ref that reaches none stays a $ref, compiled once by the engine however often it is used)."""
    edges: dict[str, set[str]] = {}
    todo = ["#"]
    while todo:
        ref = todo.pop()
        if ref in edges:
            continue
        try:
            target = _resolve(root, ref) if ref.startswith("#") else None
        except (KeyError, TypeError, ValueError):
            target = None
        edges[ref] = {r for r in _refs(target) if r.startswith("#")} if target is not None else set()
        todo.extend(edges[ref])
    reach = {ref: set(out) for ref, out in edges.items()}
    changed = True
    while changed:                                        # transitive closure (a few hundred refs at most)
        changed = False
        for ref, out in reach.items():
            more = set().union(*(reach.get(r, set()) for r in out)) - out
            if more:
                out |= more
                changed = True
    cyclic = {ref for ref, out in reach.items() if ref in out}
    return {ref for ref, out in reach.items() if ref in cyclic or out & cyclic}


def _unroll(node: Any, root: dict, depth: int, path: tuple[str, ...], inline: set[str]) -> Any:
    """Inline every $ref in ``inline`` (those reaching a cycle); a ref already on the current path counts one level
    of recursion. At `depth` levels the recursion is cut: an array of it becomes empty (maxItems 0); anything else
    keeps its $ref."""
    if isinstance(node, list):
        out_list = [_unroll(n, root, depth, path, inline) for n in node]
        return [n if c is None else c for n, c in zip(node, out_list)]   # a cut entry keeps its $ref
    if not isinstance(node, dict):
        return node
    if isinstance(node.get("$ref"), str) and node["$ref"] not in inline:
        return {k: (_unroll(v, root, depth, path, inline) or v) if isinstance(v, (dict, list)) else v
                for k, v in node.items()}
    if "$ref" in node and isinstance(node["$ref"], str):
        ref = node["$ref"]
        if path.count(ref) >= depth:
            return None                                   # the caller decides how to cut
        target = {k: v for k, v in _resolve(root, ref).items() if k not in ("$defs", "definitions", "$schema", "$id")}
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _unroll(merged, root, depth, path + (ref,), inline)
    out, cut = {}, False
    for key, value in node.items():
        if key in ("$defs", "definitions"):
            out[key] = value                              # kept for refs left in place
            continue
        child = _unroll(value, root, depth, path, inline) if isinstance(value, (dict, list)) else value
        if child is None:                                 # a recursion at its last level
            out[key] = value
            cut = cut or (key == "items" and node.get("minItems", 0) == 0)
            continue
        out[key] = child
    if cut:
        out["maxItems"] = 0                               # an empty list ends the recursion
    return out


def _bound_arrays(node: Any, max_items: int) -> None:
    if isinstance(node, list):
        for n in node:
            _bound_arrays(n, max_items)
        return
    if not isinstance(node, dict):
        return
    if node.get("type") == "array" and "maxItems" not in node and "prefixItems" not in node:
        node["maxItems"] = max(max_items, node.get("minItems", 0))
    for value in node.values():
        if isinstance(value, (dict, list)):
            _bound_arrays(value, max_items)
