"""Helpers for the agent's integration tests (imported by name; conftest sets sys.path)."""

from __future__ import annotations

import asyncio
import os
import time

from det_agent.runtime._launch import probe_isolation

ISOLATION = probe_isolation() is not None
NO_ISOLATION_REASON = (
    "`unshare --mount --pid --fork --mount-proc true` fails on this host (needs root or "
    "unprivileged user namespaces), so task isolation cannot be tested"
)


class Recorder:
    """Collects a runtime's callbacks for one or more allocations; ``timeout``: how long the
    waits wait by default (seconds)."""

    def __init__(self, timeout: float = 10.0) -> None:
        self.timeout = timeout
        self.lines: dict[str, list] = {}
        self.exits: dict[str, tuple[int, str | None]] = {}
        self.events: list[tuple[str, str]] = []
        self._changed = asyncio.Event()

    def on_log(self, allocation_id: str, lines: list) -> None:
        assert allocation_id not in self.exits, "log after exit"
        self.lines.setdefault(allocation_id, []).extend(lines)
        self.events.append(("log", allocation_id))
        self._changed.set()

    def on_exit(self, allocation_id: str, exit_code: int, reason: str | None) -> None:
        assert allocation_id not in self.exits, "exit reported twice"
        self.exits[allocation_id] = (exit_code, reason)
        self.events.append(("exit", allocation_id))
        self._changed.set()

    def text(self, allocation_id: str, stdtype: str | None = None) -> list[str]:
        return [
            line.log
            for line in self.lines.get(allocation_id, [])
            if stdtype is None or line.stdtype == stdtype
        ]

    async def wait_for(self, predicate, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while not predicate():
            self._changed.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out; lines={self.lines} exits={self.exits}")
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except asyncio.TimeoutError:
                pass

    async def wait_exit(self, allocation_id: str, timeout: float | None = None) -> tuple[int, str | None]:
        await self.wait_for(lambda: allocation_id in self.exits, timeout)
        return self.exits[allocation_id]


def processes_with(marker: str) -> list[int]:
    """Pids (not ours) whose command line contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(entry))
        except OSError:
            pass
    return found


def processes_holding(marker: str) -> list[int]:
    """Pids (not ours) with an open file whose path contains ``marker`` (a warm-started task's
    command line is its launcher's, so it shows itself this way)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            fds = os.listdir(f"/proc/{entry}/fd")
            if any(marker in os.readlink(f"/proc/{entry}/fd/{fd}") for fd in fds):
                found.append(int(entry))
        except OSError:
            pass
    return found


async def wait_gone(marker: str, timeout: float = 2.0, find=processes_with) -> list[int]:
    """Wait until ``find`` sees no process carrying ``marker``; return the survivors (empty when
    all died)."""
    deadline = time.monotonic() + timeout
    while (left := find(marker)) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return left
