"""YAML text from a user → plain values, safely.

What a request may send is bounded before anything is built: the text's size, then, on the
parser's events (no value is built yet), how deep it nests and how much its aliases repeat when
written out — a few hundred bytes of ``&a [*b, *b, ...]`` otherwise become millions of values
once the config is stored or answered as JSON. The parser is libyaml's (PyYAML's C loader,
several times the pure-Python one's speed; that one only where PyYAML lacks libyaml). The values
are ``yaml.safe_load``'s, except that a date stays a string (JSON has no date type; Determined
reads them as strings) and only the plain tags (``!!str``, ``!!int``, ...) may be written out.
Every problem is an ``InvalidConfig`` (400) or a ``PayloadTooLarge`` (413) that says where it is
and what to do; never a ``RecursionError`` or a ``ValueError``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import yaml
from yaml.constructor import ConstructorError, SafeConstructor

from det_jupyter.errors import InvalidConfig, PayloadTooLarge

#: The most UTF-8 bytes of YAML text taken (an experiment config, a master.yaml).
MAX_CONFIG_BYTES = 512 * 1024  # a config this large still leaves the loop answering within ~250 ms
#: The most values aliases (``*name``) may add when written out: each alias counts every value
#: under its anchor, the aliases inside it written out too.
MAX_ALIAS_NODES = 100_000
#: The most characters of text aliases may add when written out (one alias of a long string
#: repeats the string, which a count of values does not see).
MAX_ALIAS_CHARS = 1_000_000
#: The deepest nesting of mappings and lists (a top-level mapping is level 1).
MAX_YAML_DEPTH = 32
#: The longest integer taken, in characters: converting longer ones costs time that grows with
#: the square of the length (Python refuses past 4,300 digits).
MAX_INT_CHARS = 1000
MAX_YAML_BYTES = MAX_CONFIG_BYTES  # (other names in use for the same limits)
MAX_DEPTH = MAX_YAML_DEPTH
HAS_LIBYAML = hasattr(yaml, "CSafeLoader")

_CORE = "tag:yaml.org,2002:"
#: The tags a document may write out: the ones JSON can hold, and ``!`` (a plain string).
_ALLOWED_TAGS = frozenset({"!"} | {_CORE + t for t in ("str", "int", "float", "bool", "null", "map", "seq")})
if TYPE_CHECKING:  # libyaml's loader, when present, has the pure-Python SafeLoader's surface
    _BaseLoader = yaml.SafeLoader
else:
    _BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _construct_int(loader: _Loader, node: yaml.ScalarNode) -> int:
    if len(node.value) > MAX_INT_CHARS:
        raise ConstructorError(None, None, f"an integer of {len(node.value):,} characters (at most "
                                           f"{MAX_INT_CHARS:,}); quote it to make it a string", node.start_mark)
    return SafeConstructor.construct_yaml_int(loader, node)


class _Loader(_BaseLoader):
    """``SafeLoader`` (libyaml's when installed) without implicit dates, and with a bounded int."""

    yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag != _CORE + "timestamp"]
        for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
    }


_Loader.add_constructor(_CORE + "int", _construct_int)


def load_yaml(text: str, *, what: str = "the experiment config", max_bytes: int = MAX_CONFIG_BYTES) -> Any:
    """One YAML document as plain values (``None`` for an empty one).

    ``what`` names the document in messages ("the master config"). Raises
    ``PayloadTooLarge`` past ``max_bytes`` and ``InvalidConfig`` for malformed YAML (line and
    column), nesting past ``MAX_YAML_DEPTH``, aliases that add more than ``MAX_ALIAS_NODES``
    values or ``MAX_ALIAS_CHARS`` characters, a tag JSON cannot hold or an integer past
    ``MAX_INT_CHARS``.
    """
    if not what.startswith("the "):
        what = f"the {what}"
    _check_size(text, what, max_bytes)
    try:
        _check_events(text, what)
        return yaml.load(text, Loader=_Loader)  # noqa: S506 (a safe loader: see _Loader)
    except yaml.MarkedYAMLError as exc:
        raise InvalidConfig(
            f"{what} is not valid YAML at {_position(exc, text)}; "
            "fix the YAML syntax there (check indentation, colons and quotes)"
        ) from None
    except yaml.YAMLError as exc:
        # Unmarked errors (e.g. the reader's, on a bad character) carry no position.
        first = str(exc).splitlines()[0] if str(exc) else "malformed YAML"
        raise InvalidConfig(f"{what} is not valid YAML: {first}; fix the YAML syntax") from None
    except UnicodeEncodeError as exc:  # libyaml reads UTF-8: a lone surrogate cannot be encoded
        raise InvalidConfig(f"{what} holds a character that is not valid Unicode (U+{ord(exc.object[exc.start]):04X} "
                            f"at character {exc.start + 1:,}); send valid Unicode text") from None


def _check_size(text: str, what: str, max_bytes: int) -> None:
    if len(text) * 4 <= max_bytes:  # (a character is at most 4 bytes of UTF-8)
        return
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise PayloadTooLarge(
            f"{what} is {_mib(size)} ({size:,} bytes); the most taken is {_mib(max_bytes)}: keep long "
            "lists of values in the model definition's files and read them in your code")


def _mib(n: int) -> str:
    mib = n / (1024 * 1024)
    return f"{mib:g} MiB" if mib == int(mib) else f"{mib:.2f} MiB"


def _position(exc: yaml.MarkedYAMLError, text: str) -> str:
    """Where a parse error is, and the parser's complaint. A problem found at the end of the
    text (an unclosed bracket or quote) is placed where the unclosed part began, or else on
    the text's last line, rather than on the line past it."""
    problem = " ".join(p for p in (exc.context, exc.problem) if p) or "malformed YAML"
    mark, context = exc.problem_mark, exc.context_mark
    if mark is None or mark.index < len(text):
        return f"{_where(mark or context)}: {problem}"
    if context is not None and context.index < len(text):
        where = _where(context)
    else:
        lines = text.rstrip("\r\n").split("\n")
        where = f"line {len(lines)}, column {len(lines[-1]) + 1}"
    return f"{where}: {problem} (at {_where(mark)}, the end of the text)"


def _where(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "unknown position"


def _check_events(text: str, what: str) -> None:
    """Refuse ``text`` if it nests too deeply, its aliases repeat too much when written out,
    or it writes out a tag JSON cannot hold; iterative, on events, before any value is built."""
    try:
        _scan(_Loader(text), what)
    except yaml.MarkedYAMLError as exc:
        if not HAS_LIBYAML or _BaseLoader is yaml.SafeLoader or "nesting depth" not in (exc.problem or ""):
            raise
        # libyaml reads up to a line ahead of the event asked for, and stops at its own limit
        # (1,000 levels) before handing over the event past ours: find that one with PyYAML's
        # parser, which has no such limit (it stops at level MAX_YAML_DEPTH + 1).
        _scan(yaml.SafeLoader(text), what)
        raise


def _scan(loader: Any, what: str) -> None:
    """Each anchor keeps the size of what it names written out — values, characters, levels
    of nesting — so an alias adds its anchor's size, aliases inside the anchor included."""
    anchors: dict[str, tuple[int, int, int]] = {}  # anchor → (values, characters, levels)
    # Open mappings and lists: [anchor, values before it, characters before it, levels so far].
    stack: list[list[Any]] = []
    values = chars = alias_values = alias_chars = 0
    try:
        while loader.check_event():
            event = loader.get_event()
            kind = type(event)
            if kind is yaml.ScalarEvent:
                _check_tag(event, what)
                if event.style == '"':  # only escapes in double quotes make these characters
                    _check_chars(event, what)
                values += 1
                chars += len(event.value)
                if event.anchor is not None:
                    anchors[event.anchor] = (1, len(event.value), 0)
            elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
                _check_tag(event, what)
                if len(stack) >= MAX_YAML_DEPTH:
                    raise _too_deep(event, what)
                stack.append([event.anchor, values, chars, 1])
                values += 1
            elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                anchor, values0, chars0, levels = stack.pop()
                if anchor is not None:
                    anchors[anchor] = (values - values0, chars - chars0, levels)
                if stack:
                    stack[-1][3] = max(stack[-1][3], levels + 1)
            elif kind is yaml.AliasEvent:
                if any(frame[0] == event.anchor for frame in stack):
                    raise InvalidConfig(
                        f"{what} has an alias *{event.anchor} at {_where(event.start_mark)} inside the "
                        f"value its anchor &{event.anchor} names: a value cannot contain itself; "
                        "write the value out instead")
                named = anchors.get(event.anchor)
                if named is None:
                    continue  # an undefined alias: the loader reports it with its position
                n, c, levels = named
                values += n
                chars += c
                alias_values += n
                alias_chars += c
                if alias_values > MAX_ALIAS_NODES or alias_chars > MAX_ALIAS_CHARS:
                    raise _too_repeated(event, what)
                if len(stack) + levels > MAX_YAML_DEPTH:
                    raise _too_deep(event, what, alias=True)
                if stack:
                    stack[-1][3] = max(stack[-1][3], levels + 1)
            elif kind is yaml.DocumentStartEvent:
                anchors.clear()  # anchors are per document
    finally:
        loader.dispose()


def _check_tag(event: Any, what: str) -> None:
    if event.tag is not None and event.tag not in _ALLOWED_TAGS:
        tag = "!!" + event.tag.removeprefix(_CORE) if event.tag.startswith(_CORE) else event.tag
        raise InvalidConfig(
            f"{what} has the tag {tag} at {_where(event.start_mark)}, which has no JSON value; "
            "remove the tag (only strings, numbers, booleans, null, mappings and lists are taken)")


def _check_chars(event: Any, what: str) -> None:
    value = event.value
    if "\x00" in value:
        bad = "a NUL character (\\0)"
    else:
        try:
            value.encode("utf-8")
            return
        except UnicodeEncodeError as exc:
            bad = f"a lone surrogate (U+{ord(value[exc.start]):04X})"
    raise InvalidConfig(f"{what} has a string at {_where(event.start_mark)} holding {bad}, which the "
                        "master cannot store; remove that escape")


def _too_deep(event: Any, what: str, *, alias: bool = False) -> InvalidConfig:
    expanded = f" once *{event.anchor} is written out" if alias else ""
    return InvalidConfig(
        f"{what} is nested too deeply at {_where(event.start_mark)}{expanded}: at most {MAX_YAML_DEPTH} "
        "levels of mappings and lists are taken; flatten that part")


def _too_repeated(event: Any, what: str) -> InvalidConfig:
    return InvalidConfig(
        f"{what}'s aliases (*name) would add more than {MAX_ALIAS_NODES:,} values or "
        f"{MAX_ALIAS_CHARS:,} characters when written out (the alias *{event.anchor} at "
        f"{_where(event.start_mark)} goes past that); write the repeated value out instead of "
        "aliasing it, or repeat less")
