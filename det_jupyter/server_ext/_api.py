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

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import jsonschema

from ..errors import InvalidRequest

#: The largest integer the store holds (SQLite and PostgreSQL BIGINT); ids stop at 2**62.
INT64_MAX = 2**63 - 1
MAX_ID = 2**62
_INT = re.compile(r"-?[0-9]+")
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


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

    def schema(self) -> dict[str, Any]:
        one: dict[str, Any] = {"type": self.type}
        if self.enum:
            one["enum"] = list(self.enum)
        if self.type == "integer":
            one["minimum"] = -MAX_ID if self.minimum is None else self.minimum
            one["maximum"] = MAX_ID if self.maximum is None else self.maximum
        if self.type == "string" and not self.enum:
            one["maxLength"] = 4096
        return {"type": "array", "items": one} if self.many else one

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
        if len(raw) > 4096:
            raise InvalidRequest(f"query parameter {self.name} is longer than 4096 characters")
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
            raise InvalidRequest(f"request body{where}: {_short(error.message)}")

    def body_keys(self) -> frozenset[str] | None:
        """The top-level keys the body may carry; None: any (no declared properties)."""
        if self.body is None or "properties" not in self.body:
            return None
        return frozenset(self.body["properties"])


UNDECLARED = Api(declared=False)


def api(*, query: list[Q] | tuple[Q, ...] = (), body: dict[str, Any] | None = None,
        body_required: bool = False, errors: tuple[int, ...] = (), ok: int = 200) -> Callable[[Any], Any]:
    """Declare a verb's query parameters, request body (a JSON schema, OpenAPI 3.0 subset) and
    the statuses it answers beyond the common ones (``errors``, e.g. 409)."""
    spec = Api(query=tuple(query), body=body, body_required=body_required, errors=tuple(errors), ok=ok)

    def mark(fn: Any) -> Any:
        fn.__det_api__ = spec
        return fn

    return mark


def spec_of(handler: type, verb: str) -> Api:
    fn = getattr(handler, verb.lower(), None)
    return getattr(fn, "__det_api__", UNDECLARED)


# -- JSON schema helpers (used in declarations) ---------------------------------------------

def obj(required: tuple[str, ...] = (), **props: dict[str, Any]) -> dict[str, Any]:
    """A JSON object with these properties (others allowed: Determined's clients send more)."""
    out: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        out["required"] = list(required)
    return out


def integer(minimum: int | None = None, maximum: int | None = None, **extra: Any) -> dict[str, Any]:
    return {"type": "integer", "minimum": -INT64_MAX if minimum is None else minimum,
            "maximum": INT64_MAX if maximum is None else maximum, **extra}


def ident(**extra: Any) -> dict[str, Any]:
    """An id (positive, as every stored id is)."""
    return integer(0, MAX_ID, **extra)


def string(max_length: int = 4096, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "maxLength": max_length, **extra}


def array(items: dict[str, Any], max_items: int = 10_000, **extra: Any) -> dict[str, Any]:
    return {"type": "array", "items": items, "maxItems": max_items, **extra}


BOOL: dict[str, Any] = {"type": "boolean"}
NUMBER: dict[str, Any] = {"type": "number"}
ANY_OBJECT: dict[str, Any] = {"type": "object"}
ANY: dict[str, Any] = {}


def _draft4(schema: Any) -> Any:
    """OpenAPI 3.0's ``nullable`` as JSON Schema draft 4 (the rest is the same subset)."""
    if isinstance(schema, dict):
        out = {k: _draft4(v) for k, v in schema.items() if k != "nullable"}
        if schema.get("nullable") and "type" in out:
            out["type"] = [out["type"], "null"] if isinstance(out["type"], str) else [*out["type"], "null"]
        return out
    if isinstance(schema, list):
        return [_draft4(v) for v in schema]
    return schema


def _short(message: str) -> str:
    return message if len(message) <= 200 else message[:200] + "…"
