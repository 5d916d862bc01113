"""DockerRuntime: tasks whose spec names a ``container`` run in a Docker container.

The task directory, context, info files and environment are prepared as the process runtime
prepares them (``_taskdir``, ``_launch``); the container then gets ``run/`` at /run/determined,
``work/`` at /run/determined/workdir (its working directory) and the harness read-only at
/run/determined/harness, and runs as the task's uid:gid with no capabilities but those asked
for. :func:`container_args` builds the create call (pure); :class:`DockerRuntime` talks to the
engine through the ``docker`` SDK, whose blocking calls run in threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._devices import Slot
from ..wire import LogLine
from ._base import OnExit, OnLog, Runtime
from ._docker_args import (
    HARNESS_MOUNT,
    LABEL_AGENT,
    LABEL_ALLOCATION,
    LABEL_SEQ,
    container_args,
    container_env,
    image_ref,
    start_error_code,
)
from ._docker_streams import api_message, first_line, in_thread, log_frames, progress_lines, pump
from ._isolation import (
    DEFAULT_TASK_USER,
    RUN_MOUNT,
    Identity,
    account_name,
    ensure_account,
    inherited_env,
    resolve_identity,
)
from ._launch import build_env, harness_dir
from ._logs import LogBatcher
from ._process import create_mount_sources
from ._taskdir import (
    ContextCache,
    LaunchError,
    TaskDir,
    fetch_context,
    hand_over,
    make_task_dir,
    snapshot_model_dir,
    write_info_files,
)

log = logging.getLogger(__name__)

DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"
#: Seconds an engine call may take (a pull's stream: between two progress messages).
API_TIMEOUT = 120.0
#: Seconds the availability probe waits for the engine.
PROBE_TIMEOUT = 5.0
SHUTDOWN_TIMEOUT = 10.0
#: Seconds a killed container has between SIGTERM and SIGKILL (``docker stop``'s default).
KILL_GRACE = 10.0
#: Host variables a container does not inherit: PATH and LD_LIBRARY_PATH are the image's, and
#: the NVIDIA runtime would read NVIDIA_* as the GPUs to hand over (the slots decide that).
_HOST_ONLY = ("PATH", "LD_LIBRARY_PATH", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES")


def docker_host(environ: Mapping[str, str] = os.environ) -> str:
    """The engine's address: ``$DOCKER_HOST``, else the standard socket."""
    return environ.get("DOCKER_HOST") or DEFAULT_DOCKER_HOST


def probe(host: str | None = None) -> str:
    """``"docker"`` when the engine at ``host`` (default :func:`docker_host`) answers, else a
    one-line reason it cannot run containers (what ``hello.containers`` carries)."""
    host = host or docker_host()
    try:
        import docker  # type: ignore[import-untyped]
    except ImportError:
        return "the docker Python package is not installed (pip install 'docker>=7')"
    if host.startswith("unix://"):
        path = host[len("unix://"):]
        if not os.path.exists(path):
            return f"no Docker engine at {host}: the socket does not exist (is dockerd running?)"
        if not os.access(path, os.R_OK | os.W_OK):
            return (f"no Docker engine at {host}: permission denied (run the agent as root or "
                    "as a member of the docker group)")
    try:
        client = docker.APIClient(base_url=host, version="auto", timeout=PROBE_TIMEOUT)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as e:  # DockerException, connection refused, permission denied, ...
        text = first_line(e)
        if "Connection refused" in text:
            text = "connection refused"
        return f"no Docker engine at {host}: {text}"
    return "docker"


@dataclasses.dataclass(eq=False)
class _Task:
    allocation_id: str
    on_log: OnLog
    on_exit: OnExit
    container_id: str | None = None
    killed: bool = False
    kill_requested: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    watcher: asyncio.Task[None] | None = None
    done: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    reaper: asyncio.Task[None] | None = None  # the SIGKILL after the grace, once killed


class DockerRuntime(Runtime):
    """Runs each task of a spec with ``container`` in a container labelled with its allocation
    and this agent, under ``<work_dir>/tasks/<allocation_id>/`` like the process runtime.

    ``host``: the engine (default ``$DOCKER_HOST``, else the standard socket). ``task_user``:
    the account an agent running as root runs unlinked users' tasks as (a linked user's run
    as the spec's ``run_as``; an agent that is not root runs them as itself). ``mem_limit``:
    bytes every container may use (None: no limit). ``kill_grace``: seconds a killed
    container has between SIGTERM and SIGKILL. ``on_pulling(allocation_id, image)``: called
    when a task's image must be pulled first (the agent tells the master: PULLING). The engine is reached lazily: use
    :func:`probe` to check it first. Containers of this agent left by an earlier agent
    process are removed before the first task starts.
    """

    def __init__(
        self,
        work_dir: str,
        *,
        agent_id: str,
        slots: Sequence[Slot],
        host: str | None = None,
        base_env: Mapping[str, str] | None = None,
        keep_task_dirs: bool = False,
        task_user: str | None = None,
        mem_limit: int | None = None,
        kill_grace: float = KILL_GRACE,
        on_pulling: Callable[[str, str], None] | None = None,
    ) -> None:
        if mem_limit is not None and mem_limit < 6 * 1024 * 1024:
            raise ValueError(f"mem_limit must be at least 6 MiB (Docker's minimum), got {mem_limit}")
        self._work_dir = os.path.abspath(work_dir)
        self._agent_id = agent_id
        self._slots = {s.id: s for s in slots}
        self._host = host or docker_host()
        base = inherited_env(os.environ) if base_env is None else dict(base_env)
        self._base_env = {k: v for k, v in base.items() if k not in _HOST_ONLY}
        self._keep = keep_task_dirs
        self._task_user = task_user or DEFAULT_TASK_USER
        self._mem_limit = mem_limit
        self._kill_grace = kill_grace
        self._on_pulling = on_pulling
        self._tasks: dict[str, _Task] = {}
        self._contexts = ContextCache(os.path.join(self._work_dir, "contexts"))
        self._api: Any = None
        self._long_api: Any = None
        self._swept = False  # prepare() has taken up (or removed) earlier containers
        self._api_lock = threading.Lock()

    @property
    def host(self) -> str:
        """The engine's address."""
        return self._host

    def running(self) -> list[str]:
        """Allocation ids started and not yet reported through ``on_exit``."""
        return list(self._tasks)

    def _client(self) -> Any:
        """The engine's API client, made (and this agent's leftovers removed) on first use;
        called in a worker thread."""
        with self._api_lock:
            if self._api is None:
                import docker

                api = docker.APIClient(base_url=self._host, version="auto", timeout=API_TIMEOUT)
                if not self._swept:
                    self._remove_leftovers(api)
                # For the calls that last as long as a task (attach streams, wait): no timeout.
                self._long_api = docker.APIClient(base_url=self._host, version=api.api_version,
                                                    timeout=None)
                self._api = api
            return self._api

    async def prepare(self, on_log: OnLog | None = None, on_exit: OnExit | None = None) -> None:
        """Before the agent's first hello: connect to the engine and take up the containers an
        earlier process of this agent left (it crashed or was SIGKILLed). With callbacks, each
        is re-attached: its whole log is read again from the engine (the master drops the
        lines it already has, by seq) and it is watched to its exit as if started here, so
        the hello lists it and the master keeps it when the agent is back within
        ``agent_reconnect_wait``; one the master no longer knows, it kills (an orphan, then
        removed). Without callbacks they are removed. Logs and returns when the engine cannot
        be reached; start() tries again."""
        try:
            found = await asyncio.to_thread(self._leftovers)
        except Exception as e:
            log.warning("cannot reach the Docker engine at %s: %s", self._host, first_line(e))
            return
        for c in found:
            allocation_id = c["Labels"].get(LABEL_ALLOCATION) or ""
            if on_log is None or on_exit is None or not allocation_id or allocation_id in self._tasks:
                if allocation_id not in self._tasks:
                    await asyncio.to_thread(self._quietly_remove_leftover, c["Id"])
                continue
            try:
                await self._adopt(allocation_id, c, on_log, on_exit)
            except Exception as e:
                log.warning("cannot re-attach to container %s of %s: %s", c["Id"][:12],
                            allocation_id, first_line(e))
                self._tasks.pop(allocation_id, None)
                await asyncio.to_thread(self._quietly_remove_leftover, c["Id"])

    def _leftovers(self) -> list[dict[str, Any]]:
        """This agent's containers an earlier agent process left (in a worker thread)."""
        self._swept = True  # prepare() takes care of them: _client() must not remove them
        return self._agents_containers(self._client())

    def _remove_leftover(self, api: Any, cid: str) -> None:
        log.warning("removing container %s left by an earlier run of agent %s", cid[:12], self._agent_id)
        api.remove_container(cid, force=True)

    def _quietly_remove_leftover(self, cid: str) -> None:
        with contextlib.suppress(Exception):
            self._remove_leftover(self._api, cid)

    def _remove_leftovers(self, api: Any) -> None:
        for c in self._agents_containers(api):
            if c["Labels"].get(LABEL_ALLOCATION) not in self._tasks:
                self._remove_leftover(api, c["Id"])

    def _agents_containers(self, api: Any) -> list[dict[str, Any]]:
        return list(api.containers(all=True, filters={"label": f"{LABEL_AGENT}={self._agent_id}"}))

    async def _adopt(self, allocation_id: str, c: Mapping[str, Any], on_log: OnLog, on_exit: OnExit) -> None:
        """Re-attach to a container an earlier agent process started (``prepare``)."""
        cid = str(c["Id"])
        task = _Task(allocation_id, on_log, on_exit, container_id=cid)
        self._tasks[allocation_id] = task
        first = int(c["Labels"].get(LABEL_SEQ) or 0)
        batcher = LogBatcher(allocation_id, self._emitter(task), first_seq=first)
        loop = asyncio.get_running_loop()
        stream = await asyncio.to_thread(log_frames, self._long_api, cid)
        ended = in_thread(lambda: pump(stream, loop, batcher), f"logs-{allocation_id}")
        task.watcher = asyncio.create_task(self._watch(task, cid, batcher, ended))
        log.info("re-attached to container %s of %s (%s)", cid[:12], allocation_id, c.get("State"))

    async def start(self, spec: dict[str, Any], on_log: OnLog, on_exit: OnExit) -> int | None:
        """See :meth:`Runtime.start`; returns the container's main pid (as the host sees it)."""
        allocation_id = str(spec.get("allocation_id") or "")
        if allocation_id in self._tasks:
            raise ValueError(f"allocation {allocation_id!r} is already running on this agent")
        task = _Task(allocation_id, on_log, on_exit)
        self._tasks[allocation_id] = task
        batcher = LogBatcher(allocation_id, self._emitter(task))
        taskdir: TaskDir | None = None
        try:
            if not allocation_id:
                raise LaunchError("invalid task spec: allocation_id is missing")
            if "entrypoint" not in spec or not isinstance(spec.get("container"), Mapping):
                raise LaunchError("invalid task spec: entrypoint or container is missing")
            ident = self._identity(spec)
            taskdir = await asyncio.to_thread(make_task_dir, self._work_dir, allocation_id)
            write_info_files(taskdir, spec.get("info_files") or {})
            harness = harness_dir()
            package = os.path.realpath(os.path.join(harness, "det_harness")) if harness else None
            try:
                env = build_env(
                    spec, base=self._base_env, agent_id=self._agent_id,
                    slot_types={i: s.type for i, s in self._slots.items()},
                    harness=HARNESS_MOUNT if package else None, python_bin=None,
                    home=f"{RUN_MOUNT}/home", user=ident.user or account_name(ident.uid),
                )
                container_env(env, spec)
                gpus = self._gpu_ids(spec)
                if gpus:  # the container sees only its GPUs, numbered from 0
                    env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(len(gpus)))
                create, host = container_args(
                    spec, taskdir=taskdir, env=env, identity=ident, agent_id=self._agent_id,
                    harness_package=package, gpu_ids=gpus, mem_limit=self._mem_limit)
            except (ValueError, TypeError, KeyError) as e:
                raise LaunchError(f"invalid task spec: {e}") from e
            await fetch_context(spec, taskdir.work, self._contexts)
            if spec.get("task_type") == "TRIAL":
                await asyncio.to_thread(snapshot_model_dir, taskdir)
            os.makedirs(os.path.join(taskdir.run, "harness", "det_harness"), exist_ok=True)
            await asyncio.to_thread(create_mount_sources, list(spec.get("mounts") or []), ident)
            await asyncio.to_thread(hand_over, taskdir, ident.uid, ident.gid)
            await self._ensure_image(spec["container"], batcher, task)
            if task.killed:
                raise LaunchError("killed before it started", exit_code=137)
            pid = await self._launch(task, create, host, batcher)
        except LaunchError as e:
            await self._fail(task, batcher, str(e), e.exit_code)
            return None
        except Exception as e:  # never leave an allocation without its on_exit
            log.exception("launching %s failed", allocation_id)
            await self._fail(task, batcher, f"launching the container failed: {first_line(e)}", 1)
            return None
        log.info("task %s started in container %s", allocation_id, (task.container_id or "")[:12])
        return pid

    def _identity(self, spec: Mapping[str, Any]) -> Identity:
        try:
            return resolve_identity(spec, euid=os.geteuid(), egid=os.getegid(),
                                    default_user=lambda: ensure_account(self._task_user))
        except ValueError as e:
            raise LaunchError(f"invalid task spec: {e}") from e
        except RuntimeError as e:
            raise LaunchError(str(e)) from e

    def _gpu_ids(self, spec: Mapping[str, Any]) -> list[str]:
        slots = [self._slots.get(int(s)) for s in spec.get("slot_ids") or []]
        return [s.uuid or str(s.id) for s in slots if s is not None and s.type == "cuda"]

    def _emitter(self, task: _Task) -> Callable[[str, list[LogLine]], None]:
        def emit(allocation_id: str, lines: list[LogLine]) -> None:
            try:
                task.on_log(allocation_id, lines)
            except Exception:
                log.exception("log callback for %s failed", allocation_id)
        return emit

    async def _ensure_image(self, container: Mapping[str, Any], batcher: LogBatcher,
                            task: _Task) -> None:
        """Pull the image when it is missing or ``force_pull``; progress goes to the log. A
        kill stops the wait at once (the engine's pull goes on, its lines are dropped)."""
        import docker

        image = str(container["image"])
        api = await asyncio.to_thread(self._client)
        if not container.get("force_pull"):
            try:
                await asyncio.to_thread(api.inspect_image, image)
                return
            except docker.errors.ImageNotFound:
                pass
        loop = asyncio.get_running_loop()

        def add(stdtype: str, lines: list[str]) -> None:
            if not task.kill_requested.is_set():
                batcher.add(stdtype, lines)

        def say(stdtype: str, text: str) -> None:  # from the pulling thread
            loop.call_soon_threadsafe(add, stdtype, [text + "\n"])

        say("stdout", f"Pulling image {image}")
        if self._on_pulling is not None:
            self._on_pulling(task.allocation_id, image)
        repo, tag = image_ref(image)
        auth = dict(container["registry_auth"]) if container.get("registry_auth") else None

        def pull() -> None:
            try:
                stream = api.pull(repo, tag=tag, stream=True, decode=True, auth_config=auth)
                for line in progress_lines(stream):
                    say("stdout", line)
            except docker.errors.DockerException as e:
                raise LaunchError(f"pulling image {image} failed: {api_message(e)}") from e
            except OSError as e:  # the engine went away mid-pull
                raise LaunchError(f"pulling image {image} failed: {e}") from e

        pulling = in_thread(pull, f"pull-{repo}")
        killed = asyncio.ensure_future(task.kill_requested.wait())
        await asyncio.wait({pulling, killed}, return_when=asyncio.FIRST_COMPLETED)
        killed.cancel()
        if not pulling.done():
            pulling.add_done_callback(lambda f: f.cancelled() or f.exception())  # nobody awaits it
            raise LaunchError("killed while pulling its image", exit_code=137)
        pulling.result()

    async def _launch(self, task: _Task, create: dict[str, Any], host: dict[str, Any],
                      batcher: LogBatcher) -> int:
        api = await asyncio.to_thread(self._client)
        loop = asyncio.get_running_loop()

        # How many lines the task's log had before the container's first: a re-attach after an
        # agent restart numbers its replay of the container's log from there (prepare()).
        create = dict(create, labels={**create["labels"], LABEL_SEQ: str(batcher.next_seq)})

        def run() -> tuple[str, int, Any]:
            config = dict(create, host_config=api.create_host_config(**host))
            cid = api.create_container(**config)["Id"]
            task.container_id = cid
            # Attached before it starts, so no line is missed.
            stream = self._long_api.attach(cid, stdout=True, stderr=True, stream=True, demux=True)
            try:
                api.start(cid)
            except Exception:
                stream.close()
                raise
            return cid, int(api.inspect_container(cid)["State"]["Pid"]), stream

        try:
            cid, pid, stream = await asyncio.to_thread(run)
        except Exception as e:
            import docker

            if task.container_id is not None:
                await asyncio.to_thread(self._remove, task.container_id)
            if isinstance(e, docker.errors.APIError):
                message = api_message(e)
                raise LaunchError(f"starting the container failed: {message}",
                                  exit_code=start_error_code(message)) from e
            raise
        ended = in_thread(lambda: pump(stream, loop, batcher), f"logs-{task.allocation_id}")
        if task.killed:  # a kill arrived while the container was being started
            await asyncio.to_thread(self._kill_container, cid)
        task.watcher = asyncio.create_task(self._watch(task, cid, batcher, ended))
        return pid

    async def _watch(self, task: _Task, cid: str, batcher: LogBatcher,
                     ended: asyncio.Future[None]) -> None:
        api = self._api
        try:
            # Its own thread, not the loop's executor, which tasks would otherwise fill up.
            result = await in_thread(lambda: self._long_api.wait(cid, timeout=None), f"wait-{cid[:12]}")
            exit_code = int(result.get("StatusCode", 1))
            state = (await asyncio.to_thread(api.inspect_container, cid))["State"]
        except Exception as e:
            log.exception("waiting for container %s failed", cid[:12])
            exit_code, state = 1, {}
            batcher.add("stderr", [f"lost the container: {first_line(e)}\n"])
        try:
            await asyncio.wait_for(asyncio.shield(ended), 5.0)
        except asyncio.TimeoutError:
            log.warning("the log stream of %s did not end; dropping the rest", cid[:12])
        if state.get("OOMKilled"):
            batcher.add("stderr", ["the container ran out of memory\n"])
            exit_code = 137
        batcher.close()
        reason = "killed" if task.killed else ("out of memory" if state.get("OOMKilled") else None)
        log.info("task %s exited with %d", task.allocation_id, exit_code)
        self._report(task, exit_code, reason)
        await asyncio.to_thread(self._remove, cid)
        if not self._keep:
            root = os.path.join(self._work_dir, "tasks", task.allocation_id)
            await asyncio.to_thread(shutil.rmtree, root, True)

    def _remove(self, cid: str) -> None:
        try:
            self._api.remove_container(cid, force=True)
        except Exception as e:
            log.warning("cannot remove container %s: %s", cid[:12], first_line(e))

    def _kill_container(self, cid: str, signal: str = "SIGKILL") -> None:
        with contextlib.suppress(Exception):  # already stopped, or gone
            self._api.kill(cid, signal=signal)

    async def kill(self, allocation_id: str) -> None:
        """See :meth:`Runtime.kill`, as ``docker stop`` does it: SIGTERM to the container's
        main process (passed on by its init to the entrypoint), then SIGKILL to all of it
        once ``kill_grace`` seconds have passed without an exit. A container still being
        created is stopped before it starts."""
        task = self._tasks.get(allocation_id)
        if task is None:
            return
        task.killed = True
        task.kill_requested.set()
        if task.container_id is not None and task.reaper is None:
            cid = task.container_id
            await asyncio.to_thread(self._kill_container, cid, "SIGTERM")
            task.reaper = asyncio.create_task(self._kill_after_grace(task, cid))

    async def _kill_after_grace(self, task: _Task, cid: str) -> None:
        try:
            await asyncio.wait_for(task.done.wait(), self._kill_grace)
        except asyncio.TimeoutError:
            log.info("task %s did not exit within %g s of SIGTERM: SIGKILL", task.allocation_id,
                     self._kill_grace)
            await asyncio.to_thread(self._kill_container, cid)

    async def shutdown(self) -> None:
        """See :meth:`Runtime.shutdown`."""
        tasks = list(self._tasks.values())
        await asyncio.gather(*(self.kill(t.allocation_id) for t in tasks))
        if tasks:
            waits = [asyncio.create_task(t.done.wait()) for t in tasks]
            _, pending = await asyncio.wait(waits, timeout=self._kill_grace + SHUTDOWN_TIMEOUT)
            for w in pending:
                w.cancel()

    async def _fail(self, task: _Task, batcher: LogBatcher, message: str, exit_code: int) -> None:
        log.warning("task %s failed to launch: %s", task.allocation_id, message)
        await asyncio.sleep(0)  # lines handed over from threads come first
        batcher.add("stderr", [message + "\n"])
        batcher.close()
        self._report(task, exit_code, message)
        if not self._keep and task.allocation_id and "/" not in task.allocation_id:
            root = os.path.join(self._work_dir, "tasks", task.allocation_id)
            await asyncio.to_thread(shutil.rmtree, root, True)

    def _report(self, task: _Task, exit_code: int, reason: str | None) -> None:
        self._tasks.pop(task.allocation_id, None)
        task.done.set()
        try:
            task.on_exit(task.allocation_id, exit_code, reason)
        except Exception:
            log.exception("exit callback for %s failed", task.allocation_id)
