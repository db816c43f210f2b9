"""What guided generation does with each JSON Schema keyword (drafts 04, 06, 07, 2019-09 and 2020-12), as data.

One table, ``KEYWORDS``: keyword -> (kind, note). The kinds:

- ``ANNOTATION``: constrains no value (JSON Schema: annotations and identifiers are ignored by validation).
  Accepted and left out of what the engine sees; :class:`GenerationSchema` lists each one met
  (``ignored_keywords``). A keyword in no draft (``x-...``, ``errorMessage``, ``_format``, Snowplow's
  ``self``) is an annotation too: JSON Schema says unknown keywords are ignored.
- ``ENFORCED``: the decoding engine (llguidance) enforces it as the draft defines it (its own compile errors,
  for example a look-around in ``pattern`` or a ``format`` it does not know, still raise).
- ``REWRITTEN``: rewritten (``raw_schema.py``) into enforced keywords that admit exactly the same values;
  where the exact rewrite does not exist for the value given, it raises naming the keyword.
- ``UNSUPPORTED``: a validation keyword nothing here enforces: raises
  :class:`~openafm.fm.errors.InvalidGenerationSchemaError` naming it and where it is.

>>> KEYWORDS["uniqueItems"][0], KEYWORDS["not"][0], KEYWORDS["x-order"][0]
(<KeywordKind.REWRITTEN: 'enforced-by-rewrite'>, <KeywordKind.REWRITTEN: 'enforced-by-rewrite'>, \
<KeywordKind.ANNOTATION: 'annotation'>)
>>> kind_of("x-kubernetes-patch-merge-key"), kind_of("contains")
(<KeywordKind.ANNOTATION: 'annotation'>, <KeywordKind.UNSUPPORTED: 'unsupported-validation'>)
>>> sorted(k for k, (kind, _) in KEYWORDS.items() if kind is KeywordKind.UNSUPPORTED)
['$dynamicRef', '$recursiveRef', 'contains', 'maxContains', 'minContains', 'x-guidance']
"""

from __future__ import annotations

from enum import Enum


class KeywordKind(Enum):
    ANNOTATION = "annotation"
    ENFORCED = "enforced"
    REWRITTEN = "enforced-by-rewrite"
    UNSUPPORTED = "unsupported-validation"


A, E, R, U = KeywordKind.ANNOTATION, KeywordKind.ENFORCED, KeywordKind.REWRITTEN, KeywordKind.UNSUPPORTED

KEYWORDS: dict[str, tuple[KeywordKind, str]] = {
    # -- core: identifiers and documentation ----------------------------------------------------------------
    "$schema": (A, "the dialect; kept"),
    "$id": (A, "identifier (base URI for $ref); kept"),
    "id": (A, "draft-04 identifier"),
    "$anchor": (A, "identifier; a $ref to it is resolved by the engine or rejected"),
    "$dynamicAnchor": (A, "identifier; only $dynamicRef gives it meaning"),
    "$recursiveAnchor": (A, "2019-09 identifier; only $recursiveRef gives it meaning"),
    "$vocabulary": (A, "meta-schema declaration"),
    "$comment": (A, "kept"),
    "title": (A, "kept"), "description": (A, "kept"), "default": (A, "kept"), "examples": (A, "kept"),
    "deprecated": (A, "kept"), "readOnly": (A, "kept"), "writeOnly": (A, "kept"),
    "x-order": (A, "the SDK's property order: reorders `properties`, which the engine generates in order"),
    "contentEncoding": (A, "an annotation since draft 2019-09 (draft-07: not asserted by default)"),
    "contentMediaType": (A, "as contentEncoding"),
    "contentSchema": (A, "as contentEncoding"),
    "definitions": (A, "a home for subschemas (draft-04..07); kept for $ref"),
    "$defs": (A, "a home for subschemas; kept for $ref"),
    "then": (A, "alone, without `if`, it constrains nothing (else part of the if/then/else rewrite)"),
    "else": (A, "as `then`"),
    # -- core: references -----------------------------------------------------------------------------------
    "$ref": (E, "local and $id-relative; remote documents are never fetched (rejected)"),
    "$dynamicRef": (U, "dynamic scope resolution"),
    "$recursiveRef": (U, "dynamic scope resolution (2019-09)"),
    # -- applicators --------------------------------------------------------------------------------------
    "allOf": (E, "intersection"),
    "anyOf": (E, "union"),
    "oneOf": (R, "anyOf when its branches are disjoint; else each branch also excludes the others (with `not`)"),
    "not": (R, "the complement, where it is expressible exactly: types, enum/const, required, properties, bounds, "
               "prefixItems, anyOf/allOf/not of those (a pattern, format, items or multipleOf raises)"),
    "if": (R, "anyOf[allOf[if, then], allOf[not if, else]]; `if` alone constrains nothing"),
    "dependentSchemas": (R, "per key k: anyOf[k absent, allOf[required k, schema]]"),
    "dependentRequired": (R, "per key k: anyOf[k absent, required [k, ...]]"),
    "dependencies": (R, "draft-04..07: a list is dependentRequired, a schema dependentSchemas"),
    "properties": (E, "the engine generates them in this order"),
    "patternProperties": (E, "the engine needs its patterns disjoint"),
    "additionalProperties": (E, ""),
    "propertyNames": (R, "checked on each listed name (a failing one is forbidden); for other keys: a pattern, length "
                         "bounds or enum becomes patternProperties when additionalProperties is absent"),
    "unevaluatedProperties": (R, "additionalProperties when the schema has no in-place applicator"),
    "items": (E, "a schema, or draft-04..2019-09's list form (tuple) which becomes prefixItems"),
    "prefixItems": (E, ""),
    "additionalItems": (R, "after a list-form `items`: becomes `items`; alone it constrains nothing"),
    "unevaluatedItems": (R, "`items` when the schema has no in-place applicator and no `items`"),
    "contains": (U, "some item matches"),
    "minContains": (U, "with `contains`; alone it constrains nothing"),
    "maxContains": (U, "with `contains`; alone it constrains nothing"),
    # -- validation ---------------------------------------------------------------------------------------
    "type": (E, ""), "enum": (E, ""), "const": (E, ""),
    "minimum": (E, ""), "maximum": (E, ""), "multipleOf": (E, ""),
    "exclusiveMinimum": (E, "a number, or draft-04's boolean beside minimum"),
    "exclusiveMaximum": (E, "a number, or draft-04's boolean beside maximum"),
    "minLength": (E, ""), "maxLength": (E, ""),
    "pattern": (E, "JSON Schema's meaning: a search, unanchored (write ^...$ for a whole match)"),
    "format": (E, "the engine's formats (ENGINE_FORMATS); any other value raises"),
    "minItems": (E, ""), "maxItems": (E, ""),
    "uniqueItems": (R, "false constrains nothing; true only where at most one item can exist (maxItems <= 1, or "
                       "items with one value); otherwise it raises"),
    "required": (E, ""),
    "minProperties": (E, "the engine's support: all listed properties required, or bounds of 0 and 1"),
    "maxProperties": (E, "as minProperties"),
    # -- engine option -------------------------------------------------------------------------------------
    "x-guidance": (U, "the engine's own options (lenient mode would ignore validation keywords): set by openafm"),
}

# Formats the engine enforces (llguidance's docs/json_schema.md); any other `format` value raises.
ENGINE_FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid",
                            "uri"})

# Where subschemas sit, so the whole document is walked: a map of them, a list of them, or one.
SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
SUBSCHEMA_ONE = ("additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
                 "unevaluatedItems", "unevaluatedProperties", "additionalItems", "contentSchema")
# `items` is one subschema or (draft-04..2019-09) a list; `dependencies` values are subschemas or name lists.

# Annotations kept in what the engine sees (it ignores them); the rest are dropped.
KEPT_ANNOTATIONS = frozenset({"$schema", "$id", "$comment", "title", "description", "default", "examples",
                              "deprecated", "readOnly", "writeOnly", "x-order", "$defs", "definitions"})


def kind_of(keyword: str) -> KeywordKind:
    """The kind of ``keyword``; a keyword of no draft is an annotation."""
    return KEYWORDS.get(keyword, (A, ""))[0]
