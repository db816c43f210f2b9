"""``@generable``: make a class a type the model can generate (the SDK's decorator, Swift's ``@Generable``).

Works on dataclass-style classes (annotated fields, optionally ``= guide(...)``; the class is made
a dataclass if it is not one) and on ``enum.Enum`` classes. Usable as ``@generable``,
``@generable()``, ``@generable("description")`` (as in the SDK) or ``@generable(description=...)``.

The class gains what the SDK adds: ``generation_schema()`` (a classmethod returning its
:class:`GenerationSchema`), ``_from_generated_content(content)``, a ``generated_content``
property on instances, a ``PartiallyGenerated`` class for streaming, and ``_generable = True``.

>>> import enum
>>> import openafm.fm as fm
>>> @fm.generable("How urgent a task is")
... class Priority(enum.Enum):
...     LOW = "low"
...     HIGH = "high"
>>> @fm.generable("A to-do item")
... class Task:
...     title: str = fm.guide("Short title")
...     priority: Priority
...     tags: list[str] = fm.guide(max_items=3)
...     due: str | None = fm.guide("ISO date, if any", regex=r"\\d{4}-\\d{2}-\\d{2}")
>>> task = Task._from_generated_content(fm.GeneratedContent({"title": "Feed Momo", "priority": "high", "tags": []}))
>>> task
Task(title='Feed Momo', priority=<Priority.HIGH: 'high'>, tags=[], due=None)
>>> task.generated_content.to_json()
'{"title": "Feed Momo", "priority": "high", "tags": []}'
>>> Task.PartiallyGenerated._from_generated_content(fm.GeneratedContent.from_partial_json('{"title": "Fe'))
Task.PartiallyGenerated(title='Fe', priority=None, tags=None, due=None, id=GenerationID(...))
>>> isinstance(Task, fm.Generable), isinstance(task, fm.Generable)
(True, True)
"""

from __future__ import annotations

import dataclasses
import sys
import typing
from enum import Enum
from typing import Any, Callable, Protocol, runtime_checkable

from openafm.fm.content import GeneratedContent, GenerationID, partial_value
from openafm.fm.errors import GenerableDecoratorError
from openafm.fm.schema import GenerationSchema, Property, is_generable


class ConvertibleFromGeneratedContent(Protocol):
    """A type that can be made from :class:`GeneratedContent` (``_from_generated_content``)."""

    @classmethod
    def _from_generated_content(cls, content: GeneratedContent) -> Any:
        raise NotImplementedError("Subclasses must implement _from_generated_content class method")


class ConvertibleToGeneratedContent(Protocol):
    """A value that can be turned into :class:`GeneratedContent` (``generated_content``)."""

    @property
    def generated_content(self) -> GeneratedContent:
        raise NotImplementedError("Subclasses must implement generated_content property")


@runtime_checkable
class Generable(ConvertibleFromGeneratedContent, ConvertibleToGeneratedContent, Protocol):
    """What ``@generable`` classes (and their instances) satisfy; ``isinstance(Cls, Generable)`` checks it.

    Subclassing it is refused, as in the SDK: use the decorator.
    """

    _generable: bool = True
    _generable_description: str | None = None
    PartiallyGenerated: Any = None

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        raise TypeError("Subclassing Protocol Generable is not allowed. Use the @fm.generable() decorator instead.")

    @classmethod
    def generation_schema(cls) -> GenerationSchema:
        raise NotImplementedError("Generable types must implement generation_schema class method")


def generable(arg: type | str | None = None, /, *, description: str | None = None) -> Any:
    """Make a class generable; see the module docstring for the forms and what is added.

    >>> @generable
    ... class Point:
    ...     x: float
    ...     y: float
    >>> Point.generation_schema().to_json_schema()["required"]
    ['x', 'y']
    >>> generable(lambda: None)
    Traceback (most recent call last):
    ...
    openafm.fm.errors.GenerableDecoratorError: @fm.generable can only be applied to classes, not function <lambda>
    """
    if isinstance(arg, str) or arg is None:
        if isinstance(arg, str) and description is not None:
            raise GenerableDecoratorError(f"@generable got two descriptions: {arg!r} and description={description!r}")
        text = arg if arg is not None else description
        caller = sys._getframe(1)

        def decorate(cls: type) -> Any:
            return _make_generable(cls, text, caller)

        return decorate
    if callable(arg) and not isinstance(arg, type):
        raise GenerableDecoratorError(f"@fm.generable can only be applied to classes, not function "
                                      f"{getattr(arg, '__name__', arg)}")
    return _make_generable(arg, description, sys._getframe(1))


def _make_generable(cls: Any, description: str | None, caller: Any) -> Any:
    if not isinstance(cls, type):
        kind = "function" if callable(cls) else type(cls).__name__
        raise GenerableDecoratorError(f"@fm.generable can only be applied to classes, not {kind} "
                                      f"{getattr(cls, '__name__', repr(cls))}")
    if description is not None and not isinstance(description, str):
        raise GenerableDecoratorError(f"@generable description must be a string, got {description!r}")
    if issubclass(cls, Enum):
        return _make_enum_generable(cls, description)
    if not dataclasses.is_dataclass(cls):
        if not cls.__dict__.get("__annotations__"):
            raise GenerableDecoratorError(
                f"@fm.generable requires the class '{cls.__name__}' to have type-annotated fields.\n"
                f"Correct usage:\n    @fm.generable\n    class {cls.__name__}:\n"
                f"        name: str  # Type annotation is required\n"
                f"Incorrect usage:\n    class {cls.__name__}:\n        name = ''  # not a field: no annotation")
        try:
            cls = dataclasses.dataclass(cls)
        except (TypeError, ValueError) as e:
            raise GenerableDecoratorError(
                f"Failed to convert '{cls.__name__}' to a dataclass: {e}. Mutable defaults need "
                f"field(default_factory=...); fields without defaults must come before fields with defaults.\n"
                f"Example of correct usage:\n    tags: list[str] = field(default_factory=list)") from e
    hints = _resolve_hints(cls, caller)
    cls._generable = True
    cls._generable_description = description
    cls._generable_properties = [
        Property(f.name, hints[f.name], f.metadata.get("description"), f.metadata.get("guides", []))
        for f in dataclasses.fields(cls)]
    cls.generation_schema = classmethod(_generation_schema)
    cls._from_generated_content = classmethod(_from_generated_content)
    cls.generated_content = property(_generated_content)
    cls.PartiallyGenerated = _partially_generated(cls)
    return cls


def _resolve_hints(cls: type, caller: Any) -> dict[str, Any]:
    """Field types with string annotations resolved: in the class's module, the decorating scope, or itself."""
    local = {**(caller.f_locals if caller is not None else {}), cls.__name__: cls}
    try:
        return typing.get_type_hints(cls, localns=local)
    except Exception as e:
        raise GenerableDecoratorError(
            f"Failed to resolve type hints for '{cls.__name__}': {e!r}. Types named in quotes must be "
            f"defined before the class is decorated (a class may name itself)") from e


def _make_enum_generable(cls: type[Enum], description: str | None) -> type[Enum]:
    cls._generable = True
    cls._generable_description = description
    cls.generation_schema = classmethod(_generation_schema)
    cls._from_generated_content = classmethod(_from_generated_content)
    cls.generated_content = property(lambda self: GeneratedContent(self.value))
    cls.PartiallyGenerated = cls  # an enum value is either there or not
    return cls


def _generation_schema(cls: Any) -> GenerationSchema:
    """The class's schema, built (and checked) on first use, then kept."""
    schema = cls.__dict__.get("_generable_schema")
    if schema is None:
        properties = cls.__dict__.get("_generable_properties", [])
        schema = GenerationSchema(cls, cls.__dict__.get("_generable_description"), properties)
        cls._generable_schema = schema
    return schema


def _from_generated_content(cls: Any, content: GeneratedContent) -> Any:
    """An instance made from ``content``; a mismatch raises ContentConversionError naming the field."""
    return content.value(cls)


def _generated_content(self: Any) -> GeneratedContent:
    return GeneratedContent(to_json_value(self))


def to_json_value(obj: Any) -> Any:
    """The JSON value of a generable instance (None-valued optional fields left out, enums by value)."""
    if isinstance(obj, Enum):
        return obj.value
    if is_generable(type(obj)) and dataclasses.is_dataclass(obj):
        fields = ((f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj))
        return {name: to_json_value(value) for name, value in fields if value is not None}
    if isinstance(obj, (list, tuple)):
        return [to_json_value(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_json_value(v) for k, v in obj.items()}
    return obj


def _partially_generated(cls: Any) -> type:
    """``<Cls>PartiallyGenerated``: every field optional (None until streamed), plus the generation ``id``.

    If the class has its own field named ``id``, that field is kept and no generation id is added.
    """
    props = cls._generable_properties
    fields: list[Any] = [(p.name, typing.Optional[p.type_class], dataclasses.field(default=None)) for p in props]
    has_id = any(p.name == "id" for p in props)
    if not has_id:
        fields.append(("id", GenerationID, dataclasses.field(default_factory=GenerationID)))

    def from_content(partial_cls: Any, content: GeneratedContent) -> Any:
        raw = content.value()
        raw = raw if isinstance(raw, dict) else {}
        kwargs = {p.name: partial_value(raw.get(p.name), p.type_class) for p in props}
        return partial_cls(**kwargs) if has_id else partial_cls(**kwargs, id=content.id)

    namespace: dict[str, Callable[..., Any]] = {"_from_generated_content": classmethod(from_content)}
    partial = dataclasses.make_dataclass(f"{cls.__name__}PartiallyGenerated", fields, namespace=namespace)
    partial.__module__ = cls.__module__
    partial.__qualname__ = f"{cls.__qualname__}.PartiallyGenerated"
    return partial
