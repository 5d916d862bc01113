"""The master's own log, kept in memory for ``GET /api/v1/master/logs`` (``det master logs``):
the last ``capacity`` records of the ``det_jupyter`` loggers, numbered from 1 in arrival
order, as 0.38.1 keeps its master's log in a ring."""

from __future__ import annotations

import logging
import sys
import threading
from collections import deque
from dataclasses import dataclass

LEVELS = {logging.DEBUG: "LOG_LEVEL_DEBUG", logging.INFO: "LOG_LEVEL_INFO",
          logging.WARNING: "LOG_LEVEL_WARNING", logging.ERROR: "LOG_LEVEL_ERROR",
          logging.CRITICAL: "LOG_LEVEL_CRITICAL"}


@dataclass(frozen=True)
class MasterLogEntry:
    id: int
    message: str
    time: float  # epoch seconds
    level: str  # LOG_LEVEL_*


def effective_window(offset: int, limit: int, total: int) -> tuple[int, int]:
    """0.38.1's offset and limit: a negative offset counts from the end; limit 0 is no limit.
    Returns (first index, how many; -1 for all)."""
    start = max(total + offset, 0) if offset < 0 else min(offset, total)
    return start, (limit if limit > 0 else -1)


class _Stderr(logging.StreamHandler):
    """What ``logging.lastResort`` does (WARNING and up, the message only, to the current
    stderr), for a logger that had no handler before ours: adding one would silence it."""

    def __init__(self) -> None:
        super().__init__()
        self.setLevel(logging.WARNING)

    @property
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, _value: object) -> None:
        pass


class MasterLogs(logging.Handler):
    def __init__(self, capacity: int = 10_000, level: int = logging.INFO) -> None:
        super().__init__(level)
        self._lines: deque[MasterLogEntry] = deque(maxlen=capacity)
        self._next = 1
        self._guard = threading.Lock()  # records come from any thread
        self._added: list[tuple[logging.Logger, logging.Handler]] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string must not take logging down
            message = str(record.msg)
        level = LEVELS.get(record.levelno, "LOG_LEVEL_INFO")
        with self._guard:
            self._lines.append(MasterLogEntry(self._next, message, record.created, level))
            self._next += 1

    def attach(self, *names: str) -> None:
        """Keep the records of these loggers (and their children) from now on. A logger that
        had no handler anywhere up its hierarchy printed its warnings through Python's last
        resort; it keeps printing them (``_Stderr``)."""
        for name in names:
            logger = logging.getLogger(name)
            if not logger.hasHandlers():
                keep = _Stderr()
                logger.addHandler(keep)
                self._added.append((logger, keep))
            logger.addHandler(self)
            self._added.append((logger, self))

    def detach(self) -> None:
        for logger, handler in self._added:
            logger.removeHandler(handler)
        self._added.clear()

    def __len__(self) -> int:
        return len(self._lines)

    def entries(self, *, offset: int = 0, limit: int = 0) -> list[MasterLogEntry]:
        """The kept entries in the window ``offset``/``limit`` (``effective_window``)."""
        with self._guard:
            lines = list(self._lines)
        start, count = effective_window(offset, limit, len(lines))
        return lines[start:] if count < 0 else lines[start:start + count]

    def after(self, last_id: int) -> list[MasterLogEntry]:
        """Entries newer than ``last_id`` (what a follower has not seen)."""
        with self._guard:
            return [e for e in self._lines if e.id > last_id]
