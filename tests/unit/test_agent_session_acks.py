"""The master's side of an agent connection acknowledges each handled frame with an id, and
closes the session instead where handling failed (the agent then sends the frame again)."""

from __future__ import annotations

import json
import types
from typing import Any

from det_jupyter.server_ext._cluster import AgentSession


class FlakyRM:
    """An agent RM whose ``handle`` fails for frames marked ``"fail": true``."""

    def __init__(self) -> None:
        self.handled: list[dict[str, Any]] = []
        self.gone = 0

    def hello(self, agent_id: str, msg: dict, send: Any) -> None:
        return None

    def handle(self, agent_id: str, msg: dict) -> None:
        if msg.get("fail"):
            raise OSError("database is locked")
        self.handled.append(msg)

    def disconnected(self, agent_id: str) -> None:
        self.gone += 1


def _session() -> tuple[AgentSession, FlakyRM, list[dict], list[str]]:
    rm = FlakyRM()
    master = types.SimpleNamespace(rm=rm, master_id="m", cluster_id="c")
    sent: list[dict] = []
    closed: list[str] = []
    session = AgentSession(master, "a1", lambda text: sent.append(json.loads(text)), close=closed.append)
    session.on_message(json.dumps({"type": "hello"}))
    return session, rm, sent, closed


def test_each_handled_frame_with_an_id_is_acknowledged() -> None:
    session, rm, sent, closed = _session()
    session.on_message(json.dumps({"type": "logs", "id": 1, "allocation_id": "x", "lines": []}))
    session.on_message(json.dumps({"type": "slot_stats", "slots": []}))  # no id: no ack
    session.on_message(json.dumps({"type": "task_exited", "id": 2, "allocation_id": "x"}))
    assert [f for f in sent if f["type"] == "ack"] == [{"type": "ack", "id": 1}, {"type": "ack", "id": 2}]
    assert len(rm.handled) == 3 and closed == []


def test_a_frame_that_failed_is_not_acknowledged_and_the_session_closes() -> None:
    session, rm, sent, closed = _session()
    session.on_message(json.dumps({"type": "logs", "id": 1, "allocation_id": "x", "lines": []}))
    session.on_message(json.dumps({"type": "logs", "id": 2, "allocation_id": "x", "fail": True}))
    session.on_message(json.dumps({"type": "logs", "id": 3, "allocation_id": "x", "lines": []}))
    assert [f["id"] for f in sent if f["type"] == "ack"] == [1], "acks are cumulative: none after 2"
    assert len(closed) == 1 and [m["id"] for m in rm.handled] == [1]
