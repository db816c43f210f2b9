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
{'type': 'integer', 'allOf': [{'anyOf': [{'type': ['null', 'boolean', 'object', 'array', 'string']}, \
{'type': 'number', 'exclusiveMaximum': 0}, {'type': 'number', 'exclusiveMinimum': 0}]}]}

A ``$ref`` into a place that is not a schema position (``#/$defs/plugins/shared``, a vendor keyword) still
resolves: its target moves to ``$defs``.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from openafm.fm.errors import InvalidGenerationSchemaError
from openafm.fm.guide import pattern_accepts
from openafm.fm.keywords import (
    ENGINE_FORMATS, KEPT_ANNOTATIONS, KEYWORDS, SUBSCHEMA_LISTS, SUBSCHEMA_MAPS, SUBSCHEMA_ONE, KeywordKind, kind_of,
)
from openafm.fm.negation import CannotNegate, disjoint, negate

DIALECT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
_IN_PLACE_APPLICATORS = ("allOf", "anyOf", "oneOf", "not", "if", "$ref", "dependentSchemas", "dependencies",
                         "$dynamicRef", "$recursiveRef")


@dataclass
class Normalized:
    schema: Any
    ignored: list[tuple[str, str]] = field(default_factory=list)     # (where, keyword): annotations dropped
    rewritten: list[tuple[str, str]] = field(default_factory=list)   # (where, keyword): replaced by a rewrite


def normalize(schema: dict) -> Normalized:
    """Check and rewrite ``schema`` (a dict); see the module docstring."""
    n = _Normalizer(schema)
    out = n.node(schema, "#")
    n.relocate(out)
    if "$schema" in out:   # every older form is rewritten: the engine reads the result as draft 2020-12
        out["$schema"] = DIALECT_2020_12
    return Normalized(out, n.ignored, n.rewritten)


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
    def __init__(self, root: dict):
        self.root = root
        self.ignored: list[tuple[str, str]] = []
        self.rewritten: list[tuple[str, str]] = []
        self.at: dict[str, Any] = {}            # original pointer -> its normalized node
        self.refs: list[dict] = []              # output nodes holding a local $ref
        # A nested $id makes '#/...' relative to that resource: no local resolution of our own then.
        self.local_refs = not _has_nested_id(root)

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
        if not isinstance(schema, dict):
            raise InvalidGenerationSchemaError(f"JSON Schema at {here} must be an object or a boolean, got {schema!r}")
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
        work: dict[str, Any] = {}
        extra: list[Any] = []
        for key, value in schema.items():
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
                raise self.fail(key, where, KEYWORDS[key][1])
            if kind is KeywordKind.ENFORCED:
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
            try:
                self.rewrite_one(key, value, schema, where, work, extra, record)
            except CannotNegate as e:
                raise self.fail(key, where, f"no exact rewrite: {e}") from None
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
                    record: bool) -> None:
        """Replace one REWRITTEN keyword by enforced ones (into ``work`` or as allOf members in ``extra``)."""
        if key in ("then", "else") and "if" not in schema or key == "if" and not {"then", "else"} & set(schema):
            return self.ignored.append((where, key)) if record else None   # constrains nothing alone
        if key == "additionalItems" and not isinstance(schema.get("items"), list):
            return self.ignored.append((where, key)) if record else None
        self.note(record, where, key)
        if key in ("then", "else", "additionalItems"):
            return   # read with `if` / list-form `items`
        if key == "not":
            extra.append(negate(value, self.resolve))
        elif key == "if":
            yes = [value] + ([schema["then"]] if "then" in schema else [])
            no = [negate(value, self.resolve)] + ([schema["else"]] if "else" in schema else [])
            extra.append({"anyOf": [{"allOf": yes}, {"allOf": no}]})
        elif key == "oneOf":   # in place as anyOf where it can be (keeps the engine's property order)
            branches = self.exclusive_branches(value)
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
            if not _at_most_one_item(schema):
                raise CannotNegate("uniqueItems: true is exact only where at most one item can exist "
                                   "(maxItems <= 1, or items with a single value)")
            work["maxItems"] = min(schema.get("maxItems", 1), 1)   # two items of one value repeat it
        elif key in ("unevaluatedProperties", "unevaluatedItems"):
            applicators = [k for k in _IN_PLACE_APPLICATORS if k in schema]
            if applicators:
                raise CannotNegate(f"{key} beside the in-place applicator(s) {applicators}")
            target = "additionalProperties" if key == "unevaluatedProperties" else "items"
            if target not in schema and value is not True and not (target == "additionalProperties"
                                                                   and "propertyNames" in schema):
                work[target] = value   # (beside propertyNames, that rewrite places it)
        elif key == "propertyNames":
            self.property_names(value, schema, where, work)

    def exclusive_branches(self, branches: list) -> list:
        """oneOf -> anyOf: each branch also excludes every other branch it may overlap."""
        out = []
        for i, branch in enumerate(branches):
            others = [negate(b, self.resolve) for j, b in enumerate(branches)
                      if j != i and not disjoint(branch, b, self.resolve)]
            out.append({"allOf": [branch, *others]} if others else branch)
        return out

    def property_names(self, names: Any, schema: dict, where: str, work: dict) -> None:
        """propertyNames: each listed name checked here; unlisted keys through a pattern, when exactly possible."""
        rule = _names_regex(names)
        if rule == "":
            return   # every key is a string: constrains nothing
        if rule is None:
            raise CannotNegate(f"propertyNames {names!r}: only type string with one of pattern, minLength/maxLength, "
                               f"enum or const is read")
        refused = [n for n in schema.get("properties", {}) if not pattern_accepts(rule, n)]
        if refused:
            work["properties"] = {n: (False if n in refused else s) for n, s in work.get("properties", {}).items()}
        others = schema.get("additionalProperties", schema.get("unevaluatedProperties", True))
        if others is False and not schema.get("patternProperties"):
            return   # closed: the listed names are all the keys there are
        if schema.get("patternProperties"):
            raise CannotNegate("propertyNames beside patternProperties")
        if others not in (True, {}) and len(refused) < len(schema.get("properties", {})):
            raise CannotNegate("propertyNames admitting a listed property beside a constrained additionalProperties")
        work["patternProperties"] = {rule: others}   # the unlisted keys: named by the rule, then as before
        work["additionalProperties"] = False

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


def _names_regex(names: Any) -> str | None:
    """The pattern of the keys a propertyNames schema admits: "" for every key, None for a shape not read."""
    if names is True:
        return ""
    if not isinstance(names, dict):
        return None
    body = {k: v for k, v in names.items() if kind_of(k) is not KeywordKind.ANNOTATION}
    if body.pop("type", "string") != "string":
        return None
    if not body:
        return ""
    if set(body) == {"pattern"}:
        return body["pattern"]
    if set(body) <= {"minLength", "maxLength"}:
        return r"^[\s\S]{%d,%s}$" % (body.get("minLength", 0), body.get("maxLength", ""))
    values = body.get("enum", [body.get("const")])
    if set(body) in ({"enum"}, {"const"}) and all(isinstance(v, str) for v in values):
        return "^(?:" + "|".join("".join(c if c.isalnum() else "\\x{%x}" % ord(c) for c in v) for v in values) + ")$"
    return None


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
