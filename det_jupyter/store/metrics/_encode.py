"""How a report is spelled in its metric row: its body as strict JSON, its time as the REST
API writes it, its chart level. Pure functions over plain values."""

from __future__ import annotations

import json
import time

from .. import _tables as t
from .._engine import finite_json_values


def lod(ordinal: int) -> int:
    """A report's chart level: the trailing zero bits of its ordinal (see tables.metrics)."""
    return min((ordinal & -ordinal).bit_length() - 1, t.MAX_LOD)


# Built once: json.dumps with options makes a new encoder per call, a third of a body's cost.
_STRICT_JSON = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"))


def body(metrics: dict) -> str:
    """A report as strict JSON, which the databases' JSON functions need: non-finite floats
    are stored as the strings "NaN", "Infinity" and "-Infinity", as Determined's REST API
    spells them."""
    try:
        return _STRICT_JSON.encode(metrics)
    except ValueError:
        return _COMPACT_JSON.encode(finite_json_values(metrics))


_SECONDS: dict[int, str] = {}  # whole seconds as text: a trial's reports share most of them


def time_text(when: float) -> str:
    """A report time as the REST API spells it, to the millisecond (truncated): the
    ``time_text`` of its metric rows."""
    whole = int(when)
    head = _SECONDS.get(whole)
    if head is None:
        if len(_SECONDS) > 10_000:
            _SECONDS.clear()
        head = _SECONDS[whole] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
    return f"{head}.{int((when - whole) * 1000):03d}Z"
