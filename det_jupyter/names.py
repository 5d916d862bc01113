"""Names people give things — workspaces, projects, models, templates, labels, users,
groups — and how any text from the API is shown without letting it hijack a display.

A name may use the letters of any script ("Équipe 3", "模型"), digits, spaces between
words and punctuation other than ``/`` and ``\\``. Refused, each with a message that names
the kind, the offending character (as ``U+202E``) or the limit, and what is allowed:

* not a string; empty or only whitespace; longer than the kind's limit;
* a character that is invisible or moves other text around where a name is shown: Unicode
  categories Cc (controls: NUL, tab, newline, ESC…), Cf (format: the bidi overrides and
  isolates U+202A–U+202E and U+2066–U+2069, zero-width characters U+200B–U+200D, U+FEFF,
  soft hyphen…), Cs (lone surrogates), Co (private use), Cn (unassigned in this Python's
  Unicode database), Zl and Zp (line and paragraph separators);
* ``/`` and ``\\`` (names go into URL paths, and some into file names), and the whole name
  ``.`` or ``..``;
* whitespace at either end.

``<``, ``>``, ``&`` and quotes are allowed: they are ordinary characters of a name, and
everything that shows a name escapes it (``html.escape`` in the widgets, ``textContent`` in
the JupyterLab sidebar, ``visible`` in the CLI's tables). Only creating or renaming checks a
name: names already stored are shown as they are, so reads never fail.

``visible`` is the display side of the same rule: it replaces each such character by an
escape (``\\u202e``) so a terminal or a page shows it instead of obeying it.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

from .errors import InvalidRequest

MAX_NAME = 128  # characters in a name unless its kind says otherwise (a table cell, not a paragraph)
MAX_LABEL = 255  # characters in one label (Determined keeps labels as free text)
MAX_LABELS = 1000  # labels on one object: a list, not a store

ALLOWED = ("letters of any script, digits, spaces between words, and punctuation other than "
           "'/' and '\\'")

# Unicode categories a name may not contain: why each is refused, in words.
REFUSED: dict[str, str] = {
    "Cc": "a control character",
    "Cf": "an invisible format character (bidi override or isolate, zero-width character)",
    "Cs": "a lone surrogate (not a character)",
    "Co": "a private-use character",
    "Cn": "an unassigned code point",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
}
_SLASHES = {"/": "'/'", "\\": "'\\'"}
# The escapes people know, for the controls they meet; others are \xNN, \uNNNN, \UNNNNNNNN.
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\0": "\\0"}


def unsafe(ch: str) -> bool:
    """Whether ``ch`` (one character) is invisible or re-orders text where it is shown."""
    return unicodedata.category(ch) in REFUSED


def escape_char(ch: str) -> str:
    """``ch`` as a visible escape: ``\\t``, ``\\x1b``, ``\\u202e``, ``\\U000e0001``."""
    if ch in _SHORT:
        return _SHORT[ch]
    n = ord(ch)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def visible(text: str) -> str:
    """``text`` with every unsafe character replaced by its escape (the rest unchanged)."""
    if text.isprintable():  # the common case, fast: no control, format or separator at all
        return text
    return "".join(escape_char(c) if unsafe(c) else c for c in text)


def describe(ch: str) -> str:
    """``U+202E RIGHT-TO-LEFT OVERRIDE``: the code point and its name, or for one without a
    name (controls, surrogates) its escape: ``U+0000 (\\0)``."""
    name = unicodedata.name(ch, "")
    return f"U+{ord(ch):04X} " + (name or f"({escape_char(ch)})")


def _quoted(value: str, limit: int = 40) -> str:
    """The value for a message: quoted, escaped, and cut short so a message stays short."""
    shown = visible(value)
    return f"'{shown if len(shown) <= limit else shown[:limit] + '…'}'"


def storable(value: str) -> bool:
    """Whether ``value`` can be a stored text at all (no NUL, no lone surrogate: PostgreSQL's
    text and UTF-8 cannot hold them), so looking it up cannot fail."""
    return "\0" not in value and not any("\ud800" <= ch <= "\udfff" for ch in value)


def check_name(kind: str, value: object, *, max_len: int = MAX_NAME) -> str:
    """``value`` if it is a usable name for a ``kind`` (``"workspace name"``, ``"label"``…),
    else InvalidRequest (400) naming the kind, what is wrong and what is allowed."""
    if not isinstance(value, str):
        raise InvalidRequest(f"the {kind} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise InvalidRequest(f"the {kind} must not be empty (use {ALLOWED})")
    if len(value) > max_len:
        raise InvalidRequest(f"the {kind} is {len(value)} characters long; at most {max_len} "
                             "are allowed")
    for ch in value:
        why = REFUSED.get(unicodedata.category(ch))
        if why is not None:
            raise InvalidRequest(f"the {kind} {_quoted(value)} contains {describe(ch)}, {why}; "
                                 f"use {ALLOWED}")
        if ch in _SLASHES:
            raise InvalidRequest(f"the {kind} {_quoted(value)} contains {_SLASHES[ch]}; use {ALLOWED}")
    if value in (".", ".."):
        raise InvalidRequest(f"the {kind} may not be {value!r} (it reads as a path); use {ALLOWED}")
    if value != value.strip():
        raise InvalidRequest(f"the {kind} {_quoted(value)} starts or ends with whitespace; "
                             "remove it")
    return value


def check_labels(value: object, kind: str = "label", *, stored: Iterable[str] = ()) -> list[str]:
    """A list of labels, each a name (``check_name`` rules, at most ``MAX_LABEL`` characters),
    duplicates dropped in order; InvalidRequest naming the first bad one. Labels in
    ``stored`` (the object's labels now) pass as they are: adding a label to a list never
    fails on one that was accepted before these rules."""
    if not isinstance(value, list):
        raise InvalidRequest(f"{kind}s must be a list of strings")
    if len(value) > MAX_LABELS:
        raise InvalidRequest(f"{len(value)} {kind}s given; at most {MAX_LABELS} are allowed")
    kept = set(stored)
    return list(dict.fromkeys(v if isinstance(v, str) and v in kept
                              else check_name(kind, v, max_len=MAX_LABEL) for v in value))


def check_text(kind: str, value: object, *, max_len: int, empty: bool = True) -> str:
    """Free text shown on one line (a display name, an experiment name): any characters but
    the unsafe ones, ``/`` and edge whitespace allowed. InvalidRequest otherwise."""
    if not isinstance(value, str):
        raise InvalidRequest(f"the {kind} must be a string, got {type(value).__name__}")
    if not empty and not value.strip():
        raise InvalidRequest(f"the {kind} must not be empty")
    if len(value) > max_len:
        raise InvalidRequest(f"the {kind} is {len(value)} characters long; at most {max_len} "
                             "are allowed")
    bad = _first_unsafe(value)
    if bad is not None:
        raise InvalidRequest(f"the {kind} {_quoted(value)} contains {describe(bad)}, "
                             f"{REFUSED[unicodedata.category(bad)]}; remove it")
    return value


def _first_unsafe(chars: Iterable[str]) -> str | None:
    return next((c for c in chars if unsafe(c)), None)
