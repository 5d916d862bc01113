"""The clock services read; tests pass a FakeClock instead of patching time."""

from __future__ import annotations

import time


class Clock:
    """Wall-clock time in float seconds since the epoch."""

    def now(self) -> float:
        return time.time()


class FakeClock(Clock):
    """A clock that only moves when told to."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds
