"""Workspaces and projects as the API shows them: the records (``store.workspaces``'s) and the
pure rules for names, keys, notes and paging."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ... import names as _names
from ...errors import InvalidRequest
from ...store.workspaces import ProjectRecord, WorkspaceRecord, offset_window

__all__ = ["MAX_KEY", "MAX_NAME", "ProjectRecord", "WorkspaceRecord", "check_key", "check_name", "check_note",
           "check_notes", "key_candidates", "offset_window"]

MAX_NAME = 80  # characters in a workspace or project name (Determined's limit)
MAX_KEY = 5  # characters in a project key
_KEY = re.compile(r"[A-Za-z0-9]{1,5}")


# -- pure rules ---------------------------------------------------------------------------

def check_name(value: Any, what: str) -> str:
    """A workspace or project name, with surrounding spaces trimmed (U+0020 only: a tab or
    newline is refused, not trimmed); InvalidRequest naming the rule it breaks
    (``_names.check_name``'s rules, at most ``MAX_NAME`` characters)."""
    return _names.check_name(f"{what} name", value.strip(" ") if isinstance(value, str) else value,
                             max_len=MAX_NAME)


def check_key(value: Any) -> str:
    """A project key given by the user, upper-cased."""
    if not isinstance(value, str) or not _KEY.fullmatch(value):
        raise InvalidRequest(f"a project key is 1 to {MAX_KEY} letters or digits, got {value!r}")
    return value.upper()


def key_candidates(name: str) -> Iterable[str]:
    """Keys for a project named ``name``, best first: its first letters, then numbered."""
    prefix = re.sub(r"[^A-Za-z0-9]", "", name).upper()[:3] or "PRJ"
    yield prefix
    for n in range(1, 100):
        yield f"{prefix}{n}"


def check_notes(value: Any) -> list[dict[str, str]]:
    """Project notes: a list of ``{"name": str, "contents": str}``."""
    if not isinstance(value, list):
        raise InvalidRequest("notes must be a list of {name, contents} objects")
    return [check_note(v, f"notes[{i}]") for i, v in enumerate(value)]


def check_note(value: Any, where: str = "the note") -> dict[str, str]:
    if not isinstance(value, dict):
        raise InvalidRequest(f"{where} must be an object with name and contents")
    name, contents = value.get("name", ""), value.get("contents", "")
    if not isinstance(name, str) or not isinstance(contents, str):
        raise InvalidRequest(f"{where}: name and contents must be strings")
    return {"name": name, "contents": contents}
