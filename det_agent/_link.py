"""The embedded agent's connection to a master in the same process: the part of a websocket
the agent uses, carried by a queue and a direct call instead of a socket."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from tornado.websocket import WebSocketClosedError


class LocalLink:
    """Frames from the agent go straight to ``deliver`` (the master's handler for this agent);
    frames from the master are ``push``-ed and read by the agent's session loop. ``closed`` is
    called once when the agent closes the link."""

    def __init__(self, deliver: Callable[[str], None], closed: Callable[[], None]) -> None:
        self._deliver = deliver
        self._closed_cb = closed
        self._inbox: asyncio.Queue[str | None] = asyncio.Queue()
        self._closed = False

    def push(self, message: str) -> None:
        """A frame from the master to the agent."""
        if self._closed:
            raise WebSocketClosedError()
        self._inbox.put_nowait(message)

    async def write_message(self, message: str) -> None:
        """A frame from the agent to the master."""
        if self._closed:
            raise WebSocketClosedError()
        self._deliver(message)

    async def read_message(self) -> str | None:
        """The next frame from the master; None once the link is closed."""
        return await self._inbox.get()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._inbox.put_nowait(None)
            self._closed_cb()
