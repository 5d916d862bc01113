"""The runtime seam: how the agent starts, watches and kills tasks.

The agent only talks to :class:`Runtime`; the process runtime is the first implementation and a
Docker runtime can be added beside it without touching the connection code.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

from ..wire import LogLine

#: ``on_log(allocation_id, lines)``: a batch of lines, in order, seq contiguous per allocation.
OnLog = Callable[[str, "list[LogLine]"], None]
#: ``on_exit(allocation_id, exit_code, reason)``: called once, after the task's last on_log.
OnExit = Callable[[str, int, "str | None"], None]


class Runtime(abc.ABC):
    """Runs TaskSpecs (see docs/internals.md) as tasks on this host.

    Callbacks are plain functions called on the event loop thread; they must not block. For one
    allocation, every ``on_log`` call happens before its single ``on_exit`` call.
    """

    @abc.abstractmethod
    async def start(self, spec: dict[str, Any], on_log: OnLog, on_exit: OnExit) -> int | None:
        """Prepare and launch the task described by ``spec``.

        Returns the pid of the spawned process once it runs; no callback for this allocation
        has been called by then. When the launch fails (context download, exec), it reports
        the cause through ``on_log`` (a stderr line) and ``on_exit`` before returning None.
        An invalid spec is such a launch failure too. Raises ValueError only when the
        allocation id is already running here (the master resent a start_task).
        """

    @abc.abstractmethod
    async def kill(self, allocation_id: str) -> None:
        """Stop the task's whole process tree; ``on_exit`` follows. The process runtime
        SIGKILLs it at once (137); the Docker runtime sends SIGTERM and SIGKILLs after a grace.

        Killing an allocation that is still preparing stops it before it spawns; killing an
        unknown or finished allocation does nothing.
        """

    @abc.abstractmethod
    def running(self) -> list[str]:
        """Allocation ids started and not yet reported through ``on_exit``."""

    @abc.abstractmethod
    async def shutdown(self) -> None:
        """Kill every task and return once each has been reported through ``on_exit``."""
