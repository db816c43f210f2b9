"""GenerationSchema: the shape guided generation must produce, as standard JSON Schema.

A schema comes from a ``@generable`` type (``Cat.generation_schema()``), from properties given
directly (as the SDK's constructor allows), or from a raw JSON Schema
(:meth:`GenerationSchema.from_json_schema`, the ``json_schema=`` path). Building one checks it
against the decoding engine (llguidance): what the engine cannot enforce raises
:class:`InvalidGenerationSchemaError` at once, naming the field or keyword.

>>> import openafm.fm as fm
>>> @fm.generable("Years and months")
... class Age:
...     years: int = fm.guide(minimum=0)
...     months: int = fm.guide(range=(0, 11))
>>> @fm.generable
... class Cat:
...     name: str
...     age: Age = fm.guide("How old the cat is")
...     nickname: str | None
>>> schema = Cat.generation_schema().to_json_schema()
>>> schema["properties"]["age"], schema["required"], list(schema["$defs"])
({'description': 'How old the cat is', '$ref': '#/$defs/Age'}, ['name', 'age'], ['Age'])

Choices, following the JSON the SDK's Swift side emits (``tests/tester_schemas/*.json`` there):

- nested generable and enum types go to ``$defs`` and are referenced with ``$ref`` (``"#"`` for
  the root type itself), not inlined: this is the only form that expresses recursive types
  (``children: list["Person"]``) and it writes each type once however often it is used;
- an ``Optional[T]`` / ``T | None`` field is ``T``'s schema left out of ``required`` (the model
  omits it rather than writing ``null``); inside a list or dict it is ``anyOf [T, null]``;
- every object has ``additionalProperties: false`` and its properties in declaration order,
  which is the order the engine generates them in;
- ``to_dict()`` (the SDK's name) adds the SDK's ``x-order`` lists and drops ``$schema``.
"""

from __future__ import annotations

import copy
import json
import logging
import types
from enum import Enum
from typing import Any, Sequence, Union, get_args, get_origin

import llguidance

from openafm.fm.errors import InvalidGenerationSchemaError
from openafm.fm.guide import GenerationGuide, GuideType, check_applicable, guide_keywords, split_array_guides
from openafm.fm.jsonschema.narrowing import SchemaFit
from openafm.fm.jsonschema.raw_schema import normalize

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

_SCALARS: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_log = logging.getLogger(__name__)


class Property:
    """One field of a :class:`GenerationSchema`: name, Python type, description and guides.

    >>> Property("age", int, "Age in years", [GenerationGuide.range((0, 30))])
    Property('age', int, description='Age in years', guides=[GenerationGuide.range((0, 30))])
    """

    def __init__(self, name: str, type_class: Any, description: str | None = None,
                 guides: Sequence[GenerationGuide] | None = None):
        if not isinstance(name, str) or not name:
            raise InvalidGenerationSchemaError(f"a property name must be a non-empty string, got {name!r}")
        bad = [g for g in guides or [] if not isinstance(g, GenerationGuide)]
        if bad:
            raise InvalidGenerationSchemaError(
                f"property {name!r}: guides must be GenerationGuide objects, got {bad[0]!r}")
        self.name = name
        self.type_class = type_class
        self.description = description
        self.guides = list(guides or [])

    def __repr__(self) -> str:
        return (f"Property({self.name!r}, {type_name(self.type_class)}, description={self.description!r}, "
                f"guides={self.guides!r})")


class GenerationSchema:
    """The structure generated content must have; renders to JSON Schema (draft 2020-12).

    Made by ``@generable`` (``Cls.generation_schema()``), directly from properties, or with
    :meth:`from_json_schema`. Direct construction, as in the SDK:

    >>> y = Property("y", float, guides=[GenerationGuide.minimum(0)])
    >>> s = GenerationSchema(type_class=type("Point", (), {}), description="A point", properties=[Property("x", float), y])
    >>> s.to_json_schema() == {"$schema": JSON_SCHEMA_DIALECT, "title": "Point", "description": "A point",
    ...     "type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number", "minimum": 0}},
    ...     "required": ["x", "y"], "additionalProperties": False}
    True
    """

    def __init__(self, type_class: Any, description: str | None = None, properties: Sequence[Property] | None = None,
                 dynamic_nested_types: Sequence[GenerationSchema] = (), *, json_schema: dict | None = None):
        self.type_class = type_class
        self.description = description
        self.properties = list(properties) if properties is not None else _default_properties(type_class)
        self.dynamic_nested_types = list(dynamic_nested_types)
        # from_json_schema: the (where, keyword) pairs it dropped as annotations, and those it rewrote
        self.ignored_keywords: list[tuple[str, str]] = []
        self.rewritten_keywords: list[tuple[str, str]] = []
        self.narrowed_keywords: list[tuple[str, str, str]] = []   # (where, keyword, what was given up)
        self.fit = SchemaFit.EXACT
        if json_schema is not None:  # from_json_schema: already normalized and checked
            self._json = json_schema
        else:
            self._json = _Builder(self).build()
            check_with_engine(self._json, f"the schema of {self.name}")

    @property
    def name(self) -> str:
        """The schema's title: the type's name, or a raw schema's ``title``."""
        if self.type_class is not None:
            return getattr(self.type_class, "__name__", str(self.type_class))
        return str(self._json.get("title", "schema"))

    def to_json_schema(self) -> dict:
        """This schema as a standard JSON Schema (a fresh copy the caller may change)."""
        return copy.deepcopy(self._json)

    def to_dict(self) -> dict:
        """The SDK's form: like :meth:`to_json_schema`, plus ``x-order`` lists, without ``$schema``.

        >>> s = GenerationSchema(type_class=type("P", (), {}), properties=[Property("b", str), Property("a", int)])
        >>> s.to_dict()["x-order"]
        ['b', 'a']
        """
        out = self.to_json_schema()
        out.pop("$schema", None)
        for node in [out, *out.get("$defs", {}).values()]:
            if isinstance(node.get("properties"), dict) and "x-order" not in node:
                node["x-order"] = list(node["properties"])
        return out

    @classmethod
    def from_json_schema(cls, schema: dict, *, fit: SchemaFit = SchemaFit.EXACT) -> GenerationSchema:
        """A schema from a raw JSON Schema (any draft, 04 to 2020-12), checked to be one the engine enforces fully.

        Each keyword is read by its kind in ``openafm.fm.jsonschema.keywords.KEYWORDS``: annotations and keywords of no
        draft (``x-...``, ``errorMessage``, draft-04 ``id``) constrain nothing and are accepted, listed in
        :attr:`ignored_keywords` as ``(where, keyword)`` and in a debug log line; ``not``, ``if``/``then``/``else``,
        overlapping ``oneOf``, ``dependencies`` and a few more are rewritten into keywords the engine enforces,
        admitting exactly the same values (listed in :attr:`rewritten_keywords`); a validation keyword with no
        exact rewrite (``uniqueItems`` over several items, ``contains``, a ``not`` of a ``pattern``, an unknown
        ``format``) raises :class:`InvalidGenerationSchemaError` naming it and where it is, as does anything the
        engine's compiler rejects (an unsatisfiable range, a look-around, a remote ``$ref``). ``pattern`` keeps
        JSON Schema's meaning, a search: ``"a"`` admits ``"cat"`` (a regex *guide* is anchored instead). The
        SDK's ``x-order`` lists reorder ``properties`` (the engine generates them in that order).

        ``fit=SchemaFit.NARROWED`` (an openafm option) replaces a keyword with no exact rewrite by a *narrowing*
        where one exists (``narrowing.py``): the engine then admits a subset of the schema's values, so every
        output is still valid but some valid values cannot be generated; each is listed in
        :attr:`narrowed_keywords` as ``(where, keyword, what was given up)``.

        >>> s = GenerationSchema.from_json_schema({"type": "object", "properties": {"b": {"type": "string"},
        ...     "a": {"type": "integer"}}, "required": ["a", "b"], "x-order": ["a", "b"]})
        >>> list(s.to_json_schema()["properties"])
        ['a', 'b']
        >>> GenerationSchema.from_json_schema({"type": "array", "items": {"type": "string"}, "uniqueItems": True})
        Traceback (most recent call last):
        ...
        openafm.fm.errors.InvalidGenerationSchemaError: invalid generation schema: ... 'uniqueItems' at # is not ...
        """
        if not isinstance(schema, dict):
            raise InvalidGenerationSchemaError(f"a JSON Schema must be a dict, got {type(schema).__name__}: {schema!r}")
        if not isinstance(fit, SchemaFit):
            raise TypeError(f"fit must be a SchemaFit ({', '.join(f.name for f in SchemaFit)}), got {fit!r}")
        result = normalize(schema, fit)
        check_with_engine(result.schema, "the JSON Schema")
        made = cls(type_class=None, description=result.schema.get("description"), properties=[],
                   json_schema=result.schema)
        made.ignored_keywords, made.rewritten_keywords = result.ignored, result.rewritten
        made.narrowed_keywords, made.fit = result.narrowed, fit
        if result.narrowed:
            _log.info("JSON Schema %r: narrowed %d keyword(s): %s", made.name, len(result.narrowed),
                      "; ".join(f"{k} at {w}: {why}" for w, k, why in result.narrowed))
        if result.ignored:
            _log.debug("JSON Schema %r: ignored %d annotation keyword(s): %s", made.name, len(result.ignored),
                       ", ".join(f"{k} at {w}" for w, k in result.ignored))
        return made

    def __repr__(self) -> str:
        return f"GenerationSchema({self.name!r}, properties={[p.name for p in self.properties]!r})"


# ---- type analysis shared with content.py ------------------------------------------------------

def unwrap_optional(tp: Any, where: str = "type") -> tuple[Any, bool]:
    """``(T, True)`` for ``Optional[T]`` / ``T | None``, ``(tp, False)`` otherwise.

    >>> unwrap_optional(int | None), unwrap_optional(list[str])
    ((<class 'int'>, True), (list[str], False))
    """
    if get_origin(tp) in (Union, types.UnionType):
        args = get_args(tp)
        rest = [a for a in args if a is not type(None)]
        if len(rest) != 1:
            raise InvalidGenerationSchemaError(f"{where}: unions of several types are not supported, got "
                                               f"{type_name(tp)}; use one type or Optional[T]")
        return rest[0], len(rest) < len(args)
    return tp, False


def is_generable(tp: Any) -> bool:
    """True for a class made generable with ``@generable`` (an object or an enum)."""
    return isinstance(tp, type) and getattr(tp, "_generable", False) is True


def is_enum(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, Enum)


def type_name(tp: Any) -> str:
    """A short readable name for a type annotation: ``int``, ``list[str]``, ``Cat``."""
    if isinstance(tp, type) and not get_args(tp):
        return tp.__name__
    return str(tp).replace("typing.", "")


def _default_properties(type_class: Any) -> list[Property]:
    """A generable type's properties, for ``GenerationSchema(type_class=Cls)`` without properties."""
    if is_generable(type_class) and not is_enum(type_class):
        return properties_of(type_class)
    return []


def properties_of(tp: type) -> list[Property]:
    """The properties of a generable object type, without building its JSON Schema.

    ``@generable`` records them at decoration; a class with only a hand-written
    ``generation_schema()`` is asked for its schema.
    """
    recorded = tp.__dict__.get("_generable_properties")
    return list(recorded) if recorded is not None else list(tp.generation_schema().properties)


# ---- Python types -> JSON Schema ----------------------------------------------------------------

class _Builder:
    """Renders one GenerationSchema; collects nested types into ``$defs`` in discovery order."""

    def __init__(self, root: GenerationSchema):
        self.root = root
        self.defs: dict[str, dict] = {}
        self.def_types: dict[str, Any] = {}
        self.given = {s.type_class: s for s in root.dynamic_nested_types}

    def build(self) -> dict:
        root = self.root
        if is_enum(root.type_class) and not root.properties:
            body = self.enum_schema(root.type_class, root.description)
        else:
            body = self.object_schema(root.name, root.description, root.properties)
        for nested in root.dynamic_nested_types:
            self.ref(nested.type_class)
        out = {"$schema": JSON_SCHEMA_DIALECT, **body}
        if self.defs:
            out["$defs"] = self.defs
        return out

    def object_schema(self, title: str, description: str | None, properties: Sequence[Property]) -> dict:
        out: dict[str, Any] = {"title": title}
        if description:
            out["description"] = description
        props: dict[str, dict] = {}
        required: list[str] = []
        for p in properties:
            where = f"field '{title}.{p.name}'"
            if p.name in props:
                raise InvalidGenerationSchemaError(f"{where} is defined twice")
            inner, optional = unwrap_optional(p.type_class, where)
            schema = self.value_schema(inner, p.guides, where)
            props[p.name] = {"description": p.description, **schema} if p.description else schema
            if not optional:
                required.append(p.name)
        out.update(type="object", properties=props, required=required, additionalProperties=False)
        return out

    def value_schema(self, tp: Any, guides: Sequence[GenerationGuide], where: str) -> dict:
        inner, optional = unwrap_optional(tp, where)
        if optional:  # a nullable list item or dict value
            return {"anyOf": [self.value_schema(inner, guides, where), {"type": "null"}]}
        if tp in _SCALARS:
            kind = _SCALARS[tp]
            schema = {"type": kind, **guide_keywords(guides, kind, where, tp.__name__)}
            for g in guides:  # each regex checked alone, so an error names the field and the regex as written
                if g.guide_type is GuideType.regex:
                    check_with_engine({"type": "string", "pattern": schema["pattern"]},
                                      f"the regex guide {g.value!r} of {where}")
            return schema
        origin, args = get_origin(tp), get_args(tp)
        if tp is list or origin is list:
            if not args:
                raise InvalidGenerationSchemaError(
                    f"{where}: a list needs its item type, e.g. list[str], got {type_name(tp)}")
            own, item_guides = split_array_guides(guides)
            keywords = guide_keywords(own, "array", where, type_name(tp))
            return {"type": "array", "items": self.value_schema(args[0], item_guides, f"{where} items"), **keywords}
        if tp is dict or origin is dict:
            check_applicable(guides, "object", where, type_name(tp))
            if args and args[0] is not str:
                raise InvalidGenerationSchemaError(f"{where}: JSON object keys are strings, got {type_name(tp)}")
            return {"type": "object", **({"additionalProperties": self.value_schema(args[1], [], f"{where} values")}
                                         if args else {})}
        if is_enum(tp) or is_generable(tp) or tp in self.given or tp is self.root.type_class:
            check_applicable(guides, "object", where, type_name(tp))
            return self.ref(tp)
        raise InvalidGenerationSchemaError(
            f"{where} has unsupported type {type_name(tp)}; supported: str, int, float, bool, list[T], "
            f"dict[str, T], Optional[T], enum.Enum subclasses and @generable classes")

    def ref(self, tp: Any) -> dict:
        if tp is self.root.type_class:
            return {"$ref": "#"}
        name = type_name(tp)
        known = self.def_types.get(name)
        if known is None:
            self.def_types[name] = tp
            self.defs[name] = {}  # placeholder: keeps discovery order and ends recursion
            self.defs[name] = self.type_schema(tp)
        elif known is not tp:
            raise InvalidGenerationSchemaError(f"two different types are both named {name!r} ({known!r} and {tp!r}); "
                                               f"rename one, $defs are keyed by type name")
        return {"$ref": f"#/$defs/{name}"}

    def type_schema(self, tp: Any) -> dict:
        if tp in self.given:
            s = self.given[tp]
            return self.object_schema(s.name, s.description, s.properties)
        if is_enum(tp):
            return self.enum_schema(tp, getattr(tp, "_generable_description", None))
        return self.object_schema(tp.__name__, getattr(tp, "_generable_description", None), properties_of(tp))

    @staticmethod
    def enum_schema(tp: type[Enum], description: str | None) -> dict:
        values = []
        for member in tp:
            if isinstance(member.value, bool) or not isinstance(member.value, (str, int, float)):
                raise InvalidGenerationSchemaError(f"enum {tp.__name__}: member {member.name} has value "
                                                   f"{member.value!r}; generable enum values must be strings or numbers")
            values.append(member.value)
        if not values:
            raise InvalidGenerationSchemaError(f"enum {tp.__name__} has no members")
        out: dict[str, Any] = {"title": tp.__name__}
        if description:
            out["description"] = description
        if all(isinstance(v, str) for v in values):
            out["type"] = "string"
        elif all(isinstance(v, int) for v in values):
            out["type"] = "integer"
        elif all(isinstance(v, (int, float)) for v in values):
            out["type"] = "number"
        out["enum"] = values
        return out


def check_with_engine(schema: dict, what: str) -> None:
    """Compile ``schema`` with llguidance; raise :class:`InvalidGenerationSchemaError` on any error or warning.

    >>> check_with_engine({"type": "integer", "minimum": 5, "maximum": 1}, "the schema")
    Traceback (most recent call last):
    ...
    openafm.fm.errors.InvalidGenerationSchemaError: invalid generation schema: the decoding engine ... Unsatisfiable ...
    """

    try:
        grammar = llguidance.LLMatcher.grammar_from_json_schema(json.dumps(schema))
        is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
    except Exception as e:  # the compiler's own exceptions (malformed input)
        is_error, messages = True, [str(e)]
    if is_error or messages:
        raise InvalidGenerationSchemaError(f"the decoding engine (llguidance) rejects {what}: {'; '.join(messages)}")
