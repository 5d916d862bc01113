"""Task logs: stored in order, queried with filters, followed live.

``LogFilter`` is ``det_jupyter.store.logs``'s, named here too: handlers build one for
``LogService.query``."""

from __future__ import annotations

import asyncio
import datetime as dt
import re
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from det_agent.wire import LogLine

from ...store import logs as store
from ...store import reader
from ...store.logs import NO_FILTER, LogFilter
from ..common.clock import Clock


def parse_time(value: Any, default: float) -> float:
    """An ISO-8601 timestamp (or epoch number) as epoch seconds."""
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value:
        try:
            return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    return default


def storable_text(text: str) -> str:
    """What a task printed, as text every store holds: a NUL (which PostgreSQL's text refuses)
    or a lone surrogate (which no UTF-8 store can write) becomes U+FFFD."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


#: What Python's logging writes first with Determined's ``det.LOG_FORMAT`` ("INFO: [pid] name:
#: …"), after the ``[rank=N] `` that ``determined.launch.wrap_rank`` puts in front.
_PREFIX = re.compile(r"(?:\[rank=([0-9]{1,9})\] )?(?:(TRACE|DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL): )?")
_LEVEL_NAMES = {"WARN": "WARNING", "FATAL": "CRITICAL"}


def line_level(text: str, stdtype: str) -> tuple[str, int | None]:
    """A printed line's level and rank: the level its logging prefix names; without one, INFO
    on stdout and ERROR on stderr (a traceback, a crash)."""
    m = _PREFIX.match(text)
    rank = int(m.group(1)) if m and m.group(1) else None
    if m and m.group(2):
        return _LEVEL_NAMES.get(m.group(2), m.group(2)), rank
    return ("ERROR" if stdtype == "stderr" else "INFO"), rank


class LogService:
    def __init__(self, engine: sa.Engine, clock: Clock) -> None:
        self._engine = engine
        self._reader = reader(engine)  # read-only work: no transaction round trips
        self._clock = clock
        self._last_seq: dict[tuple[str, str], int] = {}  # per container: (allocation, agent)
        self._changed = asyncio.Event()

    def new_container(self, allocation_id: str, agent_id: str) -> None:
        """An allocation's container this master is about to start: it has no lines yet, so
        its first batch needs no lookup of the last one stored."""
        self._last_seq[(allocation_id, agent_id)] = -1

    def append_agent_lines(
        self, *, task_id: str, allocation_id: str, trial_id: int | None, agent_id: str, lines: Sequence[LogLine]
    ) -> int:
        """Store a batch from an agent, dropping lines already stored (by ``seq``, which counts
        per container: each agent of a gang numbers its own lines)."""
        key = (allocation_id, agent_id)
        last = self._last_seq.get(key)
        if last is None:
            if not lines:
                return 0
            with self._reader.connect() as conn:
                last = store.last_seq(conn, allocation_id, agent_id)
        now = self._clock.now()
        rows = []
        for line in lines:
            seq = line.seq
            if seq <= last:
                continue
            last = seq
            stdtype = line.stdtype or "stdout"
            text = line.log
            level, rank = line_level(text, stdtype)
            rows.append({
                "task_id": task_id,
                "allocation_id": allocation_id,
                "trial_id": trial_id,
                "agent_id": agent_id,
                "seq": seq,
                "timestamp": parse_time(line.timestamp, now),
                "level": level,
                "stdtype": stdtype,
                "source": "task",
                "rank_id": rank if line.rank_id is None else line.rank_id,
                "log": text,
            })
        self._insert(rows)
        self._last_seq[key] = last  # only once stored: a failed insert is retried whole
        return len(rows)

    def append_system(self, *, task_id: str, allocation_id: str | None, trial_id: int | None, message: str,
                      level: str = "INFO") -> None:
        """A line from the master itself about a task (why it was stopped, restarted, ...)."""
        self._insert([{
            "task_id": task_id, "allocation_id": allocation_id, "trial_id": trial_id, "agent_id": None,
            "seq": None, "timestamp": self._clock.now(), "level": level, "stdtype": None,
            "source": "master", "rank_id": None, "log": message + "\n",
        }])

    def append_shipped(self, task_id: str, allocation_id: str | None, trial_id: int | None, logs: list[dict]) -> None:
        """Lines sent by a task's own shipper (``POST /api/v1/task/logs``)."""
        now = self._clock.now()
        self._insert([{
            "task_id": task_id, "allocation_id": allocation_id, "trial_id": trial_id,
            "agent_id": entry.get("agentId") or entry.get("agent_id"), "seq": None,
            "timestamp": parse_time(entry.get("timestamp"), now),
            "level": (entry.get("level") or "LOG_LEVEL_INFO").replace("LOG_LEVEL_", ""),
            "stdtype": entry.get("stdtype"), "source": entry.get("source") or "task",
            "rank_id": entry.get("rankId", entry.get("rank_id")), "log": str(entry.get("log", "")),
        } for entry in logs if isinstance(entry, dict)])

    def _insert(self, rows: list[dict]) -> None:
        if not rows:
            return
        for row in rows:
            row["log"] = storable_text(row["log"])
        with self._engine.begin() as conn:
            store.insert(conn, rows)
        self._changed.set()
        self._changed = asyncio.Event()

    def query(
        self, *, trial_id: int | None = None, task_id: str | None = None, after_id: int = 0,
        limit: int | None = None, descending: bool = False, where: LogFilter = NO_FILTER,
    ) -> list[sa.Row]:
        """Stored lines in order (``descending``: newest first), ``where`` they match; at most
        ``limit`` of them (0 or None: all)."""
        with self._reader.connect() as conn:
            return store.query(conn, trial_id=trial_id, task_id=task_id, after_id=after_id, limit=limit,
                               descending=descending, where=where)

    async def wait_for_more(self, timeout: float) -> None:
        """Return when new lines were stored, or after ``timeout`` seconds."""
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except asyncio.TimeoutError:
            pass
