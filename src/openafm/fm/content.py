"""GeneratedContent: a generated JSON value, its conversion to typed objects, and partial JSON.

:class:`GeneratedContent` wraps one JSON value (usually an object) as the SDK does: ``value()``
returns it, ``value(Cat)`` converts it into a ``@generable`` class, checking types and guides;
a mismatch raises :class:`ContentConversionError` (a :class:`DecodingFailureError`) naming the
field path.

>>> import openafm.fm as fm
>>> @fm.generable
... class Age:
...     years: int = fm.guide(range=(0, 30))
>>> content = GeneratedContent.from_json('{"years": 3}')
>>> content.value(), content.value(Age), content.value(int, for_property="years")
({'years': 3}, Age(years=3), 3)
>>> GeneratedContent({"years": 31}).value(Age)
Traceback (most recent call last):
...
openafm.fm.errors.ContentConversionError: Age.years: 31 is above the maximum 30

:func:`parse_partial_json` reads a prefix of a JSON document, as streamed by the model, so each
streamed snapshot is a value that only grows:

>>> doc = '{"name": "Momo", "age": 12}'
>>> [parse_partial_json(doc[:k]) for k in (4, 13, 25, len(doc))]
[{}, {'name': 'Mom'}, {'name': 'Momo'}, {'name': 'Momo', 'age': 12}]
"""

from __future__ import annotations

import copy
import json
import math
import re
import uuid
from typing import Any, get_args, get_origin

from openafm.fm.errors import ContentConversionError, DecodingFailureError
from openafm.fm.guide import pattern_accepts
from openafm.fm.schema import is_enum, is_generable, properties_of, type_name, unwrap_optional


class GenerationID:
    """A unique identifier of one generation (a random UUID), as in the SDK."""

    def __init__(self) -> None:
        self._id = str(uuid.uuid4())

    def __str__(self) -> str:
        return self._id

    def __repr__(self) -> str:
        return f"GenerationID({self._id!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GenerationID) and self._id == other._id

    def __hash__(self) -> int:
        return hash(self._id)


class GeneratedContent:
    """One generated JSON value (``content_dict``: any JSON value, usually an object).

    ``is_complete`` is False for a streamed snapshot made from a prefix of the output.

    >>> c = GeneratedContent.from_partial_json('{"tags": ["a", "b')
    >>> c.value(), c.is_complete, c.to_json()
    ({'tags': ['a', 'b']}, False, '{"tags": ["a", "b"]}')
    """

    def __init__(self, content_dict: Any = None, id: GenerationID | None = None, *, is_complete: bool = True):
        problem = non_json("content_dict", content_dict)
        if problem is not None:  # TypeError, as the SDK's
            raise TypeError(f"GeneratedContent holds JSON values only; it is not JSON serializable: {problem}")
        # a private copy, with tuples made lists: exactly what JSON can say
        self._content_dict = json.loads(json.dumps({} if content_dict is None else content_dict))
        self.id = id or GenerationID()
        self._is_complete = is_complete

    @classmethod
    def from_json(cls, json_str: str) -> GeneratedContent:
        """Content from a complete JSON document."""
        try:
            return cls(json.loads(json_str))
        except json.JSONDecodeError as e:
            raise DecodingFailureError(f"not a JSON document ({e}): {json_str[:200]!r}") from e

    @classmethod
    def from_partial_json(cls, text: str, id: GenerationID | None = None) -> GeneratedContent:
        """A streamed snapshot: the value a prefix of a JSON document implies (see :func:`parse_partial_json`)."""
        try:
            return cls(json.loads(text), id, is_complete=True)
        except json.JSONDecodeError:
            return cls(parse_partial_json(text), id, is_complete=False)

    def to_json(self) -> str:
        """The content as a JSON string."""
        return json.dumps(self._content_dict)

    @property
    def is_complete(self) -> bool:
        """Whether the content is a whole generated value rather than a streamed prefix."""
        return self._is_complete

    def value(self, type_class: Any = None, for_property: str | None = None) -> Any:
        """The content (or one property of it), converted to ``type_class`` when given.

        Without ``type_class`` the raw JSON value is returned (a copy). With it, the value is
        checked and converted: scalars by type, lists item by item, enums by value, ``@generable``
        classes field by field including their guides. A property that is missing or null is ``None``
        whatever ``type_class`` is, as in the SDK (``value(int, "missing_key")`` is None).
        """
        raw, where = self._content_dict, "content"
        if for_property is not None:
            if not isinstance(raw, dict):
                raise ContentConversionError(
                    f"content is {_show(raw)}, not an object; it has no property {for_property!r}")
            where = for_property
            if raw.get(for_property) is None:
                return None
            raw = raw[for_property]
        if type_class is None:
            return copy.deepcopy(raw)
        if for_property is None and is_generable(type_class):
            where = type_name(type_class)  # paths read Cat.age.years
        return convert(raw, type_class, None, where)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GeneratedContent) and self._content_dict == other._content_dict

    def __repr__(self) -> str:
        return f"GeneratedContent({self.to_json()})"


def non_json(where: str, value: Any) -> str | None:
    """Where ``value`` stops being JSON, e.g. ``"content_dict['born']: date 2020-01-02"``; None if it is JSON.

    JSON is None, bool, int, finite float, str, lists (or tuples) of JSON and dicts of JSON (keys: str, or
    scalars ``json.dumps`` writes as strings).

    >>> import datetime
    >>> non_json("schema", {"a": [1, {"b": datetime.date(2020, 1, 2)}]})
    "schema['a'][1]['b']: date 2020-01-02 (not a JSON value)"
    """
    if value is None or isinstance(value, (str, bool, int)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{where}: {value!r} (JSON numbers are finite)"
    if isinstance(value, (list, tuple)):
        return next((p for i, v in enumerate(value) if (p := non_json(f"{where}[{i}]", v)) is not None), None)
    if isinstance(value, dict):
        for k, v in value.items():
            if not (k is None or isinstance(k, (str, int, float, bool))):   # json.dumps makes these strings
                return f"{where}: key {k!r} of type {type(k).__name__} (JSON object keys are strings)"
            problem = non_json(f"{where}[{k!r}]", v)
            if problem is not None:
                return problem
        return None
    return f"{where}: {type(value).__name__} {str(value)[:60]} (not a JSON value)"


# ---- JSON value -> typed value ----------------------------------------------------------------

def convert(value: Any, tp: Any, schema: dict | None, where: str) -> Any:
    """Convert JSON ``value`` to annotation ``tp``; ``schema`` is its JSON Schema (guides to check).

    Raises :class:`ContentConversionError` naming ``where`` (a field path such as ``Cat.toys[2]``).
    """
    inner, optional = unwrap_optional(tp, where)
    if optional:
        if value is None:
            return None
        tp, schema = inner, (schema or {}).get("anyOf", [schema])[0]
    if tp is bool or tp is str:
        _expect(isinstance(value, tp), value, tp, where)
    elif tp is int:
        _expect(isinstance(value, int) and not isinstance(value, bool), value, tp, where)
    elif tp is float:
        _expect(isinstance(value, (int, float)) and not isinstance(value, bool), value, tp, where)
        value = float(value)
    elif tp is list or get_origin(tp) is list:
        _expect(isinstance(value, list), value, tp, where)
        _check_guides(value, schema, where)
        args = get_args(tp)
        items = (schema or {}).get("items")
        return [convert(v, args[0], items, f"{where}[{i}]") for i, v in enumerate(value)] if args else list(value)
    elif tp is dict or get_origin(tp) is dict:
        _expect(isinstance(value, dict), value, tp, where)
        args = get_args(tp)
        values = (schema or {}).get("additionalProperties")
        return {k: convert(v, args[1], values, f"{where}[{k!r}]") for k, v in value.items()} if args else dict(value)
    elif is_enum(tp):
        allowed = [m.value for m in tp]
        if isinstance(value, bool) or value not in allowed:
            raise ContentConversionError(f"{where}: {_brief(value)} is not a value of {tp.__name__} (one of {allowed})")
        return tp(value)
    elif is_generable(tp):
        return _convert_object(value, tp, where)
    else:
        raise ContentConversionError(f"{where}: cannot convert to {type_name(tp)}; supported: str, int, float, "
                                     f"bool, list[T], dict[str, T], Optional[T], enums and @generable classes")
    _check_guides(value, schema, where)
    return value


def _convert_object(value: Any, cls: type, where: str) -> Any:
    _expect(isinstance(value, dict), value, cls, where)
    schema = cls.generation_schema().to_json_schema()
    props, required = schema["properties"], set(schema["required"])
    unknown = [k for k in value if k not in props]
    if unknown:
        raise ContentConversionError(f"{where}: {cls.__name__} has no field {unknown[0]!r} (fields: {list(props)})")
    kwargs = {}
    for p in properties_of(cls):
        path = f"{where}.{p.name}"
        if value.get(p.name) is None:
            if p.name in required:
                raise ContentConversionError(f"{path}: required field is {'null' if p.name in value else 'missing'}")
            kwargs[p.name] = None
        else:
            kwargs[p.name] = convert(value[p.name], unwrap_optional(p.type_class, path)[0], props[p.name], path)
    return cls(**kwargs)


def _check_guides(value: Any, schema: dict | None, where: str) -> None:
    """Check the guide keywords of ``schema`` (enum, bounds, item counts, pattern) on ``value``."""
    if not schema:
        return
    if "enum" in schema and value not in schema["enum"]:
        raise ContentConversionError(f"{where}: {_brief(value)} is not one of {schema['enum']}")
    if "minimum" in schema and value < schema["minimum"]:
        raise ContentConversionError(f"{where}: {_brief(value)} is below the minimum {schema['minimum']}")
    if "maximum" in schema and value > schema["maximum"]:
        raise ContentConversionError(f"{where}: {_brief(value)} is above the maximum {schema['maximum']}")
    if "minItems" in schema and len(value) < schema["minItems"]:
        raise ContentConversionError(f"{where}: {len(value)} items, fewer than minItems {schema['minItems']}")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        raise ContentConversionError(f"{where}: {len(value)} items, more than maxItems {schema['maxItems']}")
    if "pattern" in schema and not pattern_accepts(schema["pattern"], value):  # the engine's regex, as generated
        raise ContentConversionError(f"{where}: {_brief(value)} does not match the pattern {schema['pattern']!r}")


def _expect(ok: bool, value: Any, tp: Any, where: str) -> None:
    if not ok:
        raise ContentConversionError(f"{where}: expected {type_name(tp)}, got {_show(value)}")


def _show(value: Any) -> str:
    """A value with its Python type, for type mismatches: ``str "12"``."""
    return f"{type(value).__name__} {_brief(value)}"


def _brief(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


# ---- partial conversion (streaming snapshots) --------------------------------------------------

def partial_value(value: Any, tp: Any) -> Any:
    """Convert a streamed (possibly incomplete) JSON value to ``tp`` leniently: what does not fit yet is None.

    Generable objects become their ``PartiallyGenerated`` class, recursively; no guide is checked.
    """
    if value is None:
        return None
    tp = unwrap_optional(tp)[0]
    if tp is bool or tp is str:
        return value if isinstance(value, tp) else None
    if tp is int:
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if tp is float:
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if tp is list or get_origin(tp) is list:
        args = get_args(tp)
        return [partial_value(v, args[0]) if args else v for v in value] if isinstance(value, list) else None
    if tp is dict or get_origin(tp) is dict:
        args = get_args(tp)
        if not isinstance(value, dict):
            return None
        return {k: partial_value(v, args[1]) if args else v for k, v in value.items()}
    if is_enum(tp):
        return next((m for m in tp if m.value == value and not isinstance(value, bool)), None)
    if is_generable(tp) and isinstance(value, dict):
        return tp.PartiallyGenerated._from_generated_content(GeneratedContent(value, is_complete=False))
    return None


# ---- partial JSON ------------------------------------------------------------------------------

_NOTHING = object()  # "no value yet" (distinct from JSON null)
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_LITERALS = {"true": True, "false": False, "null": None}
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_WS = " \t\n\r"


def parse_partial_json(text: str) -> Any:
    """The largest JSON value a prefix of a JSON document implies (``None`` before any value starts).

    Made for streaming: for successive prefixes of one document the results only grow — an
    object gains keys in order and only its last value is still changing, a list gains items
    likewise, a string being generated appears as its prefix — and the whole document gives
    exactly ``json.loads(text)``. Rules:

    - an object key appears once its value has started; a key still being written does not;
    - a string appears as its prefix; a half-written escape (``\\u00``, or the first half of a
      surrogate pair) is held back until complete, so a prefix never changes;
    - a number inside an object or list appears only once a delimiter ends it (``12`` may still
      become ``123``, ``1.`` is no number); ``true``/``false``/``null`` once fully written;
    - a top-level number, which no delimiter can end, appears as soon as it is a valid number.

    Text that is not a prefix of any JSON document raises :class:`DecodingFailureError`.

    >>> parse_partial_json('[1, 2, {"a": "x\\\\u00')
    [1, 2, {'a': 'x'}]
    >>> parse_partial_json('{"a": 1]')
    Traceback (most recent call last):
    ...
    openafm.fm.errors.DecodingFailureError: not a prefix of a JSON document: unexpected ']' at offset 7 in '{"a": 1]'
    """
    value, i, complete = _Parser(text).value(0)
    rest = text[i:]
    if complete:
        if rest.strip(_WS):
            raise _unexpected(text, i + len(rest) - len(rest.lstrip(_WS)))
        return value
    if value is _NOTHING:
        number = text.strip(_WS)
        if _NUMBER.fullmatch(number):
            return json.loads(number)
        return None
    return value


def _unexpected(text: str, i: int) -> DecodingFailureError:
    shown = text if len(text) <= 80 else "..." + text[max(0, i - 60):i + 20] + "..."
    return DecodingFailureError(f"not a prefix of a JSON document: unexpected {text[i]!r} at offset {i} in {shown!r}")


class _Parser:
    """Recursive descent over a JSON prefix. Each method returns (value, next offset, complete)."""

    def __init__(self, text: str):
        self.text = text

    def skip(self, i: int) -> int:
        while i < len(self.text) and self.text[i] in _WS:
            i += 1
        return i

    def value(self, i: int) -> tuple[Any, int, bool]:
        i = self.skip(i)
        if i >= len(self.text):
            return _NOTHING, i, False
        ch = self.text[i]
        if ch == "{":
            return self.object(i + 1)
        if ch == "[":
            return self.array(i + 1)
        if ch == '"':
            return self.string(i + 1)
        if ch == "-" or ch.isdigit():
            return self.number(i)
        for word, literal in _LITERALS.items():
            piece = self.text[i:i + len(word)]
            if piece == word:
                return literal, i + len(word), True
            if word.startswith(piece) and i + len(piece) == len(self.text):
                return _NOTHING, len(self.text), False
        raise _unexpected(self.text, i)

    def number(self, i: int) -> tuple[Any, int, bool]:
        j = i
        while j < len(self.text) and self.text[j] in "+-0123456789.eE":
            j += 1
        if j == len(self.text):  # may still grow
            return _NOTHING, j, False
        if not _NUMBER.fullmatch(self.text[i:j]):
            raise _unexpected(self.text, i)
        return json.loads(self.text[i:j]), j, True

    def string(self, i: int) -> tuple[str, int, bool]:
        out: list[str] = []
        text, n = self.text, len(self.text)
        while i < n:
            ch = text[i]
            if ch == '"':
                return "".join(out), i + 1, True
            if ch != "\\":
                if ch < " ":
                    raise _unexpected(text, i)
                out.append(ch)
                i += 1
                continue
            if i + 1 >= n:
                break  # a half-written escape is held back
            esc = text[i + 1]
            if esc in _ESCAPES:
                out.append(_ESCAPES[esc])
                i += 2
                continue
            if esc != "u":
                raise _unexpected(text, i + 1)
            code, i_next = self.hex4(i + 2)
            if code is None:
                break
            if 0xD800 <= code < 0xDC00:  # high surrogate: needs its low half
                if text[i_next:i_next + 2] != "\\u" and i_next + 2 <= n:
                    raise _unexpected(text, i_next)
                low, i_low = self.hex4(i_next + 2)
                if low is None:
                    break
                if not 0xDC00 <= low < 0xE000:
                    raise _unexpected(text, i_next)
                code, i_next = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00), i_low
            out.append(chr(code))
            i = i_next
        return "".join(out), n, False

    def hex4(self, i: int) -> tuple[int | None, int]:
        """The code of 4 hex digits at ``i`` (None if the text ends first)."""
        digits = self.text[i:i + 4]
        bad = next((k for k, c in enumerate(digits) if c not in "0123456789abcdefABCDEF"), None)
        if bad is not None:
            raise _unexpected(self.text, i + bad)
        return (int(digits, 16), i + 4) if len(digits) == 4 else (None, len(self.text))

    def array(self, i: int) -> tuple[list, int, bool]:
        out: list[Any] = []
        i = self.skip(i)
        if i < len(self.text) and self.text[i] == "]":
            return out, i + 1, True
        while True:
            item, i, complete = self.value(i)
            if item is not _NOTHING:
                out.append(item)
            if not complete:
                return out, i, False
            i = self.skip(i)
            if i >= len(self.text):
                return out, i, False
            if self.text[i] == "]":
                return out, i + 1, True
            if self.text[i] != ",":
                raise _unexpected(self.text, i)
            i += 1

    def object(self, i: int) -> tuple[dict, int, bool]:
        out: dict[str, Any] = {}
        i = self.skip(i)
        if i < len(self.text) and self.text[i] == "}":
            return out, i + 1, True
        while True:
            i = self.skip(i)
            if i >= len(self.text):
                return out, i, False
            if self.text[i] != '"':
                raise _unexpected(self.text, i)
            key, i, complete = self.string(i + 1)
            i = self.skip(i)
            if not complete or i >= len(self.text):
                return out, i, False
            if self.text[i] != ":":
                raise _unexpected(self.text, i)
            item, i, complete = self.value(i + 1)
            if item is not _NOTHING:
                out[key] = item
            if not complete:
                return out, i, False
            i = self.skip(i)
            if i >= len(self.text):
                return out, i, False
            if self.text[i] == "}":
                return out, i + 1, True
            if self.text[i] != ",":
                raise _unexpected(self.text, i)
            i += 1
