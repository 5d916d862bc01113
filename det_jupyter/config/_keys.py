"""Unknown keys in a config, refused as Determined 0.38.1 refuses them, with the likely fix.

``check_experiment_keys``, ``check_template_keys`` and ``check_task_keys`` walk a raw config
(before any default is filled in) against ``_schema``'s tables and raise ``InvalidConfig`` for
the first unknown key, naming its full dotted path and the closest key that level accepts
(``unknown key searcher.max_lenght; did you mean searcher.max_length?``); the message also
lists any further unknown keys so that one round trip fixes them all. A key whose value is null
is still a key: it must be known (a searcher's null key may be any searcher's). Values of the
wrong type are passed over here: ``_validate`` names the type they should have.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from det_jupyter.errors import InvalidConfig

from . import _schema as s


@dataclass(frozen=True)
class Problem:
    """One unknown key: ``field`` (the dotted path reported), ``message`` (the whole sentence)
    and ``short`` (the path and fix, for a list of several)."""

    field: str
    message: str
    short: str


def check_experiment_keys(config: Any) -> None:
    """Refuse a key Determined 0.38.1's experiment schema does not accept, at any level."""
    _raise_first(_walk(s.EXPERIMENT, config, ""))


def check_template_keys(config: Any) -> None:
    """Refuse a key neither an experiment config nor a task config accepts (a template is a
    part of either; nothing in it is required)."""
    _raise_first(_walk(s.TEMPLATE, config, ""))


def check_task_keys(config: Any, kind: str = "COMMAND") -> None:
    """Refuse a key 0.38.1's ``CommandConfig`` (commands, notebooks, shells, TensorBoards)
    does not accept. ``kind`` TENSORBOARD also takes the ids its launch route adds."""
    schema = s.TASK
    if kind == "TENSORBOARD":
        schema = s.Closed({**s.TASK.fields, **dict.fromkeys(s.TENSORBOARD_EXTRA)}, s.TASK.what, s.TASK.hints)
    _raise_first(_walk(schema, config, ""))


def task_keys_only(template: dict[str, Any]) -> dict[str, Any]:
    """``template`` without the keys a task config does not take, at every level the task
    schema closes: 0.38.1 reads a template into a task's config leniently, so an experiment
    template (``searcher``, ``hyperparameters``...) still serves a notebook. A new dict."""
    out = _prune(s.TASK, template)
    return out if isinstance(out, dict) else {}


def unknown_keys(config: Any, schema: s.Node = s.EXPERIMENT) -> list[Problem]:
    """Every unknown key of ``config`` under ``schema``, in the order of the config."""
    return list(_walk(schema, config, ""))


# -- the walk ---------------------------------------------------------------------------------


def _raise_first(problems: Iterator[Problem]) -> None:
    found = list(problems)
    if not found:
        return
    first = found[0]
    message = first.message
    if len(found) > 1:
        message += " Also unknown: " + ", ".join(p.short for p in found[1:]) + "."
    raise InvalidConfig(message, field=first.field)


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


def _walk(node: s.Node, value: Any, path: str) -> Iterator[Problem]:
    if node is None:
        return
    if isinstance(node, s.Closed):
        yield from _closed(node, value, path)
    elif isinstance(node, s.Union):
        yield from _union(node, value, path)
    elif isinstance(node, s.Each):
        if isinstance(value, list):
            for i, item in enumerate(value):
                yield from _walk(node.item, item, f"{path}[{i}]")
    elif isinstance(node, s.Values):
        if isinstance(value, dict):
            for key, item in value.items():
                yield from _walk(node.value, item, _join(path, key))
    else:  # s.HPARAM
        yield from _hparam(value, path)


def _closed(node: s.Closed, value: Any, path: str, *, extra: frozenset[str] = frozenset(),
            unknown: Callable[[object], Problem | None] | None = None) -> Iterator[Problem]:
    """Check a mapping against ``node``. ``extra`` keys pass too; ``unknown(key)`` may word the
    problem for a key the node lacks (unions point at the members that have it)."""
    if not isinstance(value, dict):
        return
    for key, item in value.items():
        if key in node.fields:
            yield from _walk(node.fields[key], item, _join(path, key))
        elif key in extra:
            continue
        else:
            yield (unknown(key) if unknown else None) or _unknown(node, key, path)


def _unknown(node: s.Closed, key: object, path: str) -> Problem:
    full = _join(path, key)
    field = path if node.whole and path else full
    guess = _suggest(node, key)
    if guess is not None:
        fix = f"did you mean {_join(path, guess)}?"
        return Problem(field, f"unknown key {full}; {fix}", f"{full} ({fix})")
    where = node.what or path or "this mapping"
    accepted = ", ".join(sorted(node.fields))
    return Problem(field, f"unknown key {full}; {where} accepts {accepted}", full)


def _suggest(node: s.Closed, key: object) -> str | None:
    text = str(key)
    if text in node.hints:
        return node.hints[text]
    by_case = {name.lower(): name for name in node.fields}
    if text.lower() in by_case:
        return by_case[text.lower()]
    close = difflib.get_close_matches(text, list(node.fields), n=1, cutoff=0.6)
    return close[0] if close else None


def _union(node: s.Union, value: Any, path: str) -> Iterator[Problem]:
    if not isinstance(value, dict):
        return
    chosen = value.get(node.key)
    member = node.members.get(chosen) if isinstance(chosen, str) else None
    if member is None:  # no member named: any member's key, the name is checked elsewhere
        yield from _closed(node.fallback, value, path)
        return
    nulls = frozenset(k for k, v in value.items() if v is None and k in node.fallback.fields)

    def elsewhere(key: object) -> Problem | None:
        others = [name for name in node.current if name != chosen and key in node.members[name].fields]
        if not others:
            return None
        full = _join(path, key)
        label = node.label.format(chosen)
        keys = ", ".join(sorted(member.fields))
        return Problem(full, f"unknown key {full}; {label} does not take {key} "
                             f"(it is a key of {', '.join(others)}); its keys are {keys}",
                       f"{full} (not for {label})")

    labelled = s.Closed(member.fields, member.what or node.label.format(chosen), member.hints)
    yield from _closed(labelled, value, path, extra=nulls | node.tolerated, unknown=elsewhere)


def _hparam(value: Any, path: str) -> Iterator[Problem]:
    if not isinstance(value, dict):
        return  # a plain value is a constant
    if "type" not in value:  # a group: every member is a hyperparameter again
        for key, item in value.items():
            yield from _hparam(item, _join(path, key))
        return
    kind = value["type"]
    spec = s.HPARAM_KINDS.get(kind) if isinstance(kind, str) else None
    if spec is not None:  # an unknown type is refused by name in _hparams.validate_spec
        yield from _closed(spec, value, path)


# -- pruning a template for a task -----------------------------------------------------------


def _prune(node: s.Node, value: Any) -> Any:
    if isinstance(node, s.Closed) and isinstance(value, dict):
        return {k: _prune(node.fields[k], v) for k, v in value.items() if k in node.fields}
    if isinstance(node, s.Each) and isinstance(value, list):
        return [_prune(node.item, v) for v in value]
    return value
