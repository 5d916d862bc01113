"""Schemathesis hooks for test_schemathesis: what the document says that JSON schema cannot.

A body field marked ``x-det-echoes: <path parameter>`` repeats the path's value (Determined's
request messages carry the id in the path and the body); a generated *valid* request gets the
path's value there, as every client sends it. Invalid requests are left as generated.

Names, usernames, one-line text and passwords carry a ``format`` (``_api.service_checked``):
their exact patterns list Unicode ranges that Hypothesis takes seconds to compile per draw, so
values are drawn here — ASCII and a few non-ASCII letters, symbols and emoji — and Schemathesis
keeps those that match the document's pattern.
"""

from __future__ import annotations

import atexit
import json
import os
import re
from typing import Any
from urllib.parse import unquote

import schemathesis
from hypothesis import strategies as st

_WORD = "A-Za-z0-9_\\-éüßΩ漢字😀"
_EDGE = f"[{_WORD}]"
_NAME = st.one_of(st.from_regex(f"\\A{_EDGE}\\Z", fullmatch=True),
                  st.from_regex(f"\\A{_EDGE}[{_WORD} .()']{{0,14}}{_EDGE}\\Z", fullmatch=True))
schemathesis.openapi.format("det-name", st.one_of(
    _NAME, st.tuples(st.sampled_from(["", " "]), _NAME, st.sampled_from(["", " "])).map("".join)))
schemathesis.openapi.format("det-username", st.from_regex(f"\\A{_EDGE}[{_WORD}.]{{0,14}}\\Z", fullmatch=True))
schemathesis.openapi.format("det-text", st.one_of(
    st.just(""), st.from_regex(f"\\A{_EDGE}[{_WORD} .,:;!?()'\"]{{0,30}}\\Z", fullmatch=True)))
schemathesis.openapi.format("det-password", st.from_regex("\\A[A-ZÉ][a-zé]{5,10}[0-9]{1,4}[!#%]?\\Z", fullmatch=True))


def _body_schema(case: Any) -> Any:
    definition = case.operation.definition
    raw = getattr(definition, "raw", definition)
    try:
        return raw["requestBody"]["content"]["application/json"]["schema"]
    except (KeyError, TypeError):
        return {}


def _body_properties(case: Any) -> dict[str, Any]:
    schema = _body_schema(case)
    props = schema.get("properties") if isinstance(schema, dict) else None
    return props if isinstance(props, dict) else {}


def _positive(case: Any) -> bool:
    meta = getattr(case, "meta", None)
    mode = getattr(getattr(meta, "generation", None), "mode", None)
    return mode is None or getattr(mode, "value", mode) == "positive"


def _takes_integer(schema: dict[str, Any]) -> bool:
    return schema.get("type") == "integer" or any(
        isinstance(s, dict) and s.get("type") == "integer" for s in schema.get("anyOf", []))


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: Any) -> None:
    """Echo fields get the path's value right before the call, whichever phase built the case
    (a path value is text: a field that takes an integer gets it as one). A followed master
    log never ends (it streams until the client leaves), so the fuzzer reads it unfollowed."""
    query = case.query
    if case.path == "/api/v1/master/logs" and isinstance(query, dict) and str(query.get("follow")).lower() == "true":
        query["follow"] = False
    if not isinstance(case.body, dict) or not _positive(case):
        return
    for key, schema in _body_properties(case).items():
        param = schema.get("x-det-echoes") if isinstance(schema, dict) else None
        if param and case.body.get(key) is not None and param in (case.path_parameters or {}):
            value = case.path_parameters[param]
            if isinstance(value, str):
                value = unquote(value)  # the path's value as sent, percent-encoded
            if isinstance(value, str) and _takes_integer(schema) and value.isdigit():
                value = int(value)
            case.body[key] = value


#: What no response may show (test_schemathesis.LEAKS; the data dir from the test's environment).
_LEAKS = [re.compile(p) for p in (r"Traceback \(most recent call last\)", r"\bSELECT\s", r"\bINSERT INTO\b",
                                  r"sqlite3\.", r"psycopg", r'File "/')]


@schemathesis.hook
def after_call(context: Any, case: Any, response: Any) -> None:
    """Every response body is scanned: a leak is written, one line each, to ``DET_ST_LEAKS``,
    and the number of bodies scanned to ``DET_ST_LEAKS.count`` (the test reads both)."""
    out = os.environ.get("DET_ST_LEAKS")
    if not out:
        return
    text = response.text if isinstance(response.text, str) else ""
    data_dir = os.environ.get("DET_ST_DATA_DIR", "")
    # A notebook's working directory (<data-dir>/notebooks/<user>, docs/security.md) is the
    # notebook's own, shown in its config: not a leak of where the master keeps its data.
    hits = [p.pattern for p in _LEAKS if p.search(text)]
    if data_dir and data_dir in text.replace(data_dir + "/notebooks/", "<notebooks>/"):
        hits.append("data dir")
    _SCANNED[0] += 1
    if hits:
        with open(out, "a") as f:
            f.write(json.dumps({"request": f"{case.method} {case.formatted_path}", "status": response.status_code,
                                "hits": hits, "body": text[:300]}) + "\n")


_SCANNED = [0]


@atexit.register
def _count() -> None:
    if os.environ.get("DET_ST_LEAKS"):
        with open(os.environ["DET_ST_LEAKS"] + ".count", "w") as f:
            f.write(str(_SCANNED[0]))


#: What the master refuses in any body, wherever it is (``server_ext._json``): integers past 64
#: bits (and nesting past 32 levels), as its message says it.
_BODY_WIDE = re.compile(r"is out of range: integers must fit in 64 bits|is nested too deeply")
_INT64 = 2**63


def _offending(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of the integers in ``value`` that do not fit in 64 bits, and of levels past 32."""
    if len(path) > 32:
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _offending(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _offending(v, (*path, i))]
    if isinstance(value, int) and not isinstance(value, bool) and not -_INT64 <= value < _INT64:
        return [path]
    return []


def _free_below(schema: Any, path: tuple[Any, ...]) -> bool:
    """Whether the document leaves the value at ``path`` free: on the way down, a key its
    object does not declare, or a schema that says nothing of what is inside."""
    if not path:
        return False
    if not isinstance(schema, dict) or "$ref" in schema:
        return True  # only name and password strings are referenced: nothing nested in them
    branches = schema.get("anyOf", []) + schema.get("allOf", []) + schema.get("oneOf", [])
    if branches:
        return any(_free_below(b, path) for b in branches)
    head, rest = path[0], path[1:]
    if isinstance(head, int):
        return "items" not in schema or _free_below(schema["items"], rest)
    props = schema.get("properties")
    if props is None or head not in props:
        return True
    return _free_below(props[head], rest)


@schemathesis.hook
def filter_failure(context: Any, failure: Any, case: Any, response: Any) -> bool:
    """Keep every failure but one kind: a valid request refused for a body-wide rule (above)
    that a value broke where the document leaves the body free — under a key no schema names
    (stock clients send fields we do not read), or inside a free-form object (metadata).
    JSON schema cannot say "no integer past 64 bits anywhere below"; a value at a declared
    place is the document's to describe, and its failure is kept."""
    if getattr(failure, "code", "") != "ST202" or response.status_code != 400:
        return True
    try:
        message = json.loads(response.text)["message"]
    except (ValueError, KeyError, TypeError):
        return True
    paths = _offending(case.body) if isinstance(case.body, (dict, list)) else []
    if not (_BODY_WIDE.search(message) and paths):
        return True
    schema = _body_schema(case)
    return not all(_free_below(schema, p) for p in paths)
