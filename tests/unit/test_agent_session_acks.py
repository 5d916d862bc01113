"""The master's side of an agent connection acknowledges each handled frame with an id, and
closes the session instead where handling failed (the agent then sends the frame again)."""

from __future__ import annotations

import json
import types
from typing import Any

from det_agent import wire
from det_jupyter.server_ext.cluster import AgentSession

HELLO = wire.Hello("a1", "", (wire.Slot(0, "cpu", "cpu"),), (), "0.1.0", "10.0.0.7")


class FlakyRM:
    """An agent RM whose ``handle`` fails for frames of allocation ``"bad"``."""

    def __init__(self) -> None:
        self.handled: list[wire.AgentFrame] = []
        self.gone = 0

    def hello(self, agent_id: str, hello: wire.Hello, send: Any) -> None:
        return None

    def handle(self, agent_id: str, frame: wire.AgentFrame) -> None:
        if getattr(frame, "allocation_id", None) == "bad":
            raise OSError("database is locked")
        self.handled.append(frame)

    def disconnected(self, agent_id: str) -> None:
        self.gone += 1


def _session() -> tuple[AgentSession, FlakyRM, list[dict], list[str]]:
    rm = FlakyRM()
    master = types.SimpleNamespace(rm=rm, master_id="m", cluster_id="c")
    sent: list[dict] = []
    closed: list[str] = []
    session = AgentSession(master, "a1", lambda text: sent.append(json.loads(text)), close=closed.append)
    session.on_message(json.dumps(HELLO.to_wire()))
    return session, rm, sent, closed


def test_each_handled_frame_with_an_id_is_acknowledged() -> None:
    session, rm, sent, closed = _session()
    session.on_message(json.dumps({"type": "logs", "id": 1, "allocation_id": "x", "lines": []}))
    session.on_message(json.dumps({"type": "slot_stats", "slots": []}))  # no id: no ack
    session.on_message(json.dumps(wire.TaskExited("x", 0, None, id=2).to_wire()))
    assert [f for f in sent if f["type"] == "ack"] == [{"type": "ack", "id": 1}, {"type": "ack", "id": 2}]
    assert len(rm.handled) == 3 and closed == []


def test_a_frame_that_failed_is_not_acknowledged_and_the_session_closes() -> None:
    session, rm, sent, closed = _session()
    session.on_message(json.dumps({"type": "logs", "id": 1, "allocation_id": "x", "lines": []}))
    session.on_message(json.dumps({"type": "logs", "id": 2, "allocation_id": "bad", "lines": []}))
    session.on_message(json.dumps({"type": "logs", "id": 3, "allocation_id": "x", "lines": []}))
    assert [f["id"] for f in sent if f["type"] == "ack"] == [1], "acks are cumulative: none after 2"
    assert len(closed) == 1 and [getattr(m, "id", None) for m in rm.handled] == [1]


def test_a_bad_frame_is_dropped_and_acknowledged_and_a_bad_hello_refused() -> None:
    session, rm, sent, closed = _session()
    session.on_message(json.dumps({"type": "logs", "id": 1, "allocation_id": "x", "lines": [{"seq": "0"}]}))
    assert [f for f in sent if f["type"] == "ack"] == [{"type": "ack", "id": 1}]
    assert rm.handled == [] and closed == []
    refused: list[dict] = []
    AgentSession(types.SimpleNamespace(rm=rm, master_id="m", cluster_id="c"), "a2",
                 lambda text: refused.append(json.loads(text)), close=closed.append
                 ).on_message(json.dumps({"type": "hello", "agent_id": "a2", "slots": "two"}))
    assert refused[0] == {"type": "welcome", "master_id": "m", "cluster_id": "c"}
    assert refused[1]["type"] == "refused" and "slots must be a list" in refused[1]["message"]
    assert len(closed) == 1
