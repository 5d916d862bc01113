"""The agent: one websocket to the master, tasks run by a Runtime, frames kept across outages."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.websocket import WebSocketClientConnection, WebSocketClosedError, websocket_connect

from . import _protocol as proto
from . import wire
from ._address import detect_address, validate_address
from ._devices import Slot
from ._link import LocalLink
from ._outbox import Outbox
from ._stats import GpuStatsSampler, sampler_for
from ._version import __version__
from .runtime import (
    DockerRuntime,
    LogLine,
    MixedRuntime,
    ProcessRuntime,
    Runtime,
    docker_probe,
    refuse_container,
)

log = logging.getLogger(__name__)

#: Reconnect backoff: starts here and doubles up to MAX_BACKOFF (seconds).
INITIAL_BACKOFF = 0.5
MAX_BACKOFF = 5.0
#: Websocket pings keep NAT/proxies open and detect a dead master (seconds).
PING_INTERVAL = 10.0
PING_TIMEOUT = 30.0
CONNECT_TIMEOUT = 10.0
#: How long stop() waits for the master to acknowledge the last frames (seconds).
STOP_FLUSH_TIMEOUT = 5.0
#: Default bound of a planned stop (drain): how long preempted tasks get to checkpoint and
#: exit before they are killed (seconds).
DRAIN_TIMEOUT = 60.0
#: Default period of ``slot_stats`` frames (seconds).
STATS_INTERVAL = 10.0
#: ``runtime_mode`` values: Docker when the engine answers; Docker required; processes only.
RUNTIME_MODES = ("auto", "docker", "process")
#: ``hello.containers`` of an agent told to run no containers.
PROCESS_ONLY = "the agent runs tasks as processes only (det-agent --runtime process)"

T = TypeVar("T")
Connection = WebSocketClientConnection | LocalLink


class Agent:
    """Connects this host's slots to a det-jupyter master and runs the tasks it assigns.

    ``master_url`` is the master's http(s) URL; ``token`` its agent token. ``runtime`` defaults
    to a :class:`ProcessRuntime` under ``work_dir`` (``warm_start``: see the runtime).
    ``connect`` replaces the websocket with a :class:`LocalLink` (an agent embedded in its
    master's process). While
    the master is unreachable, tasks keep running and outgoing frames wait in a bounded outbox
    that is replayed after the next hello; a frame leaves the outbox only once the master
    acknowledged it, so a batch of log lines written into the socket of a master that then
    died is sent again to its successor.

    :meth:`stop` kills the tasks; :meth:`drain` is a planned stop: the master preempts them
    (a trial checkpoints and is queued again elsewhere, not restarted), then the agent exits.

    ``address`` is what ``hello`` tells the master other containers reach this host at; None
    means the local IP of the route to the master, looked up again at every connect.
    Every ``stats_interval`` seconds (0: never) while connected, the GPU slots' figures go to the
    master in a ``slot_stats`` frame, read by ``stats_sampler`` (default: a
    :class:`GpuStatsSampler` over NVML); an agent without GPU slots sends none. Stats skip the
    outbox: figures from before an outage are stale.

    ``task_user`` and ``hidden_paths`` go to the default :class:`ProcessRuntime`: the account
    tasks of unlinked users run as when the agent is root (None: the runtime's default), and
    files tasks must not see (e.g. the agent's token file).

    ``runtime_mode`` (when no ``runtime`` is given): ``"auto"`` runs tasks whose spec names a
    ``container`` in Docker when the engine (``$DOCKER_HOST``, else the standard socket)
    answers at construction, and only processes otherwise; ``"docker"`` requires the engine
    (ValueError saying why it is unavailable); ``"process"`` never runs containers.
    ``hello.containers`` tells the master which (``"docker"`` or the reason), and a task that
    names an image on an agent without containers fails at once, saying so.
    """

    def __init__(
        self,
        master_url: str,
        token: str,
        *,
        agent_id: str,
        slots: Sequence[Slot],
        work_dir: str,
        resource_pool: str = "",
        runtime: Runtime | None = None,
        warm_start: bool = True,
        connect: Callable[[], LocalLink] | None = None,
        address: str | None = None,
        stats_interval: float = STATS_INTERVAL,
        stats_sampler: GpuStatsSampler | None = None,
        task_user: str | None = None,
        hidden_paths: Sequence[str] = (),
        task_python: str | None = None,
        runtime_mode: str = "auto",
    ) -> None:
        if not token:
            raise ValueError("the agent token is empty; pass the master's agent token")
        if not agent_id:
            raise ValueError("agent_id is empty; give the agent a name unique in the cluster")
        if not 0 <= stats_interval < math.inf:  # also refuses NaN
            raise ValueError(
                f"stats_interval must be a finite number of seconds >= 0, got {stats_interval}"
            )
        if runtime_mode not in RUNTIME_MODES:
            raise ValueError(f"runtime_mode must be one of {', '.join(RUNTIME_MODES)}, got {runtime_mode!r}")
        self._url = proto.agents_url(master_url, agent_id)
        self._master_url = master_url
        self._address = validate_address(address) if address is not None else None
        self._token = token
        self.agent_id = agent_id
        self.slots = list(slots)
        self.resource_pool = resource_pool
        self.runtime: Runtime
        #: What ``hello.containers`` says: "docker", or why image tasks cannot run here.
        self.containers: str
        if runtime is not None:
            self.runtime = runtime
            self.containers = getattr(runtime, "containers", None) or "the agent's runtime runs no containers"
        else:
            self.containers = PROCESS_ONLY if runtime_mode == "process" else docker_probe()
            if runtime_mode == "docker" and self.containers != "docker":
                raise ValueError(f"--runtime docker: {self.containers}; start the Docker engine "
                                 "(or set DOCKER_HOST), or pass --runtime auto or process")
            process = ProcessRuntime(
                work_dir,
                agent_id=agent_id,
                slots=self.slots,
                warm_start=warm_start,
                task_user=task_user,
                hidden_paths=hidden_paths,
                task_python=task_python,
            )
            if self.containers == "docker":
                docker = DockerRuntime(work_dir, agent_id=agent_id, slots=self.slots, task_user=task_user,
                                       on_pulling=self._on_pulling)
                self.runtime = MixedRuntime(process, docker)
                log.info("tasks that name an image run in Docker at %s", docker.host)
            else:
                # A plain ProcessRuntime; _start refuses image tasks with the reason.
                self.runtime = process
                if runtime_mode == "auto":
                    log.info("tasks that name an image cannot run here: %s", self.containers)
        self._local = connect
        self._stats_interval = stats_interval
        self._sampler = sampler_for(self.slots, stats_interval, stats_sampler)
        self._outbox = Outbox()
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._conn: Connection | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._refusal: str | None = None  # the last refusal, logged once
        self._leaving: float | None = None  # the drain's bound once drain() was called
        self._stopped: asyncio.Future[None] | None = None  # stop()'s work, done once
        #: Set while a websocket session (after hello) is up; for tests and status displays.
        self.connected = asyncio.Event()

    async def run(self) -> None:
        """Connect, serve the master and reconnect with backoff until :meth:`stop` is called."""
        if isinstance(self.runtime, MixedRuntime):
            # containers an earlier agent process left are taken up before the first hello
            await self.runtime.prepare(self._on_log, self._on_exit)
        backoff = INITIAL_BACKOFF
        while not self._stopping.is_set():
            conn = await self._until_stopped(self._connect())
            if conn is not None:
                backoff = INITIAL_BACKOFF
                await self._session(conn)
                if self._stopping.is_set():
                    break
                log.warning("lost the connection to the master; reconnecting")
            await self._until_stopped(asyncio.sleep(backoff))
            backoff = min(backoff * 2, MAX_BACKOFF)

    async def stop(self) -> None:
        """Kill every task, deliver their exits if the master is reachable, and disconnect.

        Calling it again (or while :meth:`drain` is stopping) waits for the first call."""
        if self._stopped is None:
            self._stopped = asyncio.ensure_future(self._stop())
        await asyncio.shield(self._stopped)

    async def _stop(self) -> None:
        self._stopping.set()
        await self.runtime.shutdown()
        conn = self._conn
        if conn is not None:
            # Until the master acknowledged the last log lines and exits (bounded: it may be
            # gone; what is left is lost with this process).
            loop = asyncio.get_running_loop()
            deadline = loop.time() + STOP_FLUSH_TIMEOUT
            while len(self._outbox) and self._conn is not None and loop.time() < deadline:
                await asyncio.sleep(0.02)
            if len(self._outbox):
                log.warning("stopping with %d frames the master did not acknowledge", len(self._outbox))
            conn.close()
        if self._sampler is not None:
            await asyncio.to_thread(self._sampler.close)

    async def drain(self, timeout_s: float = DRAIN_TIMEOUT) -> None:
        """A planned stop: tell the master this agent is leaving, so that it places nothing
        more here and preempts what runs (a trial checkpoints, acks and exits; it is queued
        again elsewhere without using a restart); wait up to ``timeout_s`` seconds for the
        tasks to exit, kill what is left, then :meth:`stop`.

        Without a connection to the master no task can learn it is preempted: they are killed
        at once. :meth:`stop` meanwhile (e.g. a second signal) ends the wait."""
        if not 0 <= timeout_s < math.inf:
            raise ValueError(f"timeout_s must be a finite number of seconds >= 0, got {timeout_s}")
        if self._stopping.is_set() or self._leaving is not None:
            return await self.stop()
        self._leaving = timeout_s
        conn = self._conn
        if conn is not None:
            running = self.runtime.running()
            log.info("leaving: the master preempts %d task(s); waiting up to %g s for them",
                     len(running), timeout_s)
            try:
                await conn.write_message(proto.encode(wire.Leaving(timeout_s).to_wire()))
            except WebSocketClosedError:
                pass  # sent again after the next hello
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout_s
            while self.runtime.running() and not self._stopping.is_set() and loop.time() < deadline:
                await asyncio.sleep(0.1)
            left = self.runtime.running()
            if left and not self._stopping.is_set():
                log.warning("%d task(s) did not exit within %g s; killing them: %s",
                            len(left), timeout_s, ", ".join(left))
        await self.stop()

    # -- connection -----------------------------------------------------------------------

    async def _until_stopped(self, aw: Awaitable[T]) -> T | None:
        """Await ``aw`` unless stop() is called first (then cancel it and return None)."""
        work = asyncio.ensure_future(aw)
        stopped = asyncio.create_task(self._stopping.wait())
        await asyncio.wait({work, stopped}, return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if not work.done():
            work.cancel()
            await asyncio.gather(work, return_exceptions=True)
            return None
        return work.result()

    async def _connect(self) -> Connection | None:
        if self._local is not None:
            return self._local()
        request = HTTPRequest(
            self._url,
            headers={"Authorization": f"Bearer {self._token}"},
            connect_timeout=CONNECT_TIMEOUT,
            request_timeout=CONNECT_TIMEOUT,
        )
        try:
            return await websocket_connect(
                request,
                ping_interval=PING_INTERVAL,
                ping_timeout=PING_TIMEOUT,
                max_message_size=64 * 1024 * 1024,
            )
        except HTTPClientError as e:
            if e.code == 401:
                log.error(
                    "the master at %s refused the agent token (401); pass the master's agent "
                    "token with --token-file or DET_AGENT_TOKEN_FILE",
                    self._url,
                )
            elif e.code == 409:
                log.error(
                    "the master already has an agent %r connected (409); give this agent a "
                    "unique --id, or wait for the old connection to go away",
                    self.agent_id,
                )
            else:
                log.warning("connecting to the master at %s failed: %s", self._url, e)
        except (OSError, asyncio.TimeoutError, WebSocketClosedError) as e:
            log.warning("cannot reach the master at %s: %s", self._url, e)
        return None

    async def _own_address(self) -> str:
        if self._address is not None:
            return self._address
        try:
            # May resolve the master's host name: off the event loop.
            return await asyncio.to_thread(detect_address, self._master_url)
        except OSError as e:
            fallback = socket.gethostname()
            log.warning(
                "cannot tell which local address reaches the master (%s); reporting %r — pass "
                "--address if other hosts cannot reach this one by that name",
                e,
                fallback,
            )
            return fallback

    async def _session(self, conn: Connection) -> None:
        helpers: list[asyncio.Task[None]] = []
        try:
            address = await self._own_address()
            # Tasks whose exit the master has not acknowledged count as running: it waits for
            # that exit (sent again below) instead of failing them as lost with a restart.
            running = dict.fromkeys([*self.runtime.running(), *self._outbox.unacknowledged_exits()])
            hello = wire.Hello(
                self.agent_id,
                self.resource_pool,
                tuple(self.slots),
                tuple(running),
                __version__,
                address,
                self.containers,
            )
            await conn.write_message(proto.encode(hello.to_wire()))
            if self._leaving is not None:
                await conn.write_message(proto.encode(wire.Leaving(self._leaving).to_wire()))
            self._outbox.rewind()  # what the last master did not acknowledge goes out again
            self._conn = conn
            self.connected.set()
            log.info("connected to the master at %s as %r", self._url, self.agent_id)
            helpers.append(asyncio.create_task(self._send_loop(conn)))
            if self._sampler is not None:
                helpers.append(asyncio.create_task(self._stats_loop(conn, self._sampler)))
            while True:
                message = await conn.read_message()
                if message is None:
                    break
                if isinstance(message, str):
                    self._handle(message)
        except WebSocketClosedError:
            pass
        finally:
            self._conn = None
            self.connected.clear()
            for helper in helpers:
                helper.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            conn.close()

    async def _send_loop(self, conn: Connection) -> None:
        try:
            while True:
                frame = self._outbox.peek()
                if frame is None:
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                await conn.write_message(proto.encode(frame))
                # Kept until the master acknowledges it: a frame in flight when the link drops
                # is sent again after the reconnect (the master drops duplicate log seqs).
                self._outbox.sent(frame)
        except WebSocketClosedError:
            conn.close()  # make the reader see the end too

    async def _stats_loop(self, conn: Connection, sampler: GpuStatsSampler) -> None:
        """Sample now and every interval; write straight to ``conn``, bypassing the outbox, so
        that nothing from this session is sent after a reconnect."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                stats = await loop.run_in_executor(None, sampler.sample)
                if stats:
                    await conn.write_message(proto.encode(wire.SlotStatsReport(tuple(stats)).to_wire()))
            except WebSocketClosedError:
                return  # the session is ending; the reader sees it too
            except Exception:  # a broken sample must not end the session; try again later
                log.exception("sampling GPU stats failed")
            await asyncio.sleep(self._stats_interval)

    def _send(self, frame: dict[str, Any]) -> None:
        self._outbox.put(frame)
        self._wake.set()

    # -- master → agent -------------------------------------------------------------------

    def _handle(self, message: str) -> None:
        try:
            raw = json.loads(message)
        except ValueError:
            log.warning("ignoring a malformed frame from the master: %.200s", message)
            return
        try:
            frame = wire.parse_master_frame(raw)
        except ValueError as e:
            self._bad_frame(raw, e)
            return
        if isinstance(frame, wire.Ack):
            self._outbox.ack(frame.id)
        elif isinstance(frame, wire.Welcome):
            log.info("master %s (cluster %s) welcomed us", frame.master_id, frame.cluster_id)
        elif isinstance(frame, wire.StartTask):
            self._spawn(self._start(frame.spec))
        elif isinstance(frame, wire.Refused):
            # The master turns this agent away (e.g. an unknown --resource-pool) and hangs up;
            # the agent keeps retrying, so the admin can fix the master's side without a restart.
            reason = frame.message or "no reason given"
            level = logging.DEBUG if reason == self._refusal else logging.ERROR
            log.log(level, "the master refused this agent: %s", reason)
            self._refusal = reason
        elif isinstance(frame, wire.KillTask):
            log.info("the master asked to kill %s", frame.allocation_id)
            self._spawn(self.runtime.kill(frame.allocation_id))

    def _bad_frame(self, raw: Any, error: ValueError) -> None:
        """A frame that is not one of the protocol's: ignored, except that a ``start_task``
        whose spec names its allocation ends that allocation as a launch failure (the master
        would otherwise wait for it)."""
        if not isinstance(raw, dict) or raw.get("type") not in wire.MASTER_FRAMES:
            log.debug("ignoring a frame from the master: %s", error)
            return
        log.warning("ignoring a bad frame from the master: %s", error)
        spec = raw.get("spec")
        if raw["type"] == wire.StartTask.TYPE and isinstance(spec, dict):
            allocation_id = spec.get("allocation_id")
            if isinstance(allocation_id, str) and allocation_id and allocation_id not in self.runtime.running():
                self._on_exit(allocation_id, 1, f"invalid task spec: {error}")

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _start(self, spec: wire.TaskSpec) -> None:
        allocation_id = spec.allocation_id
        if self._leaving is not None or self._stopping.is_set():
            # Sent before the master saw that this agent leaves: it ends as a preemption.
            self._on_exit(allocation_id, 1, "the agent is stopping; the task was not started")
            return
        if spec.container is not None and self.containers != "docker":
            # The master should not send it (hello said so); end it at once, saying why.
            refuse_container(allocation_id, spec.container.image, self.containers,
                             self._on_log, self._on_exit)
            return
        try:
            pid = await self.runtime.start(spec.to_wire(), self._on_log, self._on_exit)
        except ValueError as e:
            # A repeated start_task (e.g. resent around a reconnect) for a running allocation.
            log.warning("ignoring start_task for %s: %s", allocation_id, e)
            return
        if pid is not None:
            self._send(wire.TaskStarted(allocation_id, pid).to_wire())

    # -- runtime callbacks ----------------------------------------------------------------

    def _on_pulling(self, allocation_id: str, image: str) -> None:
        self._send(wire.TaskPulling(allocation_id, image).to_wire())

    def _on_log(self, allocation_id: str, lines: list[LogLine]) -> None:
        self._send(wire.Logs(allocation_id, tuple(lines)).to_wire())

    def _on_exit(self, allocation_id: str, exit_code: int, reason: str | None) -> None:
        self._send(wire.TaskExited(allocation_id, exit_code, reason).to_wire())
