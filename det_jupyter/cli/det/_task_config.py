"""A task's config from ``--config-file`` and repeated ``--config key=value`` (pure).

Determined's semantics (``determined.cli.command.parse_config_overrides``): each entry is
``dotted.key=value``; the value is YAML (``0`` is an int, ``true`` a bool), a value with commas
is a list of YAML values, ``environment.environment_variables`` and ``bind_mounts`` always take
a list; entries are applied in order on top of the file, so they win over it and a later entry
wins over an earlier one.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

import yaml

#: Keys whose value is always a list, even when one value is given.
COERCE_TO_LIST = frozenset({"environment.environment_variables", "bind_mounts"})


class ConfigError(ValueError):
    """A ``--config`` entry or the config file cannot be used; the message says which."""


def parse_value(text: str) -> Any:
    """One override's value: YAML scalars, or a list of them when it has commas."""
    try:
        if "," in text:
            return [yaml.safe_load(v) for v in text.split(",")]
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"cannot read the value {text!r}: {str(exc).splitlines()[0]}") from None


def apply_overrides(config: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """A copy of ``config`` with every ``key=value`` of ``overrides`` set, in order."""
    out = copy.deepcopy(config)
    for entry in overrides:
        key, sep, raw = entry.partition("=")
        key = key.strip()
        if not sep or not key or any(not part for part in key.split(".")):
            raise ConfigError(f"--config {entry!r}: expected key=value, e.g. resources.slots=0")
        value = parse_value(raw)
        if key in COERCE_TO_LIST and not isinstance(value, list):
            value = [value]
        parts = key.split(".")
        node = out
        for i, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                where = ".".join(parts[: i + 1])
                raise ConfigError(f"--config {entry!r}: {where} is {child!r}, not a mapping")
            node = child
        node[parts[-1]] = value
    return out


def load_file(text: str, name: str) -> dict[str, Any]:
    """The mapping a config file holds ({} for an empty file)."""
    try:
        parsed = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{name} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if parsed is None:
        return {}
    if not isinstance(parsed, dict):
        raise ConfigError(f"{name} must hold a YAML mapping (resources:, idle_timeout:, …)")
    return parsed


def task_config(file_text: str | None, overrides: Iterable[str], name: str = "the config file"
                ) -> dict[str, Any]:
    """The file's mapping (if any) with the overrides on top."""
    base = load_file(file_text, name) if file_text is not None else {}
    return apply_overrides(base, overrides)
