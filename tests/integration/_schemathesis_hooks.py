"""Schemathesis hooks for test_schemathesis: what the document says that JSON schema cannot.

A body field marked ``x-det-echoes: <path parameter>`` repeats the path's value (Determined's
request messages carry the id in the path and the body); a generated *valid* request gets the
path's value there, as every client sends it. Invalid requests are left as generated.
"""

from __future__ import annotations

from typing import Any

import schemathesis


def _body_properties(case: Any) -> dict[str, Any]:
    definition = case.operation.definition
    raw = getattr(definition, "raw", definition)
    try:
        schema = raw["requestBody"]["content"]["application/json"]["schema"]
    except (KeyError, TypeError):
        return {}
    props = schema.get("properties") if isinstance(schema, dict) else None
    return props if isinstance(props, dict) else {}


def _positive(case: Any) -> bool:
    meta = getattr(case, "meta", None)
    mode = getattr(getattr(meta, "generation", None), "mode", None)
    return mode is None or bool(getattr(mode, "is_positive", True))


@schemathesis.hook
def map_case(context: Any, case: Any) -> Any:
    if not isinstance(case.body, dict) or not _positive(case):
        return case
    for key, schema in _body_properties(case).items():
        param = schema.get("x-det-echoes") if isinstance(schema, dict) else None
        if param and case.body.get(key) is not None and param in (case.path_parameters or {}):
            case.body[key] = case.path_parameters[param]
    return case
