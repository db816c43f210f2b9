"""A raw JSON Schema (the ``json_schema=`` path) -> the schema the decoding engine is given.

Every keyword is looked up in ``keywords.KEYWORDS``: annotations (and keywords of no draft) are dropped and
listed with where they were; enforced keywords pass through; rewritten ones are replaced by enforced keywords
admitting exactly the same values (``not``, ``if``, ``oneOf``, ``dependencies``, ...); unsupported validation
keywords raise :class:`InvalidGenerationSchemaError` naming the keyword and its place.

>>> n = normalize({"type": "object", "self": {"vendor": "com.acme"}, "properties": {"n": {"type": "integer",
...     "x-unit": "m", "not": {"const": 0}}}})
>>> n.ignored
[('#', 'self'), ('#/properties/n', 'x-unit')]
>>> n.schema["properties"]["n"]
{'type': 'integer', 'allOf': [{'anyOf': [{'type': 'number', 'exclusiveMaximum': 0}, \
{'type': 'number', 'exclusiveMinimum': 0}]}]}

(the complement's parts no integer can take, such as the other types, are left out.)

A ``$ref`` into a place that is not a schema position (``#/$defs/plugins/shared``, a vendor keyword) still
resolves: its target moves to ``$defs``.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from openafm.fm.errors import InvalidGenerationSchemaError
from openafm.fm.jsonschema.keywords import (
    ENGINE_FORMATS,
    KEPT_ANNOTATIONS,
    KEYWORDS,
    SUBSCHEMA_LISTS,
    SUBSCHEMA_MAPS,
    SUBSCHEMA_ONE,
    KeywordKind,
    kind_of,
)
from openafm.fm.jsonschema.narrowing import (
    FORMAT_NARROWINGS,
    CannotNarrow,
    Narrowing,
    SchemaFit,
    contains,
    evaluated_names,
    property_counts,
    unique_items,
)
from openafm.fm.jsonschema.negation import CannotNegate, disjoint, negate
from openafm.fm.jsonschema.property_names import property_names
from openafm.fm.jsonschema.simplify import simplify

DIALECT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
# Rewrites (a oneOf of large overlapping branches, each excluding the others) can grow a schema exponentially; past
# this many nodes the engine, which stops at 50,000 (its "schema too large"), would refuse it anyway.
MAX_NODES = 100_000
_IN_PLACE_APPLICATORS = ("allOf", "anyOf", "oneOf", "not", "if", "$ref", "dependentSchemas", "dependencies",
                         "$dynamicRef", "$recursiveRef")


@dataclass
class Normalized:
    schema: Any
    ignored: list[tuple[str, str]] = field(default_factory=list)     # (where, keyword): annotations dropped
    rewritten: list[tuple[str, str]] = field(default_factory=list)   # (where, keyword): replaced by a rewrite
    narrowed: list[tuple[str, str, str]] = field(default_factory=list)  # (where, keyword, what was given up)


def normalize(schema: dict, fit: SchemaFit = SchemaFit.EXACT) -> Normalized:
    """Check and rewrite ``schema`` (a dict); see the module docstring (and ``narrowing.py`` for ``fit``)."""
    n = _Normalizer(schema, fit)
    out = n.node(schema, "#")
    if out is False:
        raise InvalidGenerationSchemaError(f"narrowing leaves no value at all: {'; '.join(w[2] for w in n.narrowed)}")
    n.relocate(out)
    if "$schema" in out:   # every older form is rewritten: the engine reads the result as draft 2020-12
        out["$schema"] = DIALECT_2020_12
    return Normalized(out, n.ignored, n.rewritten, n.narrowed)


def pointer(base: str, *parts: Any) -> str:
    """``base`` extended by ``parts``, escaped as JSON Pointer (RFC 6901) segments."""
    return base + "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def resolve_pointer(document: Any, ref: str) -> Any:
    """The value ``ref`` (``#/a/b``) names inside ``document``; None when it is not there or not local."""
    if not ref.startswith("#"):
        return None
    node = document
    for part in (ref[1:].split("/")[1:] if ref[1:] else []):
        part = urllib.parse.unquote(part).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


class _Normalizer:
    def __init__(self, root: dict, fit: SchemaFit):
        self.root, self.fit = root, fit
        self.ignored: list[tuple[str, str]] = []
        self.rewritten: list[tuple[str, str]] = []
        self.narrowed: list[tuple[str, str, str]] = []
        self.nodes = 0
        self.at: dict[str, Any] = {}            # original pointer -> its normalized node
        self.refs: list[dict] = []              # output nodes holding a local $ref
        # A nested $id makes '#/...' relative to that resource: no local resolution of our own then.
        self.local_refs = not _has_nested_id(root)

    def remote(self, ref: str) -> bool:
        """Whether ``ref`` names another document (never fetched) rather than a place in this one."""
        if not self.local_refs:
            return False   # embedded resources ($id inside): the engine resolves (or names) the reference
        document = urllib.parse.urldefrag(ref)[0]
        base = self.root.get("$id", self.root.get("id")) if isinstance(self.root, dict) else None
        base = base if isinstance(base, str) else ""
        return bool(document) and urllib.parse.urldefrag(urllib.parse.urljoin(base, document))[0] \
            != urllib.parse.urldefrag(base)[0]

    def resolve(self, ref: str) -> Any:
        return resolve_pointer(self.root, ref) if self.local_refs else None

    def fail(self, key: str, where: str, why: str) -> InvalidGenerationSchemaError:
        return InvalidGenerationSchemaError(
            f"JSON Schema keyword {key!r} at {where} is not enforced by the decoding engine (llguidance): {why}")

    # ---- one schema node -------------------------------------------------------------------------------

    def node(self, schema: Any, where: str | None, record: bool = True) -> Any:
        """The normalized copy of ``schema``; ``where`` is its place in the document (None: built by a rewrite)."""
        if isinstance(schema, bool):
            return schema
        here = where or "(rewrite)"
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise InvalidGenerationSchemaError(f"the rewritten schema grows past {MAX_NODES:,} nodes (at {here}): "
                                               f"too large for the decoding engine (llguidance stops at 50,000)")
        if not isinstance(schema, dict):
            raise InvalidGenerationSchemaError(f"JSON Schema at {here} must be an object or a boolean, got {schema!r}")
        if self.fit is SchemaFit.NARROWED and isinstance(schema.get("$ref"), str) and self.remote(schema["$ref"]):
            self.narrowed.append((here, "$ref", f"{schema['$ref']} is never fetched: no value here"))
            return False
        work, extra = self.rewrite(schema, here, record and where is not None)
        out: dict[str, Any] = {}
        for key, value in work.items():
            sub = pointer(where, key) if where is not None else None
            if key in SUBSCHEMA_MAPS:
                value = {name: self.node(s, pointer(sub, name) if sub else None, record) for name, s in value.items()}
            elif key in SUBSCHEMA_LISTS:
                value = [self.node(s, pointer(sub, i) if sub else None, record) for i, s in enumerate(value)]
            elif key in SUBSCHEMA_ONE or key == "items":
                value = self.node(value, sub, record)
            out[key] = value
        if extra:
            out["allOf"] = out.get("allOf", []) + [self.node(s, None, False) for s in extra]
        if isinstance(out.get("$ref"), str) and out["$ref"].startswith("#"):
            self.refs.append(out)
        if where is not None:
            self.at[where] = out
        return out

    def rewrite(self, schema: dict, where: str, record: bool) -> tuple[dict, list[Any]]:
        """(the node with rewritten and ignored keywords taken out, allOf members to add)."""
        schema = simplify(schema, self.resolve)
        work: dict[str, Any] = {}
        extra: list[Any] = []
        # propertyNames last: its rewrite replaces properties / patternProperties / additionalProperties in `work`,
        # which a later copy of those keywords would put back
        for key, value in sorted(schema.items(), key=lambda kv: kv[0] == "propertyNames"):
            kind = kind_of(key)
            _check_shape(key, value, where)
            if kind is KeywordKind.ANNOTATION and key not in ("then", "else"):
                if key in KEPT_ANNOTATIONS:
                    work[key] = value
                elif record:
                    self.ignored.append((where, key))
                continue
            if kind is KeywordKind.UNSUPPORTED:
                if key in ("minContains", "maxContains") and "contains" not in schema:
                    self.ignored.append((where, key)) if record else None
                    continue
                if key in ("contains", "minContains") and self.fit is SchemaFit.NARROWED:
                    try:
                        extra.append(contains(schema, schema["contains"])) if key == "contains" else None
                    except CannotNarrow as e:
                        raise self.fail(key, where, f"no narrowing: {e}") from None
                    self.narrowed.append((where, key, "only arrays whose first items match")) if key == "contains" \
                        else None
                    continue
                raise self.fail(key, where, KEYWORDS[key][1])
            if kind is KeywordKind.ENFORCED:
                if key == "format" and value in FORMAT_NARROWINGS and self.fit is SchemaFit.NARROWED:
                    extra.append(FORMAT_NARROWINGS[value])
                    self.narrowed.append((where, key, f"{value}: only strings of {FORMAT_NARROWINGS[value]}"))
                    continue
                if key == "format" and isinstance(value, str) and value not in ENGINE_FORMATS:
                    raise self.fail(key, where, f"format {value!r} is not one the engine enforces; it enforces "
                                                f"{', '.join(sorted(ENGINE_FORMATS))}")
                if key == "items" and isinstance(value, list):   # draft-04..2019-09 tuple form
                    work["prefixItems"] = value
                    if "additionalItems" in schema:
                        work["items"] = schema["additionalItems"]
                    self.note(record, where, key)
                    continue
                work[key] = min(work[key], value) if key == "maxItems" and key in work else value  # uniqueItems
                continue
            narrowing = Narrowing() if self.fit is SchemaFit.NARROWED else None
            try:
                self.rewrite_one(key, value, schema, where, work, extra, record, narrowing)
            except CannotNegate as e:
                raise self.fail(key, where, f"no exact rewrite: {e}") from None
            except CannotNarrow as e:
                raise self.fail(key, where, f"no exact rewrite, nor a narrowing: {e}") from None
            if narrowing is not None and narrowing.given_up:
                self.narrowed.append((where, key, "; ".join(dict.fromkeys(narrowing.given_up))))
        if "minProperties" in work or "maxProperties" in work:
            self.property_counts(work, extra, where)
        for bound, exclusive in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
            if isinstance(work.get(exclusive), bool):   # draft-04: a flag on the bound
                flag = work.pop(exclusive)
                if flag and bound in work:
                    work[exclusive] = work.pop(bound)
                self.note(record, where, exclusive)
        if "x-order" in work:
            work["properties"] = _apply_x_order(work.get("properties", {}), work["x-order"], where)
        return work, extra

    def note(self, record: bool, where: str, key: str) -> None:
        if record:
            self.rewritten.append((where, key))

    def rewrite_one(self, key: str, value: Any, schema: dict, where: str, work: dict, extra: list,
                    record: bool, narrowing: Narrowing | None) -> None:
        """Replace one REWRITTEN keyword by enforced ones (into ``work`` or as allOf members in ``extra``)."""
        if key in ("then", "else") and "if" not in schema or key == "if" and not {"then", "else"} & set(schema):
            return self.ignored.append((where, key)) if record else None   # constrains nothing alone
        if key == "additionalItems" and not isinstance(schema.get("items"), list):
            return self.ignored.append((where, key)) if record else None
        self.note(record, where, key)
        if key in ("then", "else", "additionalItems"):
            return   # read with `if` / list-form `items`
        rest = {k: v for k, v in schema.items() if k not in (key, "then", "else")}   # what holds beside it
        if narrowing is not None:
            narrowing.context = rest
        if key == "not":
            extra.append(self.within(negate(value, self.resolve, narrowing=narrowing), rest))
        elif key == "if":   # (if and then) or (not if and else); with one of them: (not if or then), (if or else)
            no = self.within(negate(value, self.resolve, narrowing=narrowing), rest)
            if "then" in schema and "else" in schema:
                extra.append({"anyOf": [{"allOf": [value, schema["then"]]}, {"allOf": [no, schema["else"]]}]})
            else:
                extra.append({"anyOf": [no, schema["then"]] if "then" in schema else [value, schema["else"]]})
        elif key == "oneOf":   # in place as anyOf where it can be (keeps the engine's property order)
            branches = self.exclusive_branches(value, narrowing)
            if "anyOf" in schema:
                extra.append({"anyOf": branches})
            else:
                work["anyOf"] = branches
        elif key in ("dependencies", "dependentRequired", "dependentSchemas"):
            for name, need in value.items():
                present = {"allOf": [{"required": [name]}, need]} if not isinstance(need, list) \
                    else {"required": [name, *need]}
                extra.append({"anyOf": [{"properties": {name: False}}, present]})
        elif key == "uniqueItems" and value:
            if _at_most_one_item(schema):
                work["maxItems"] = min(schema.get("maxItems", 1), 1)   # two items of one value repeat it
                return
            if narrowing is None:
                raise CannotNegate("uniqueItems: true is exact only where at most one item can exist "
                                   "(maxItems <= 1, or items with a single value)")
            distinct = unique_items(schema)
            if "maxItems" in distinct:
                work["maxItems"] = min(work.get("maxItems", 1), 1)
                narrowing.give_up("arrays of at most one item")
            else:
                extra.append(distinct)
                narrowing.give_up("distinct listed values, in the listed order only")
        elif key in ("unevaluatedProperties", "unevaluatedItems"):
            applicators = [k for k in _IN_PLACE_APPLICATORS if k in schema]
            if key == "unevaluatedProperties" and applicators and "additionalProperties" in schema:
                return   # additionalProperties evaluates every key left: nothing is unevaluated
            if key == "unevaluatedProperties" and applicators:
                names, complete = evaluated_names(schema, self.resolve)
                if not complete and narrowing is None:
                    raise CannotNegate(f"{key} beside the in-place applicator(s) {applicators}, which evaluate keys "
                                       f"other than through properties")
                if not complete:
                    narrowing.give_up("keys evaluated other than through properties of the node and its allOf/$ref")
                extra.append({"properties": {n: True for n in sorted(names)}, "additionalProperties": value})
                return
            if applicators:
                raise CannotNegate(f"{key} beside the in-place applicator(s) {applicators}")
            target = "additionalProperties" if key == "unevaluatedProperties" else "items"
            if target not in schema and value is not True and not (target == "additionalProperties"
                                                                   and "propertyNames" in schema):
                work[target] = value   # (beside propertyNames, that rewrite places it)
        elif key == "propertyNames":
            property_names(value, schema, work, narrowing)

    def exclusive_branches(self, branches: list, narrowing: Narrowing | None) -> list:
        """oneOf -> anyOf: each branch also excludes every other branch it may overlap (a branch left empty goes)."""
        out = []
        for i, branch in enumerate(branches):
            if narrowing is not None:
                target = self.resolve(branch["$ref"]) if isinstance(branch, dict) and "$ref" in branch else branch
                props = target.get("properties") if isinstance(target, dict) else None
                narrowing.names = tuple(props) if isinstance(props, dict) else ()
                narrowing.context = branch
            others = [self.within(negate(b, self.resolve, narrowing=narrowing), branch)
                      for j, b in enumerate(branches) if j != i and not disjoint(branch, b, self.resolve)]
            if any(o is False for o in others):
                continue   # another branch admits everything (or all its narrowed complement is gone)
            out.append({"allOf": [branch, *others]} if others else branch)
        if not out:
            raise CannotNarrow("no oneOf branch is left") if narrowing is not None else CannotNegate(
                "every oneOf branch overlaps one that admits every value")
        return out

    def within(self, alternatives: Any, context: Any) -> Any:
        """``alternatives`` (a negation) less its parts that no value of ``context`` can satisfy: the same
        values once intersected with ``context``, and a far smaller schema for the engine to intersect.
        (Narrowed, ``negate`` has already cut a large union to one part that fits ``context``.)"""
        if not (isinstance(alternatives, dict) and set(alternatives) == {"anyOf"}):
            return alternatives
        parts = [p for p in alternatives["anyOf"] if not disjoint(p, context, self.resolve)]
        return False if not parts else parts[0] if len(parts) == 1 else {"anyOf": parts}

    def property_counts(self, work: dict, extra: list, where: str) -> None:
        """min/maxProperties beside optional properties (the engine counts required ones only): drop or narrow."""
        try:
            replace, given_up = property_counts(work)
        except CannotNarrow as e:
            if self.fit is SchemaFit.NARROWED:
                raise self.fail("minProperties", where, f"no exact rewrite, nor a narrowing: {e}") from None
            return   # the engine names what it cannot do
        if given_up is not None and self.fit is not SchemaFit.NARROWED:
            return
        key = "maxProperties" if "maxProperties" in work else "minProperties"
        work.pop("minProperties", None)
        work.pop("maxProperties", None)
        for k, v in replace.items():
            if k == "anyOf":
                extra.append({"anyOf": v})
            elif v is None:
                work.pop(k, None)
            else:
                work[k] = v
        if given_up:
            self.narrowed.append((where, key, given_up))

    # ---- references into places that are not schema positions --------------------------------------

    def relocate(self, out: Any) -> None:
        """Point every local $ref whose target is not where the output has it to a copy in $defs."""
        if not self.local_refs or not isinstance(out, dict):
            return
        moved: dict[str, str] = {}
        done = 0
        while done < len(self.refs):
            holder = self.refs[done]
            done += 1
            ref = holder["$ref"]
            place = ref
            if place in self.at and resolve_pointer(out, ref) is self.at[place]:
                continue
            if ref not in moved:
                target = self.resolve(ref)
                if target is None:
                    continue   # the engine names the missing target
                name = f"openafm-ref{len(moved)}"
                moved[ref] = name
                out.setdefault("$defs", {})[name] = {}
                out["$defs"][name] = self.at.get(place) or self.node(target, None, False)
            holder["$ref"] = f"#/$defs/{moved[ref]}"


def _check_shape(key: str, value: Any, where: str) -> None:
    if key in SUBSCHEMA_MAPS and not isinstance(value, dict):
        raise InvalidGenerationSchemaError(f"JSON Schema {key!r} at {where} must be an object, got {value!r}")
    if key in SUBSCHEMA_LISTS and not isinstance(value, list):
        raise InvalidGenerationSchemaError(f"JSON Schema {key!r} at {where} must be a list, got {value!r}")
    if key in ("dependencies", "dependentRequired") and not isinstance(value, dict):
        raise InvalidGenerationSchemaError(f"JSON Schema {key!r} at {where} must be an object, got {value!r}")


def _at_most_one_item(schema: dict) -> bool:
    """Whether an array of ``schema`` holds at most one item, or all its items are one value (then it must)."""
    if schema.get("maxItems", 2) <= 1:
        return True
    items = schema.get("items")
    if schema.get("prefixItems") or isinstance(items, list):
        return False
    return items is False or isinstance(items, dict) and ("const" in items or len(items.get("enum", [0, 1])) == 1)


def _has_nested_id(root: Any) -> bool:
    found = False

    def walk(node: Any, top: bool) -> None:
        nonlocal found
        if not isinstance(node, dict) or found:
            return
        if not top and isinstance(node.get("$id"), str):
            found = True
            return
        for key, value in node.items():
            if key in SUBSCHEMA_MAPS and isinstance(value, dict):
                subs = list(value.values())
            elif key in SUBSCHEMA_LISTS or (key == "items" and isinstance(value, list)):
                subs = value if isinstance(value, list) else []
            else:
                subs = [value] if key in SUBSCHEMA_ONE or key == "items" else []
            for s in subs:
                walk(s, False)

    walk(root, True)
    return found


def _apply_x_order(properties: dict, order: Any, where: str) -> dict:
    if not isinstance(order, list) or not all(isinstance(n, str) for n in order):
        raise InvalidGenerationSchemaError(f"'x-order' at {where} must be a list of property names, got {order!r}")
    unknown = [n for n in order if n not in properties]
    if unknown:
        raise InvalidGenerationSchemaError(f"'x-order' at {where} names properties that do not exist: {unknown}")
    return {**{n: properties[n] for n in order}, **properties}
