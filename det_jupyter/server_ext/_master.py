"""The master about itself: ``/api/v1/master/config``, ``/api/v1/master/logs`` and
``/api/v1/master/cluster_message`` (``det master config show``, ``det master logs``,
``det master cluster-message get|set|clear``)."""

from __future__ import annotations

import asyncio
from typing import Any

from ..errors import InvalidRequest
from ..services.access.authz import Perm
from ..services.allocation.logs import parse_time
from ..services.cluster.master_config import shown_config
from ..services.cluster.master_logs import MasterLogEntry
from ..services.cluster.messages import MAX_LENGTH, ClusterMessage
from . import _serialize as ser
from ._api import MAX_ID, Q, api, obj, string
from ._base import DetHandler

#: How long a follower waits between looks at the log (seconds).
FOLLOW_POLL_S = 0.5


def cluster_message_json(msg: ClusterMessage) -> dict[str, Any]:
    out = {"message": msg.message, "startTime": ser.ts(msg.start_time), "createdTime": ser.ts(msg.created_time)}
    if msg.end_time is not None:
        out["endTime"] = ser.ts(msg.end_time)
    return out


def _entry_json(e: MasterLogEntry) -> dict[str, Any]:
    return {"logEntry": {"id": e.id, "message": e.message, "timestamp": ser.ts(e.time), "level": e.level}}


def _time(body: dict[str, Any], key: str) -> float | None:
    raw = body.get(key)
    if raw is None:
        return None
    value = parse_time(raw, float("nan")) if isinstance(raw, str) else float("nan")
    if value != value:
        raise InvalidRequest(f"request body.{key} must be an RFC 3339 time (2026-11-28T10:00:00Z), "
                             f"not {str(raw)[:64]!r}")
    return value


class MasterConfigHandler(DetHandler):
    """``GET`` the master's settings without secrets. (0.38.1's ``PATCH``, a runtime log level,
    is not served: the log level is a start-up setting here.)"""

    permissions = {"GET": Perm.VIEW_MASTER_CONFIG}

    @api()
    def get(self) -> None:
        self.send({"config": shown_config(self.master.settings)})


class MasterLogsHandler(DetHandler):
    """The master's log as newline-delimited ``{"result": {"logEntry": …}}``; ``follow`` keeps
    the stream open for new lines."""

    permissions = {"GET": Perm.VIEW_MASTER_LOGS}

    @api(query=[Q("offset", "integer", minimum=-MAX_ID), Q("limit", "integer", minimum=0),
                Q("follow", "boolean")])
    async def get(self) -> None:
        logs = self.master.master_logs
        limit = self.int_arg("limit", 0) or 0
        entries = logs.entries(offset=self.int_arg("offset", 0) or 0, limit=limit)
        self.set_header("Content-Type", "application/x-ndjson")
        for e in entries:
            self.write(ser.ndjson(_entry_json(e)))
        await self.flush()
        sent, last = len(entries), (entries[-1].id if entries else 0)
        while self.bool_arg("follow") and not self._gone():
            if limit and sent >= limit:
                break
            fresh = logs.after(last)[: (limit - sent) if limit else None]
            for e in fresh:
                self.write(ser.ndjson(_entry_json(e)))
            if fresh:
                sent, last = sent + len(fresh), fresh[-1].id
                await self.flush()
            await asyncio.sleep(FOLLOW_POLL_S)

    def _gone(self) -> bool:
        """Whether the client went away."""
        stream = getattr(self.request.connection, "stream", None)
        return stream is None or stream.closed()


class ClusterMessageHandler(DetHandler):
    """The cluster-wide message: admins get, set and clear it; ``GET /api/v1/master`` shows it
    to everyone while it is active."""

    permissions = {"GET": Perm.EDIT_MASTER_CONFIG, "PUT": Perm.EDIT_MASTER_CONFIG,
                   "DELETE": Perm.EDIT_MASTER_CONFIG}

    @api()
    def get(self) -> None:
        msg = self.master.cluster_messages.current()
        self.send({"clusterMessage": cluster_message_json(msg)} if msg is not None else {})

    @api(body=obj(("message",), message=string(max_length=MAX_LENGTH * 4), startTime=string(max_length=64),
                  endTime=string(max_length=64), duration=string(max_length=64)), body_required=True)
    def put(self) -> None:
        body = self.body_json()
        duration = body.get("duration")
        self.master.cluster_messages.set(
            self.user.id, body["message"], start_time=_time(body, "startTime"),
            end_time=_time(body, "endTime"), duration=duration if isinstance(duration, str) else None)
        self.send({})

    @api()
    def delete(self) -> None:
        self.master.cluster_messages.clear()
        self.send({})
