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
from collections.abc import Callable, Mapping
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


@functools.cache
def _plan(cls: type) -> tuple[tuple[str, str, Callable[[Any], Any], bool], ...]:
    """(field name, JSON key, coercer, required) per init field of `cls`: worked out once per
    class, not per record (a run can hold thousands of events)."""
    hints = _hints(cls)
    return tuple(
        (
            field.name,
            json_key(field),
            _coercer(hints[field.name]),
            field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING,
        )
        for field in dataclasses.fields(cls)
        if field.init
    )


def parse(cls: type[T], raw: Any) -> T:
    """`cls` from a decoded JSON object; raises Invalid when a required field is unusable."""
    if not isinstance(raw, Mapping):
        raise Invalid(f"expected an object, got {type(raw).__name__}")
    values = {}
    for name, key, coerce, required in _plan(cls):
        value = raw.get(key, _MISSING)
        value = _MISSING if value is _MISSING else coerce(value)
        if value is not _MISSING:
            values[name] = value
        elif required:
            raise Invalid(f"{cls.__name__}.{name}: missing or not a {_hints(cls)[name]}")
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


@functools.cache
def _coercer(hint: Any) -> Callable[[Any], Any]:
    """A function taking a JSON value to `hint`, or to _MISSING when it is not one."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        nullable = type(None) in args
        options = [_coercer(option) for option in args if option is not type(None)]

        def union(value: Any) -> Any:
            if value is None and nullable:
                return None
            for option in options:
                if (coerced := option(value)) is not _MISSING:
                    return coerced
            return _MISSING

        return union
    if origin is tuple:
        item = _coercer(args[0])

        def sequence(value: Any) -> Any:
            if not isinstance(value, (list, tuple)):
                return _MISSING
            items = tuple(item(v) for v in value)
            return _MISSING if any(v is _MISSING for v in items) else items

        return sequence
    if origin in (dict, Mapping):
        item = _coercer(args[1])

        def mapping(value: Any) -> Any:
            if not isinstance(value, Mapping):
                return _MISSING
            items = {key: item(v) for key, v in value.items() if isinstance(key, str)}
            return {key: v for key, v in items.items() if v is not _MISSING}

        return mapping
    if hint is Any:
        return lambda value: value
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        members = {member.value: member for member in hint}

        def member(value: Any) -> Any:
            try:
                known = members.get(value, _MISSING)
            except TypeError:  # not hashable (a list, a dict)
                return _MISSING
            if known is _MISSING and isinstance(value, str):
                try:  # a value this reader does not know: the enum's `_missing_` (if any) says what it is
                    return hint(value)
                except ValueError:
                    return _MISSING
            return known

        return member
    if dataclasses.is_dataclass(hint):

        def record(value: Any) -> Any:
            try:
                return parse(hint, value)
            except Invalid:
                return _MISSING

        return record
    return _SCALARS.get(hint, lambda value: _MISSING)


def _exact(kind: type) -> Callable[[Any], Any]:
    """Values of `kind` itself: a bool is not an int here, though Python says it is."""
    return lambda value: value if isinstance(value, kind) and not isinstance(value, bool) else _MISSING


_SCALARS: dict[Any, Callable[[Any], Any]] = {
    bool: lambda value: value if isinstance(value, bool) else _MISSING,
    int: _exact(int),
    float: lambda value: float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else _MISSING,
    str: lambda value: value if isinstance(value, str) else _MISSING,
}
