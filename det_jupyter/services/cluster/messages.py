"""The cluster-wide message (``det master cluster-message``), as Determined 0.38.1 keeps it:
one message at a time; setting one ends the one before; ``GET /api/v1/master`` shows it to
everyone while it is active (started, not ended)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import sqlalchemy as sa

from ...errors import InvalidRequest
from ...store import cluster_messages as rows
from ...store import reader
from ..common.clock import Clock

#: Characters a message may hold (0.38.1's ClusterMessageMaxLength).
MAX_LENGTH = 250
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


@dataclass(frozen=True)
class ClusterMessage:
    message: str
    start_time: float
    end_time: float | None
    created_time: float

    def active(self, now: float) -> bool:
        return self.start_time < now and (self.end_time is None or self.end_time > now)


def parse_duration(text: str) -> float:
    """A Go duration ("90m", "1h30m", "2.5h") in seconds; InvalidRequest naming the forms
    accepted otherwise."""
    body = text.strip()
    total, pos = 0.0, 0
    while pos < len(body):
        m = _PART.match(body, pos)
        if m is None:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if not body or pos != len(body):
        raise InvalidRequest(f"duration {text[:40]!r} is not a duration: use a number with a unit "
                             "of h, m, s, ms, us or ns, e.g. 24h or 1h30m")
    return total


class ClusterMessages:
    """The master process is the only writer of the messages, so the newest one is read from
    the database once and kept: ``GET /api/v1/master`` (public, asked before every CLI
    command) costs no query."""

    def __init__(self, engine: sa.Engine, clock: Clock) -> None:
        self._engine = engine
        self._reader = reader(engine)
        self._clock = clock
        self._newest: ClusterMessage | None = None
        self._loaded = False

    def current(self) -> ClusterMessage | None:
        """The newest message unless it has ended (it may not have started yet)."""
        if not self._loaded:
            with self._reader.connect() as conn:
                row = rows.newest(conn)
            if row is not None:
                self._newest = ClusterMessage(row.message, row.start_time, row.end_time, row.created_time)
            self._loaded = True
        msg = self._newest
        if msg is None or (msg.end_time is not None and msg.end_time <= self._clock.now()):
            return None
        return msg

    def active(self) -> ClusterMessage | None:
        """The message users are shown now, if any."""
        msg = self.current()
        return msg if msg is not None and msg.active(self._clock.now()) else None

    def set(self, user_id: int, message: str, *, start_time: float | None, end_time: float | None,
            duration: str | None) -> None:
        """Set the message, ending the one before. ``start_time`` None: from now (0.38.1 takes
        a missing start as long ago); ``end_time`` and ``duration`` exclude each other."""
        if len(message) > MAX_LENGTH:
            raise InvalidRequest(f"message must be at most {MAX_LENGTH} characters; got {len(message)}")
        if end_time is not None and duration is not None:
            raise InvalidRequest("endTime and duration are mutually exclusive: give one")
        now = self._clock.now()
        start = now if start_time is None else start_time
        if duration is not None:
            end_time = start + parse_duration(duration)
        if end_time is not None and end_time < start:
            raise InvalidRequest("end time must be after start time")
        if end_time is not None and end_time < now:
            raise InvalidRequest("end time must be after the current time")
        with self._engine.begin() as conn:
            rows.end_current(conn, now)
            rows.insert(conn, message=message, start_time=start, end_time=end_time, created_by=user_id,
                        created_time=now)
        self._newest, self._loaded = ClusterMessage(message, start, end_time, now), True

    def clear(self) -> None:
        now = self._clock.now()
        with self._engine.begin() as conn:
            rows.end_current(conn, now)
        self._newest, self._loaded = None, True  # every message has ended by now
