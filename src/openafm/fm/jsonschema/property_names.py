"""``propertyNames``: the keys an object may have, checked on each listed property and, for other keys, turned into
``patternProperties`` where that is exact (or, narrowed, into "no other key").

>>> names_regex({"type": "string", "maxLength": 3})
'^[\\s\\S]{0,3}$'
>>> name_passes({"not": {"pattern": "^x-"}}, "x-id"), name_passes({"format": "email"}, "a")
(False, None)
"""

from __future__ import annotations

from typing import Any

from openafm.fm.guide import pattern_accepts
from openafm.fm.jsonschema.keywords import KeywordKind, kind_of
from openafm.fm.jsonschema.narrowing import Narrowing
from openafm.fm.jsonschema.negation import CannotNegate

_MAX_DEPTH = 16


def property_names(names: Any, schema: dict, work: dict, narrowing: Narrowing | None) -> None:
    """propertyNames: each listed name checked here; unlisted keys through a pattern, when exactly possible."""
    rule = names_regex(names)
    if rule == "":
        return   # every key is a string: constrains nothing
    listed = schema.get("properties", {})
    others = schema.get("additionalProperties", schema.get("unevaluatedProperties", True))
    closed = others is False and not schema.get("patternProperties")
    refused = [n for n in listed if not pattern_accepts(rule, n)] if rule is not None else []
    if rule is None:
        why = (f"propertyNames {names!r}: only type string with one of pattern, minLength/maxLength, enum or const "
               f"is read")
    elif closed:
        why = ""
    elif schema.get("patternProperties"):
        why = "propertyNames beside patternProperties"
    elif others not in (True, {}) and len(refused) < len(listed):
        why = "propertyNames admitting a listed property beside a constrained additionalProperties"
    else:
        why = ""
    if why and narrowing is None:
        raise CannotNegate(why)
    if why:   # narrowed: the listed properties it certainly admits, and no other key
        passing = {n for n in listed if name_passes(names, n) is True}
        work["properties"] = {n: (s if n in passing else False) for n, s in work.get("properties", {}).items()}
        work["additionalProperties"] = False
        work.pop("patternProperties", None)
        return narrowing.give_up("keys other than the listed properties it certainly admits")
    if refused:
        work["properties"] = {n: (False if n in refused else s) for n, s in work.get("properties", {}).items()}
    if not closed:
        work["patternProperties"] = {rule: others}   # the unlisted keys: named by the rule, then as before
        work["additionalProperties"] = False


def names_regex(names: Any) -> str | None:
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


def name_passes(names: Any, name: str, depth: int = 0) -> bool | None:
    """Whether the propertyNames schema ``names`` admits the key ``name``: True, False, or None (not read)."""
    if isinstance(names, bool):
        return names
    if not isinstance(names, dict) or depth > _MAX_DEPTH:
        return None
    verdicts: list[bool | None] = []
    for key, value in names.items():
        if key == "type":
            verdicts.append("string" in ([value] if isinstance(value, str) else value))
        elif key == "pattern":
            verdicts.append(pattern_accepts(value, name))
        elif key in ("minLength", "maxLength"):
            verdicts.append(len(name) >= value if key == "minLength" else len(name) <= value)
        elif key in ("enum", "const"):
            verdicts.append(name in (value if key == "enum" else [value]))
        elif key == "not":
            inner = name_passes(value, name, depth + 1)
            verdicts.append(None if inner is None else not inner)
        elif key in ("allOf", "anyOf") and isinstance(value, list):
            inner = [name_passes(v, name, depth + 1) for v in value]
            verdicts.append(None if None in inner else (all(inner) if key == "allOf" else any(inner)))
        elif kind_of(key) is not KeywordKind.ANNOTATION:
            verdicts.append(None)
    if False in verdicts:
        return False
    return None if None in verdicts else True
