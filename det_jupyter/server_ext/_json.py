"""JSON request bodies parsed so that no body can crash, stall or poison the master.

``checked_json`` bounds what a later read must cope with: nesting (``MAX_DEPTH``), integers
(what a 64-bit column holds) and strings (no lone surrogates, which neither UTF-8 nor the
database can store; no NULs, which PostgreSQL's text cannot hold). A problem is a 400 that
names where it is in the body.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import InvalidRequest

MAX_DEPTH = 32
INT64 = 2**63


def _where(path: list[Any]) -> str:
    return "body" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def _bad_char(text: str) -> str | None:
    if "\x00" in text:
        return "a NUL character (U+0000)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"a lone surrogate (U+{ord(text[exc.start]):04X})"
    return None


def _scrub(text: str) -> str:
    return "".join("\ufffd" if c == "\x00" or "\ud800" <= c <= "\udfff" else c for c in text)


def checked_json(raw: bytes, *, scrub: bool = False, max_depth: int = MAX_DEPTH) -> Any:
    """``raw`` parsed and checked (see the module docstring); with ``scrub``, bad characters
    in strings are replaced by U+FFFD instead of refused (text a task printed)."""
    try:
        value = json.loads(raw)
    except RecursionError:
        raise InvalidRequest(f"the request body is nested too deeply (at most {max_depth} levels)") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequest(f"the request body is not valid JSON: {str(exc)[:200]}") from None
    return check_value(value, scrub=scrub, max_depth=max_depth)


def check_value(value: Any, *, scrub: bool = False, max_depth: int = MAX_DEPTH) -> Any:
    """The walk of ``checked_json`` over a parsed value (iterative: no depth can overflow it)."""
    root = [value]
    stack: list[tuple[Any, Any, int, list[Any]]] = [(root, 0, 0, [])]
    while stack:
        parent, key, depth, path = stack.pop()
        item = parent[key]
        if isinstance(item, str):
            problem = _bad_char(item)
            if problem is not None:
                if not scrub:
                    raise InvalidRequest(f"{_where(path)} holds {problem}; send valid Unicode text")
                parent[key] = _scrub(item)
        elif isinstance(item, bool) or item is None or isinstance(item, float):
            continue
        elif isinstance(item, int):
            if not -INT64 <= item < INT64:
                raise InvalidRequest(f"{_where(path)} is out of range: integers must fit in 64 bits "
                                     f"(got {len(str(abs(item)))} digits)")
        elif isinstance(item, (dict, list)):
            if depth >= max_depth:
                raise InvalidRequest(f"{_where(path[:max_depth])} is nested too deeply "
                                     f"(at most {max_depth} levels of objects and lists)")
            if isinstance(item, dict):
                for k in list(item):
                    problem = _bad_char(k)
                    if problem is not None:
                        if not scrub:
                            raise InvalidRequest(f"a key in {_where(path)} holds {problem}")
                        item[_scrub(k)] = item.pop(k)
                        k = _scrub(k)
                    stack.append((item, k, depth + 1, path + [k]))
            else:
                for i in range(len(item)):
                    stack.append((item, i, depth + 1, path + [i]))
    return root[0]
