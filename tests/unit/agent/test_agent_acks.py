"""The agent keeps each frame until the master acknowledges it, sends it again after a
reconnect, and stops in a planned way (``drain``): ``leaving``, a bounded wait, then kill.

The agent runs against an in-process :class:`LocalLink` (no sockets) and a named fake runtime
whose tasks log and exit when the test says so.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from det_agent import Agent, LocalLink, LogLine, Slot
from det_agent.runtime import Runtime
from det_agent.wire import StartTask, TaskSpec

WAIT = 10.0  # seconds a scenario may wait for a frame before it fails (never a timing check)


class PuppetRuntime(Runtime):
    """Tasks that run until the test makes them log (``say``) or exit (``end``); ``kill``
    ends one with 137, as the process runtime does."""

    def __init__(self) -> None:
        self.tasks: dict[str, tuple[Any, Any]] = {}
        self.seq: dict[str, int] = {}
        self.killed: list[str] = []

    async def start(self, spec: dict[str, Any], on_log: Any, on_exit: Any) -> int | None:
        allocation_id = spec["allocation_id"]
        self.tasks[allocation_id] = (on_log, on_exit)
        self.seq[allocation_id] = 0
        return 4242

    def say(self, allocation_id: str, n: int) -> None:
        first = self.seq[allocation_id]
        self.seq[allocation_id] += n
        self.tasks[allocation_id][0](allocation_id, [
            LogLine(s, "stdout", f"line {s}\n", "2026-01-01T00:00:00+00:00") for s in range(first, first + n)
        ])

    def end(self, allocation_id: str, code: int) -> None:
        _, on_exit = self.tasks.pop(allocation_id)
        on_exit(allocation_id, code, None)

    async def kill(self, allocation_id: str) -> None:
        if allocation_id in self.tasks:
            self.killed.append(allocation_id)
            self.end(allocation_id, 137)

    def running(self) -> list[str]:
        return list(self.tasks)

    async def shutdown(self) -> None:
        for allocation_id in list(self.tasks):
            await self.kill(allocation_id)


class AckingMaster:
    """Plays the master over LocalLinks: records each connection's frames and acknowledges
    those with an id while ``acking`` (else they are "lost with the master")."""

    def __init__(self) -> None:
        self.links: list[LocalLink] = []
        self.frames: list[list[dict[str, Any]]] = []
        self.acking = True
        self.arrived = asyncio.Event()

    def connect(self) -> LocalLink:
        index = len(self.links)
        self.frames.append([])

        def deliver(text: str) -> None:
            frame = json.loads(text)
            self.frames[index].append(frame)
            if self.acking and isinstance(frame.get("id"), int):
                link.push(json.dumps({"type": "ack", "id": frame["id"]}))
            self.arrived.set()

        link = LocalLink(deliver, lambda: None)
        self.links.append(link)
        return link

    def start(self, link: int, allocation_id: str) -> None:
        spec = TaskSpec("t", allocation_id, "COMMAND", "true", {}, (0,), {})
        self.links[link].push(json.dumps(StartTask(spec).to_wire()))

    def of(self, link: int, kind: str) -> list[dict[str, Any]]:
        return [f for f in self.frames[link] if f["type"] == kind] if len(self.frames) > link else []

    async def until(self, check: Callable[[], bool]) -> None:
        async def poll() -> None:
            while not check():
                self.arrived.clear()
                await self.arrived.wait()

        await asyncio.wait_for(poll(), WAIT)


def _agent(master: AckingMaster, runtime: PuppetRuntime) -> Agent:
    return Agent("http://127.0.0.1:1", "token", agent_id="a1", slots=[Slot(0, "cpu", "cpu")],
                 work_dir="/nonexistent", runtime=runtime, connect=master.connect, stats_interval=0)


def _seqs(frames: list[dict[str, Any]]) -> list[int]:
    return [line["seq"] for f in frames for line in f["lines"]]


def test_frames_the_master_did_not_acknowledge_are_sent_again_after_a_reconnect() -> None:
    async def scenario() -> None:
        master, runtime = AckingMaster(), PuppetRuntime()
        agent = _agent(master, runtime)
        run = asyncio.create_task(agent.run())
        try:
            await master.until(lambda: bool(master.of(0, "hello")))
            master.start(0, "t.1")
            master.start(0, "u.1")
            await master.until(lambda: len(master.of(0, "task_started")) == 2)
            runtime.say("t.1", 3)
            await master.until(lambda: _seqs(master.of(0, "logs")) == [0, 1, 2])
            master.acking = False  # the master dies without storing (acknowledging) more
            runtime.say("t.1", 2)
            runtime.end("u.1", 0)
            await master.until(lambda: len(master.of(0, "task_exited")) == 1)
            master.acking = True
            master.links[0].close()
            await master.until(lambda: bool(master.of(1, "task_exited")))
            hello = master.of(1, "hello")[0]
            assert sorted(hello["running"]) == ["t.1", "u.1"], (
                "a task whose exit is not acknowledged is listed: the master waits for the exit"
            )
            assert _seqs(master.of(1, "logs")) == [3, 4], "only what was not acknowledged, again"
            first_ids = [f["id"] for f in master.frames[0] if f["type"] == "logs"][1:]
            assert [f["id"] for f in master.of(1, "logs")] == first_ids, "sent again with their ids"
            assert master.of(1, "task_exited")[0]["allocation_id"] == "u.1"
            assert len(agent._outbox) == 0
        finally:
            await agent.stop()
            await asyncio.wait_for(run, WAIT)

    asyncio.run(scenario())


def test_drain_says_leaving_waits_for_the_tasks_and_refuses_new_ones() -> None:
    async def scenario() -> None:
        master, runtime = AckingMaster(), PuppetRuntime()
        agent = _agent(master, runtime)
        run = asyncio.create_task(agent.run())
        await master.until(lambda: bool(master.of(0, "hello")))
        master.start(0, "t.1")
        await master.until(lambda: bool(master.of(0, "task_started")))
        draining = asyncio.create_task(agent.drain(WAIT * 3))
        await master.until(lambda: bool(master.of(0, "leaving")))
        assert master.of(0, "leaving")[0]["timeout_s"] == WAIT * 3
        master.start(0, "late.1")  # sent before the master saw ``leaving``
        await master.until(lambda: bool(master.of(0, "task_exited")))
        refused = master.of(0, "task_exited")[0]
        assert refused["allocation_id"] == "late.1" and refused["exit_code"] != 0
        assert not draining.done(), "the agent waits for its task to checkpoint and exit"
        runtime.say("t.1", 1)
        runtime.end("t.1", 0)  # it acked its preemption and left
        await asyncio.wait_for(draining, WAIT)
        await asyncio.wait_for(run, WAIT)
        assert runtime.killed == []
        assert [f["allocation_id"] for f in master.of(0, "task_exited")] == ["late.1", "t.1"]
        assert len(agent._outbox) == 0, "every frame acknowledged before the agent left"

    asyncio.run(scenario())


def test_drain_kills_what_is_left_after_its_bound() -> None:
    async def scenario() -> None:
        master, runtime = AckingMaster(), PuppetRuntime()
        agent = _agent(master, runtime)
        run = asyncio.create_task(agent.run())
        await master.until(lambda: bool(master.of(0, "hello")))
        master.start(0, "stubborn.1")
        await master.until(lambda: bool(master.of(0, "task_started")))
        await asyncio.wait_for(agent.drain(0.2), WAIT)
        await asyncio.wait_for(run, WAIT)
        assert runtime.killed == ["stubborn.1"]
        assert master.of(0, "task_exited")[0]["exit_code"] == 137

    asyncio.run(scenario())


def test_drain_without_a_master_kills_at_once_and_stop_ends_a_drain() -> None:
    async def scenario() -> None:
        master, runtime = AckingMaster(), PuppetRuntime()
        agent = _agent(master, runtime)
        run = asyncio.create_task(agent.run())
        await master.until(lambda: bool(master.of(0, "hello")))
        master.start(0, "t.1")
        await master.until(lambda: bool(master.of(0, "task_started")))
        draining = asyncio.create_task(agent.drain(WAIT * 3))
        await master.until(lambda: bool(master.of(0, "leaving")))
        await agent.stop()  # a second signal
        await asyncio.wait_for(draining, WAIT)
        await asyncio.wait_for(run, WAIT)
        assert runtime.killed == ["t.1"]

        lonely = _agent(AckingMaster(), PuppetRuntime())  # never connected
        await asyncio.wait_for(lonely.drain(WAIT * 3), WAIT)

    asyncio.run(scenario())
