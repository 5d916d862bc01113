"""Validation helpers of the wire types: each reads one key of a decoded JSON object and raises
a ValueError that names the frame, the key and what it should be."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_MISSING: Any = object()


def frame_of(raw: Any, kind: str) -> Mapping[str, Any]:
    """``raw`` as a mapping whose ``type`` is ``kind``."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"a {kind} frame must be a JSON object, got {_show(raw)}")
    if raw.get("type") != kind:
        raise ValueError(f"a {kind} frame must have type {kind!r}, got {_show(raw.get('type'))}")
    return raw


def obj(raw: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise ValueError(f"{what} must be a JSON object, got {_show(raw)}")
    return raw


def get(raw: Mapping[str, Any], key: str, what: str, default: Any = _MISSING) -> Any:
    if key in raw:
        return raw[key]
    if default is _MISSING:
        raise ValueError(f"{what}: {key} is missing")
    return default


def string(raw: Mapping[str, Any], key: str, what: str, default: Any = _MISSING) -> str:
    value = get(raw, key, what, default)
    if not isinstance(value, str):
        raise ValueError(f"{what}: {key} must be a string, got {_show(value)}")
    return value


def opt_string(raw: Mapping[str, Any], key: str, what: str) -> str | None:
    value = raw.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{what}: {key} must be a string or null, got {_show(value)}")
    return value


def integer(raw: Mapping[str, Any], key: str, what: str, default: Any = _MISSING) -> int:
    value = get(raw, key, what, default)
    if not is_int(value):
        raise ValueError(f"{what}: {key} must be an integer, got {_show(value)}")
    return int(value)


def opt_integer(raw: Mapping[str, Any], key: str, what: str) -> int | None:
    value = raw.get(key)
    if value is not None and not is_int(value):
        raise ValueError(f"{what}: {key} must be an integer or null, got {_show(value)}")
    return value


def number(raw: Mapping[str, Any], key: str, what: str) -> float:
    value = get(raw, key, what)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what}: {key} must be a number, got {_show(value)}")
    return value


def array(raw: Mapping[str, Any], key: str, what: str, default: Any = _MISSING) -> list[Any]:
    value = get(raw, key, what, default)
    if not isinstance(value, list):
        raise ValueError(f"{what}: {key} must be a list, got {_show(value)}")
    return value


def strings(raw: Mapping[str, Any], key: str, what: str, default: Any = _MISSING) -> tuple[str, ...]:
    items = array(raw, key, what, default)
    if not all(isinstance(x, str) for x in items):
        raise ValueError(f"{what}: {key} must be a list of strings, got {_show(items)}")
    return tuple(items)


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
