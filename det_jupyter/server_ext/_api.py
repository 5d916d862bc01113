"""What each route accepts, declared once beside its verb, and checked from that declaration.

A verb is decorated with ``@api(query=[...], body={...}, errors=(...))``. The same
declaration does three things, so the served document cannot drift from what is served:

- ``DetHandler.prepare`` checks the query string against it (types, ranges, enums) and answers
  400 naming the parameter; ``body_json`` checks the body against its JSON schema;
- a handler reads parameters and body keys only through it: reading an undeclared one is
  logged as a bug (and refused under ``det_strict_authz``, as in the tests);
- ``_openapi`` writes each operation's parameters, request body and statuses from it.
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import jsonschema

from .. import names as _names
from ..errors import InvalidRequest

#: The largest integer the store holds (SQLite and PostgreSQL BIGINT); ids stop at 2**62.
INT64_MAX = 2**63 - 1
MAX_ID = 2**62
_INT = re.compile(r"-?[0-9]+")
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")
#: The most fields a query string may hold: past it tornado answers a bare 400 before any
#: handler runs (``HTTPServerRequest``'s ``max_arguments``), so no declaration allows more.
MAX_QUERY_FIELDS = 1000
#: The most values a repeatable parameter takes unless its declaration says otherwise.
DEFAULT_MAX_ITEMS = 100


@dataclass(frozen=True)
class Q:
    """One query parameter. ``type`` is integer, boolean or string; ``many``: repeatable
    (``?states=A&states=B``)."""

    name: str
    type: str = "string"
    many: bool = False
    enum: tuple[str, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    required: bool = False
    description: str = ""
    #: strings: the longest, and a pattern (Python ``re`` syntax that is also ECMA's)
    max_length: int = 4096
    pattern: str | None = None
    #: ``many``: the most values (``DEFAULT_MAX_ITEMS`` unless given)
    max_items: int | None = None

    @property
    def most(self) -> int:
        """How many times the parameter may be given."""
        return 1 if not self.many else DEFAULT_MAX_ITEMS if self.max_items is None else self.max_items

    def schema(self) -> dict[str, Any]:
        one: dict[str, Any] = {"type": self.type}
        if self.enum:
            one["enum"] = list(self.enum)
        if self.type == "integer":
            one["minimum"] = -MAX_ID if self.minimum is None else self.minimum
            one["maximum"] = MAX_ID if self.maximum is None else self.maximum
        if self.type == "string" and not self.enum:
            one["maxLength"] = self.max_length
            if self.pattern is not None:
                one["pattern"] = self.pattern
        if not self.many:
            return one
        return {"type": "array", "items": one, "maxItems": self.most}

    def parse(self, raw: str) -> Any:
        """One value of this parameter, or InvalidRequest naming it and what it takes."""
        if self.type == "integer":
            if not _INT.fullmatch(raw) or len(raw) > 20:
                raise InvalidRequest(f"query parameter {self.name} must be an integer (ASCII digits), "
                                     f"got {raw[:40]!r}")
            value = int(raw)
            lo = -MAX_ID if self.minimum is None else self.minimum
            hi = MAX_ID if self.maximum is None else self.maximum
            if not lo <= value <= hi:
                raise InvalidRequest(f"query parameter {self.name} must be between {lo} and {hi}, got {value}")
            return value
        if self.type == "boolean":
            low = raw.lower()
            if low not in _TRUE + _FALSE:
                raise InvalidRequest(f"query parameter {self.name} must be true or false, got {raw[:40]!r}")
            return low in _TRUE
        if self.enum and raw not in self.enum:
            raise InvalidRequest(f"query parameter {self.name} must be one of {', '.join(self.enum)}, "
                                 f"got {raw[:40]!r}")
        if len(raw) > self.max_length:
            raise InvalidRequest(f"query parameter {self.name} is longer than {self.max_length} characters")
        if self.pattern is not None and not re.search(self.pattern, raw):
            raise InvalidRequest(f"query parameter {self.name} must match {self.pattern}, got {raw[:40]!r}")
        return raw


#: Statuses any authenticated operation can answer, with what they mean.
COMMON = {400: "the request is malformed; the message names what is wrong",
          401: "no valid credentials",
          403: "the caller may see this but not do it",
          404: "not found, or not visible to the caller"}
REASONS = {**COMMON, 409: "the object's state does not allow this",
           413: "the request body is over this route's limit (named in the message)",
           503: "a dependency is down for now; retry later"}


@dataclass(frozen=True)
class Api:
    """A verb's declaration (see the module docstring)."""

    query: tuple[Q, ...] = ()
    body: dict[str, Any] | None = None
    body_required: bool = False
    errors: tuple[int, ...] = ()
    ok: int = 200
    #: path parameters' schemas where the route's pattern says less (a name's rules)
    path: dict[str, Any] | None = None
    declared: bool = True
    _by_name: dict[str, Q] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._by_name.update({q.name: q for q in self.query})

    def param(self, name: str) -> Q | None:
        return self._by_name.get(name)

    def check_query(self, args: dict[str, list[bytes]]) -> None:
        for name, raws in args.items():
            q = self._by_name.get(name)
            if q is None:
                continue  # unknown parameters are ignored, as grpc-gateway ignores them
            if len(raws) > 1 and not q.many:
                raise InvalidRequest(f"query parameter {name} may be given once")
            if len(raws) > q.most:
                raise InvalidRequest(f"query parameter {name} may be given at most {q.most} times")
            for raw in raws:
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise InvalidRequest(f"query parameter {name} is not valid UTF-8") from None
                if text or q.type == "string":
                    q.parse(text)
        for q in self.query:
            if q.required and not args.get(q.name):
                raise InvalidRequest(f"query parameter {q.name} is required")

    @cached_property
    def _validator(self) -> Any:
        assert self.body is not None
        return jsonschema.Draft4Validator(_draft4(self.body))

    def check_body(self, body: Any) -> None:
        if self.body is None:
            return
        error = jsonschema.exceptions.best_match(self._validator.iter_errors(body))
        if error is not None:
            where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
            if error.validator == "type":
                kinds = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
                said = " or ".join(_KINDS.get(k, k) for k in kinds if k != "null")
                got = _what(error.instance)
                raise InvalidRequest(f"request body{where} must be {said or 'null'} (got {got})")
            # A limit's message leads with the value, which may be long: say the limit instead.
            limit = _LIMITS.get(error.validator)
            message = limit.format(error.validator_value) if limit else _short(error.message)
            raise InvalidRequest(f"request body{where}: {message}")

    def body_keys(self) -> frozenset[str] | None:
        """The top-level keys the body may carry; None: any (no declared properties)."""
        if self.body is None or "properties" not in self.body:
            return None
        return frozenset(self.body["properties"])


#: The body check's message for a broken limit (jsonschema's quotes the whole value first).
_LIMITS = {"maxItems": "has more than {} items", "minItems": "has fewer than {} items",
           "maxLength": "is longer than {} characters", "minLength": "is shorter than {} characters",
           "maxProperties": "has more than {} keys", "maximum": "is over {}", "minimum": "is under {}"}

#: How a type error names what was expected.
_KINDS = {"boolean": "true or false", "integer": "an integer", "number": "a number", "string": "a string",
          "object": "an object", "array": "a list"}

UNDECLARED = Api(declared=False)


def api(*, query: list[Q] | tuple[Q, ...] = (), body: dict[str, Any] | None = None,
        body_required: bool = False, errors: tuple[int, ...] = (), ok: int = 200,
        path: dict[str, Any] | None = None) -> Callable[[Any], Any]:
    """Declare a verb's query parameters, request body (a JSON schema, OpenAPI 3.0 subset) and
    the statuses it answers beyond the common ones (``errors``, e.g. 409); ``path``: schemas of
    path parameters (by the verb's argument name) that the service checks beyond the route's
    pattern."""
    spec = Api(query=tuple(query), body=body, body_required=body_required, errors=tuple(errors), ok=ok,
               path=path)

    def mark(fn: Any) -> Any:
        fn.__det_api__ = spec
        return fn

    return mark


def spec_of(handler: type, verb: str) -> Api:
    fn = getattr(handler, verb.lower(), None)
    return getattr(fn, "__det_api__", UNDECLARED)


# -- JSON schema helpers (used in declarations) ---------------------------------------------

def obj(required: tuple[str, ...] = (), **props: dict[str, Any]) -> dict[str, Any]:
    """A JSON object with these properties (others allowed: Determined's clients send more).
    An optional property may also be null: the stock client sends ``null`` for a field it
    leaves unset (``"projectId": null``), and a handler reads null as absent."""
    out: dict[str, Any] = {"type": "object", "properties": {
        k: v if k in required else _nullable(v) for k, v in props.items()}}
    if required:
        out["required"] = list(required)
    return out


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    if "type" in schema and "enum" in schema and None not in schema["enum"]:
        # OpenAPI 3.0.3: ``nullable`` does not widen an ``enum``; null must be one of its values
        return {**schema, "nullable": True, "enum": [*schema["enum"], None]}
    if "type" in schema:
        return {**schema, "nullable": True}
    if "anyOf" in schema:
        return {**schema, "anyOf": [_nullable(schema["anyOf"][0]), *schema["anyOf"][1:]]}
    if "allOf" in schema:
        return {"anyOf": [schema, {"type": "string", "nullable": True, "enum": [None]}]}
    return schema  # any value, null included


def integer(minimum: int | None = None, maximum: int | None = None, **extra: Any) -> dict[str, Any]:
    """An integer; by default any a body may carry (``body_json`` refuses top-level numbers past
    ``MAX_ID``: nothing we store is larger)."""
    return {"type": "integer", "minimum": -MAX_ID if minimum is None else minimum,
            "maximum": MAX_ID if maximum is None else maximum, **extra}


def ident(**extra: Any) -> dict[str, Any]:
    """An id (positive, as every stored id is)."""
    return integer(0, MAX_ID, **extra)


def int64(minimum: int = 0, maximum: int = MAX_ID) -> dict[str, Any]:
    """An int64 field: a JSON number, or its decimal digits as a string (protobuf's JSON form,
    which some stock commands send, e.g. ``det token revoke``'s ``tokenId``)."""
    digits = {"type": "string", "pattern": "^-?[0-9]{1,18}$" if minimum < 0 else "^[0-9]{1,18}$"}
    return {"anyOf": [integer(minimum, maximum), digits]}


def string(max_length: int = 4096, min_length: int = 0, **extra: Any) -> dict[str, Any]:
    out = {"type": "string", "maxLength": max_length, **extra}
    if min_length:
        out["minLength"] = min_length
    return out


def enum(*values: str) -> dict[str, Any]:
    """One of these strings (a protobuf enum's names)."""
    return {"type": "string", "enum": list(values)}


def array(items: dict[str, Any], max_items: int = 10_000, **extra: Any) -> dict[str, Any]:
    return {"type": "array", "items": items, "maxItems": max_items, **extra}


def dict_of(values: dict[str, Any]) -> dict[str, Any]:
    """An object whose keys are free and whose values all match ``values``."""
    return {"type": "object", "additionalProperties": values}


def echo(schema: dict[str, Any], path_param: str) -> dict[str, Any]:
    """A body field that repeats the path's ``path_param`` (Determined's request messages carry
    the id twice): left out, or equal to the path's; another value is refused (400), since a
    client naming two objects is confused. ``x-det-echoes`` says so in the document."""
    return {**schema, "x-det-echoes": path_param}


BOOL: dict[str, Any] = {"type": "boolean"}
NUMBER: dict[str, Any] = {"type": "number"}
ANY_OBJECT: dict[str, Any] = {"type": "object"}
ANY: dict[str, Any] = {}
#: ``orderBy`` as every list takes it (v1OrderBy).
ORDER_BY = ("ORDER_BY_UNSPECIFIED", "ORDER_BY_ASC", "ORDER_BY_DESC")


def users(max_items: int = 20) -> Q:
    """``users``: usernames to filter by (``?users=a&users=b``)."""
    return Q("users", many=True, max_length=_names.MAX_NAME, max_items=max_items)


#: The most bytes a query string may take, its values percent-encoded at their longest (12
#: bytes a character): tornado reads at most 64 KiB of request line and headers, and cuts the
#: connection past it. The tests hold every declaration under it.
MAX_QUERY_BYTES = 60_000


def paging(*, negative_offset: bool = False) -> list[Q]:
    """``offset``/``limit``/``orderBy`` of a list (``limit`` 0: all; a negative ``offset``
    counts from the end where the list allows it)."""
    return [Q("offset", "integer", minimum=-MAX_ID if negative_offset else 0),
            Q("limit", "integer", minimum=0), Q("orderBy", enum=ORDER_BY)]


# -- names, one-line text and passwords, as the services check them --------------------------
#
# A JSON schema pattern that accepts exactly what ``services._names`` and the password policy
# accept, so that the document's promise holds both ways: what it allows is stored, what it
# refuses is a 400. Unicode categories are not in JSON schema's regex dialect, so the allowed
# characters are spelled out, as ranges, from this Python's Unicode database.

#: Past these, every code point is unassigned or private use (Unicode 14 to 16): never allowed.
_SCANNED = (range(0, 0x40000), range(0xE0000, 0xE1000))


def _class(keep: list[bool], cps: list[int]) -> str:
    """A regex character class of the code points ``cps[i]`` where ``keep[i]``."""
    out, i, n = [], 0, len(cps)
    while i < n:
        if not keep[i]:
            i += 1
            continue
        j = i
        while j + 1 < n and keep[j + 1] and cps[j + 1] == cps[j] + 1:
            j += 1
        out.append(_lit(cps[i]) if i == j else f"{_lit(cps[i])}-{_lit(cps[j])}")
        i = j + 1
    return "[" + "".join(out) + "]"


def _lit(cp: int) -> str:
    c = chr(cp)
    return "\\" + c if c in "\\]^-[" else c


@functools.cache
def _classes() -> dict[str, str]:
    cps = [cp for r in _SCANNED for cp in r]
    chars = list(map(chr, cps))
    refused = frozenset(_names.REFUSED)
    safe = [c not in refused for c in map(unicodedata.category, chars)]
    in_name = [ok and c not in "/\\" for ok, c in zip(safe, chars, strict=True)]
    edge = [ok and not c.isspace() for ok, c in zip(in_name, chars, strict=True)]
    return {
        "text": _class(safe, cps), "name": _class(in_name, cps), "edge": _class(edge, cps),
        "text_nonspace": _class([ok and not c.isspace() for ok, c in zip(safe, chars, strict=True)], cps),
        "name_nd": _class([ok and not c.isdigit() for ok, c in zip(in_name, chars, strict=True)], cps),
        "edge_nodot": _class([ok and c != "." for ok, c in zip(edge, chars, strict=True)], cps),
        "upper": _class(list(map(str.isupper, chars)), cps),
        "lower": _class(list(map(str.islower, chars)), cps),
        "digit": _class(list(map(str.isdigit, chars)), cps),
    }


def name(max_len: int = _names.MAX_NAME, *, all_digits: bool = True, padded: bool = False,
         **extra: Any) -> dict[str, Any]:
    """A name (``_names.check_name``): no controls, format characters, '/' or '\\', no
    whitespace at either end, not '.' or '..'; with ``all_digits=False`` not digits alone
    (a model's name, which would read as its id); ``padded``: spaces (U+0020) around it are
    dropped first (workspace and project names)."""
    c = _classes()
    edge, dotless, mid = c["edge"], c["edge_nodot"], c["name"]
    if padded:
        forms = [dotless, f"{dotless}{edge}", f"\\.{dotless}", f"{edge}{mid}{{1,{max_len - 2}}}{edge}"]
        pattern = "^ *(?:" + "|".join(forms) + ") *$"
        return service_checked({"title": f"PaddedName{max_len}", "type": "string", "format": "det-name",
                                "pattern": pattern, **extra})
    forms = [dotless, f"{dotless}{edge}", f"\\.{dotless}", f"{edge}{mid}+{edge}"]
    plain = service_checked({"title": f"Name{max_len}", "type": "string", "format": "det-name", "minLength": 1,
                             "maxLength": max_len, "pattern": "^(?:" + "|".join(forms) + ")$"})
    if all_digits:
        return {**plain, **extra}
    # ...and some character is not a digit (a pattern that is searched for, not anchored)
    return service_checked({"allOf": [plain, {"type": "string", "pattern": c["name_nd"]}], **extra})


def username(max_len: int = _names.MAX_NAME) -> dict[str, Any]:
    """A username: a name without any whitespace (``services.users.check_username``)."""
    c = _classes()
    edge, dotless = c["edge"], c["edge_nodot"]
    pattern = f"^(?:{dotless}|{dotless}{edge}|\\.{dotless}|{edge}{{3,{max_len}}})$"
    return service_checked({"title": f"Username{max_len}", "type": "string", "format": "det-username",
                            "minLength": 1, "maxLength": max_len, "pattern": pattern})


def text(max_len: int, *, empty: bool = True, **extra: Any) -> dict[str, Any]:
    """One line of free text (``_names.check_text``): anything but controls and format
    characters; with ``empty=False``, not empty or only whitespace."""
    c = _classes()
    safe = c["text"]
    body = f"{safe}*" if empty else f"{safe}*{c['text_nonspace']}{safe}*"
    return service_checked({"title": f"{'Text' if empty else 'NonEmptyText'}{max_len}", "type": "string",
                            "format": "det-text", "maxLength": max_len, **({} if empty else {"minLength": 1}),
                            "pattern": f"^{body}$", **extra})


def labels() -> dict[str, Any]:
    """A list of labels (``_names.check_labels``)."""
    return array(name(_names.MAX_LABEL), _names.MAX_LABELS)


def password() -> dict[str, Any]:
    """A plain password under the policy (``services.users.PASSWORD_RULES``): at least 8
    characters, with an upper-case letter, a lower-case letter and a digit, in any order."""
    c = _classes()
    kinds = [c["upper"], c["lower"], c["digit"]]
    any_ = "[\\s\\S]*"
    orders = ["".join(any_ + k for k in p) + any_ for p in itertools.permutations(kinds)]
    return service_checked({"title": "Password", "type": "string", "format": "det-password",
                            "minLength": 8, "maxLength": 4096,
                            "pattern": "^(?:" + "|".join(orders) + ")$"})


def service_checked(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as documentation of a rule the service checks itself, with a message that
    names the offending character or rule (a pattern's failure would only quote the pattern):
    the body check lets any value through there (``x-det-checked-by: service``).

    The rules of names, one-line text and passwords also name a ``format`` (``det-name``,
    ``det-username``, ``det-text``, ``det-password``): their patterns spell out Unicode ranges,
    which a generator that builds strings from a pattern (Hypothesis, under Schemathesis)
    takes seconds to compile per draw; a generator for the format, checked against the
    pattern, is how tests/integration/_schemathesis_hooks.py draws them."""
    return {**schema, SERVICE_CHECKED: "service"}


SERVICE_CHECKED = "x-det-checked-by"


def _draft4(schema: Any) -> Any:
    """OpenAPI 3.0's ``nullable`` as JSON Schema draft 4 (the rest is the same subset); a
    ``service_checked`` schema accepts anything (the service checks it)."""
    if isinstance(schema, dict):
        if schema.get(SERVICE_CHECKED) == "service":
            return {}
        out = {k: _draft4(v) for k, v in schema.items() if k != "nullable"}
        if schema.get("nullable") and "type" in out:
            out["type"] = [out["type"], "null"] if isinstance(out["type"], str) else [*out["type"], "null"]
        return out
    if isinstance(schema, list):
        return [_draft4(v) for v in schema]
    return schema


def _what(value: Any) -> str:
    """A short account of a JSON value: scalars as written, containers by kind."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return _short(repr(value))
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else _short(str(value))


def _short(message: str) -> str:
    return message if len(message) <= 200 else message[:200] + "…"
