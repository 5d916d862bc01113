"""The filters of ``GET /api/v1/trials/{id}/logs`` and ``GET /api/v1/tasks/{id}/logs``, as the
stock 0.38.1 client sends them (``det trial logs --level WARNING --rank 1 …``): declared once
for both routes, read into ``services.logs.LogFilter``."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidRequest
from ..services.allocation.logs import LogFilter, parse_time
from ._api import ORDER_BY, Q
from ._wire import LOG_LEVELS

#: The longest search text.
MAX_SEARCH = 1024

QUERY = [
    Q("follow", "boolean"), Q("limit", "integer", minimum=0), Q("orderBy", enum=ORDER_BY),
    Q("levels", many=True, enum=LOG_LEVELS, max_items=len(LOG_LEVELS)),
    Q("rankIds", "integer", many=True, minimum=0, maximum=2**31 - 1, max_items=100),
    Q("agentIds", many=True, max_length=64, max_items=10),
    Q("containerIds", many=True, max_length=64, max_items=10),
    Q("allocationIds", many=True, max_length=64, max_items=10),
    Q("stdtypes", many=True, max_length=16, max_items=4), Q("sources", many=True, max_length=32, max_items=4),
    Q("searchText", max_length=MAX_SEARCH), Q("enableRegex", "boolean"),
    Q("timestampBefore", max_length=64, description="RFC 3339"),
    Q("timestampAfter", max_length=64, description="RFC 3339"),
]


def _time(handler: Any, name: str) -> float | None:
    raw = handler.get_query_argument(name, "")
    if not raw:
        return None
    value = parse_time(raw, float("nan"))
    if value != value:  # NaN: not a time
        raise InvalidRequest(f"query parameter {name} must be an RFC 3339 time "
                             f"(2026-11-28T10:00:00Z), not {raw[:64]!r}")
    return value


def log_filter(handler: Any) -> LogFilter:
    """The request's filters (each already checked against ``QUERY``)."""
    args = handler.get_query_arguments
    levels = [lv.removeprefix("LOG_LEVEL_") for lv in args("levels") if lv != "LOG_LEVEL_UNSPECIFIED"]
    if handler.bool_arg("enableRegex"):
        # A user's regular expression can take the master exponential time (Python's re has no
        # time limit): searchText matches a substring, which the stock CLI and SDK send.
        raise InvalidRequest("enableRegex is not supported: searchText matches a substring; "
                             "leave enableRegex out")
    text = handler.get_query_argument("searchText", "") or None
    return LogFilter(
        levels=tuple(levels), rank_ids=tuple(int(v) for v in args("rankIds")),
        agent_ids=tuple(args("agentIds")), allocation_ids=tuple(args("allocationIds") + args("containerIds")),
        stdtypes=tuple(args("stdtypes")), sources=tuple(args("sources")), search_text=text,
        after=_time(handler, "timestampAfter"), before=_time(handler, "timestampBefore"))
