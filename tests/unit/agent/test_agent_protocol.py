"""The master URL → websocket URL rule and the bounded outbox (the frames: test_wire.py)."""

from __future__ import annotations

import pytest

from det_agent import _protocol as proto
from det_agent._outbox import Outbox
from det_agent.wire import Logs, TaskExited


@pytest.mark.parametrize(
    ("master", "url"),
    [
        ("http://127.0.0.1:8080", "ws://127.0.0.1:8080/agents?id=a1"),
        ("https://m.example:443/", "wss://m.example:443/agents?id=a1"),
        ("http://h:8888/jupyter/", "ws://h:8888/jupyter/agents?id=a1"),
    ],
)
def test_agents_url(master: str, url: str) -> None:
    assert proto.agents_url(master, "a1") == url


def test_agent_id_is_escaped() -> None:
    assert proto.agents_url("http://h:1", "a b&c").endswith("/agents?id=a+b%26c")


@pytest.mark.parametrize("master", ["127.0.0.1:8080", "ftp://h", "http://"])
def test_bad_master_urls(master: str) -> None:
    with pytest.raises(ValueError, match="master URL"):
        proto.agents_url(master, "a1")


def _drain(box: Outbox) -> list[dict]:
    """Send everything (each frame acknowledged at once), oldest first."""
    order = []
    while (f := box.peek()) is not None:
        order.append(f)
        box.sent(f)
        box.ack(f["id"])
    return order


def test_outbox_is_fifo_and_drops_logs_first() -> None:
    box = Outbox(max_frames=3)
    started = {"type": "task_started"}
    logs1, logs2 = {"type": "logs", "n": 1}, {"type": "logs", "n": 2}
    exited = {"type": "task_exited"}
    for f in (started, logs1, logs2, exited):
        box.put(f)
    assert box.dropped == 1
    assert _drain(box) == [started, logs2, exited]
    assert [f["id"] for f in (started, logs2, exited)] == [1, 3, 4]


def test_outbox_drops_oldest_when_no_logs_left() -> None:
    box = Outbox(max_frames=1)
    box.put({"type": "task_started"})
    box.put({"type": "task_exited"})
    assert box.peek() == {"type": "task_exited", "id": 2}


def test_sent_ignores_a_frame_that_is_not_next() -> None:
    box = Outbox()
    a, b = {"type": "logs"}, {"type": "logs"}
    box.put(a)
    box.put(b)
    box.sent(b)
    assert box.peek() is a


def test_sent_frames_stay_until_acknowledged_and_go_out_again_after_a_rewind() -> None:
    box = Outbox()
    frames = [{"type": "logs", "n": i} for i in range(4)]
    for f in frames:
        box.put(f)
    for f in frames[:3]:  # three written into a socket whose master then died
        assert box.peek() is f
        box.sent(f)
    box.ack(frames[0]["id"])  # it had stored only the first
    assert len(box) == 3 and box.peek() is frames[3]
    box.rewind()  # the next session
    assert _drain(box) == frames[1:]
    assert len(box) == 0


def test_ack_is_cumulative_and_ignores_old_ids() -> None:
    box = Outbox()
    frames = [{"type": "logs"} for _ in range(3)]
    for f in frames:
        box.put(f)
        box.sent(f)
    box.ack(2)
    assert len(box) == 1
    box.ack(1)  # a late ack changes nothing
    assert len(box) == 1
    box.put({"type": "logs"})
    assert box.peek()["id"] == 4  # the unsent one, after the sent one still unacknowledged


def test_a_dropped_sent_frame_keeps_the_send_position() -> None:
    box = Outbox(max_frames=2)
    a, b, c = {"type": "logs"}, {"type": "task_started"}, {"type": "task_exited"}
    box.put(a)
    box.put(b)
    box.sent(a)
    box.put(c)  # full: the oldest logs frame (a, sent) goes
    assert box.peek() is b


def test_unacknowledged_exits_are_listed() -> None:
    box = Outbox()
    box.put(TaskExited("1.a.1", 0, None).to_wire())
    box.put(Logs("1.b.1", ()).to_wire())
    box.put(TaskExited("1.b.1", 137, None).to_wire())
    box.sent(box.peek())
    box.ack(1)
    assert box.unacknowledged_exits() == ["1.b.1"]
