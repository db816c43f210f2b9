"""Configs are data: dataclasses that round-trip through plain dicts, YAML and flat `key.path: value` text.

The flat dump is what the golden-config files hold, so any change to a preset shows up as a text diff.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from typing import Any

from openafm.errors import ConfigError


def to_dict(obj: Any) -> Any:
    """Dataclasses -> dicts, enums -> their values, tuples -> lists (recursively)."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (list, tuple)):
        return [to_dict(x) for x in obj]
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj


def from_dict(cls: type, data: Any, path: str = "") -> Any:
    """Build `cls` (a dataclass, enum, list[...] or scalar type) from plain data; unknown keys raise."""
    origin = typing.get_origin(cls)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(cls) if a is not type(None)]
        if data is None:
            return None
        return from_dict(args[0], data, path)
    if origin in (list, tuple):
        (item,) = typing.get_args(cls)[:1]
        if not isinstance(data, (list, tuple)):
            raise ConfigError(f"{path or 'config'}: expected a list, got {data!r}")
        return [from_dict(item, x, f"{path}.{i}") for i, x in enumerate(data)]
    if isinstance(cls, type) and issubclass(cls, enum.Enum):
        try:
            return cls(data)
        except ValueError:
            raise ConfigError(f"{path}: {data!r} is not one of {[m.value for m in cls]}") from None
    if dataclasses.is_dataclass(cls):
        if not isinstance(data, dict):
            raise ConfigError(f"{path or cls.__name__}: expected a mapping, got {data!r}")
        hints = typing.get_type_hints(cls)
        names = {f.name for f in dataclasses.fields(cls) if f.init}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ConfigError(f"{path or cls.__name__}: unknown keys {unknown}; accepted keys: {sorted(names)}")
        kwargs = {k: from_dict(hints[k], v, f"{path}.{k}" if path else k) for k, v in data.items()}
        return cls(**kwargs)
    if cls is float and isinstance(data, int) and not isinstance(data, bool):
        return float(data)
    if cls in (int, float, str, bool) and not isinstance(data, cls):
        raise ConfigError(f"{path}: expected {cls.__name__}, got {data!r}")
    return data


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts/lists -> {"a.b.0.c": value}."""
    if dataclasses.is_dataclass(data):
        data = to_dict(data)
    out: dict[str, Any] = {}
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else None
    if items is None:
        return {prefix: data}
    for k, v in items:
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, (dict, list)) and v:
            out.update(flatten(v, key))
        else:
            out[key] = v
    return out


def dump_flat(obj: Any) -> str:
    """One `key.path: value` line per leaf, in field order: the golden-config format."""
    return "".join(f"{k}: {_scalar(v)}\n" for k, v in flatten(to_dict(obj)).items())


def _scalar(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if v == [] or v == {}:
        return str(v)
    return str(v)
