"""LocalLink: the embedded agent's connection behaves like the websocket it replaces."""

from __future__ import annotations

import asyncio

import pytest
from tornado.websocket import WebSocketClosedError

from det_agent import LocalLink


def test_frames_flow_both_ways_and_close_ends_both() -> None:
    async def scenario() -> None:
        got: list[str] = []
        closed: list[bool] = []
        link = LocalLink(got.append, lambda: closed.append(True))
        link.push("welcome")
        await link.write_message("hello")
        assert got == ["hello"] and await link.read_message() == "welcome"
        link.close()
        link.close()
        assert closed == [True], "the master hears of the close once"
        assert await link.read_message() is None
        with pytest.raises(WebSocketClosedError):
            await link.write_message("late")
        with pytest.raises(WebSocketClosedError):
            link.push("late")

    asyncio.run(scenario())
