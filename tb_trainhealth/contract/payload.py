"""Typed JSON payloads: frozen dataclasses checked field by field against their annotations.

Records in event files are data from disk: anything goes. `parse` is the one place that
checks them. A field of the wrong type falls back to its default (so one odd field of an
old or foreign writer costs that field, not the record); a required field (no default)
that is missing or wrong rejects the record. Rules then read plain typed fields.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")

_MISSING = object()


class Invalid(ValueError):
    """A record whose required fields are missing or of the wrong type."""


def json_key(field: dataclasses.Field) -> str:
    """The field's key in JSON (`class` is a keyword in Python: fields may rename)."""
    return field.metadata.get("key", field.name)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def parse(cls: type[T], raw: Any) -> T:
    """`cls` from a decoded JSON object; raises Invalid when a required field is unusable."""
    if not isinstance(raw, Mapping):
        raise Invalid(f"expected an object, got {type(raw).__name__}")
    hints = _hints(cls)
    values = {}
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        value = _coerce(raw.get(json_key(field), _MISSING), hints[field.name])
        if value is not _MISSING:
            values[field.name] = value
        elif required:
            raise Invalid(f"{cls.__name__}.{field.name}: missing or not a {hints[field.name]}")
    return cls(**values)


def to_json(payload: Any) -> Any:
    """The JSON-ready form of a payload (dataclasses, enums, tuples, dicts, scalars). Fields at
    their default are left out: records stay small, and readers of schema 1 that expect a key
    to be absent rather than null keep working."""
    if dataclasses.is_dataclass(payload) and not isinstance(payload, type):
        return {
            json_key(f): to_json(getattr(payload, f.name))
            for f in dataclasses.fields(payload)
            if not _at_default(f, getattr(payload, f.name))
        }
    if isinstance(payload, enum.Enum):
        return payload.value
    if isinstance(payload, (list, tuple)):
        return [to_json(item) for item in payload]
    if isinstance(payload, Mapping):
        return {str(key): to_json(value) for key, value in payload.items()}
    return payload


def _at_default(field: dataclasses.Field, value: Any) -> bool:
    if field.default is not dataclasses.MISSING:
        return value == field.default
    if field.default_factory is not dataclasses.MISSING:
        return value == field.default_factory()
    return False


def _coerce(value: Any, hint: Any) -> Any:
    """`value` as `hint`, or _MISSING when it is not one."""
    if value is _MISSING:
        return _MISSING
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for option in args:
            if option is not type(None) and (coerced := _coerce(value, option)) is not _MISSING:
                return coerced
        return _MISSING
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            return _MISSING
        item_hint = args[0]
        items = [_coerce(item, item_hint) for item in value]
        return _MISSING if any(item is _MISSING for item in items) else tuple(items)
    if origin in (dict, Mapping):
        if not isinstance(value, Mapping):
            return _MISSING
        items = {key: _coerce(item, args[1]) for key, item in value.items() if isinstance(key, str)}
        return {key: item for key, item in items.items() if item is not _MISSING}
    if hint is Any:
        return value
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except ValueError:
            return _MISSING
    if dataclasses.is_dataclass(hint):
        try:
            return parse(hint, value)
        except Invalid:
            return _MISSING
    if hint is bool:
        return value if isinstance(value, bool) else _MISSING
    if hint is int:
        return value if isinstance(value, int) and not isinstance(value, bool) else _MISSING
    if hint is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return float(value) if ok else _MISSING
    if hint is str:
        return value if isinstance(value, str) else _MISSING
    return _MISSING
