"""ProcessRuntime: tasks as local processes, isolated by Linux namespaces when the host allows."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from .._devices import Slot
from ._base import LogLine, OnExit, OnLog, Runtime
from ._isolation import (
    DEFAULT_TASK_USER,
    RUN_MOUNT,
    WORKDIR_MOUNT,
    Identity,
    account_name,
    ensure_account,
    inherited_env,
    mount_plan,
    resolve_identity,
)
from ._launch import (
    build_env,
    entrypoint_argv,
    harness_dir,
    isolated_argv,
    make_preexec,
    open_parent_lock,
    probe_isolation,
    python_bin_dir,
    task_python_dir,
)
from ._logs import LogBatcher, pump_pipe, utc_now, wait_process
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
from ._warm import WarmLauncher, WarmProcess, WarmStartError

log = logging.getLogger(__name__)

#: After the main process exits, how long to wait for its pipes to reach EOF (seconds).
EXIT_GRACE = 1.0
#: How long shutdown() waits for killed tasks to be reported (seconds).
SHUTDOWN_TIMEOUT = 5.0

_probe_result: list[list[str] | None] = []  # one probe per agent process
_warned_no_isolation = False


def _isolation_prefix() -> list[str] | None:
    if not _probe_result:
        _probe_result.append(probe_isolation())
    return _probe_result[0]


def _warn_no_isolation() -> None:
    global _warned_no_isolation
    if not _warned_no_isolation:
        _warned_no_isolation = True
        log.warning(
            "task isolation is unavailable (`unshare --mount --pid` failed), so tasks run "
            "without a private /run/determined: the stock `determined` package inside tasks "
            "will not find /run/determined/info (det_harness is unaffected) and `mounts` are "
            "ignored. Run the agent as root or enable unprivileged user namespaces to fix this."
        )


def _interpreter_paths(python_bin: str | None = None) -> list[str]:
    """What every task must reach on the host: the agent's interpreter (its venv and the base
    installation behind it), the tasks' own Python environment when one is named, and the
    harness."""
    paths = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    if python_bin:
        paths.add(os.path.dirname(os.path.abspath(python_bin)))  # the environment's root
        paths.add(os.path.dirname(os.path.realpath(os.path.join(python_bin, "python3"))))
    harness = harness_dir()
    if harness:
        paths.add(harness)
        paths.add(os.path.realpath(os.path.join(harness, "det_harness")))
    return sorted(os.path.realpath(p) for p in paths)


def create_mount_sources(mounts: list[dict[str, Any]], ident: Identity) -> None:
    """Make each missing host_path of a mount marked ``create`` (a notebook's working
    directory), private to and owned by the task's account; existing ones stay as they are."""
    for m in mounts:
        path = m.get("host_path")
        if not m.get("create") or not path or os.path.exists(path):
            continue
        try:
            os.makedirs(path, mode=0o700)
            if ident.switch:
                os.chown(path, ident.uid, ident.gid)
        except OSError as e:
            raise LaunchError(f"cannot create {path} for the task: {e.strerror}") from e


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        # No such group: either it is gone, or a warm-started task was forked but has not
        # called setsid() yet (it is still a lone process, so killing it kills the task).
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


@dataclasses.dataclass(eq=False)
class _Task:
    allocation_id: str
    on_log: OnLog
    on_exit: OnExit
    proc: subprocess.Popen[bytes] | WarmProcess | None = None
    killed: bool = False
    watcher: asyncio.Task[None] | None = None
    done: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)


class ProcessRuntime(Runtime):
    """Runs each task as a process group under ``<work_dir>/tasks/<allocation_id>/``.

    ``isolate``: True requires namespaces (RuntimeError if the probe fails), False never uses
    them (tasks then run as the agent's own user and see what it sees: for tests and trusted
    single-user setups only), None (default) uses them when ``unshare`` works here and warns
    once otherwise.
    ``base_env`` replaces the allowlisted part of ``os.environ`` (``_isolation.ENV_ALLOWLIST``)
    as the bottom layer of each task's environment.
    ``task_user``: the account an agent running as root runs unlinked users' tasks as (created
    when missing; default ``det-task``); a linked user's tasks run as the spec's ``run_as``.
    ``hidden_paths``: host directories no isolated task may see (the agent's own work dir
    always is), such as the master's data dir for an embedded agent.
    ``warm_start``: Python tasks fork from a launcher that has the interpreter and the harness
    loaded (``_warm.py``) — milliseconds instead of an interpreter start per task.
    """

    def __init__(
        self,
        work_dir: str,
        *,
        agent_id: str,
        slots: Sequence[Slot],
        isolate: bool | None = None,
        base_env: Mapping[str, str] | None = None,
        keep_task_dirs: bool = False,
        warm_start: bool = True,
        task_user: str | None = None,
        hidden_paths: Sequence[str] = (),
        task_python: str | None = None,
    ) -> None:
        self._work_dir = os.path.abspath(work_dir)
        # The Python environment a task's python3 runs (``--task-python``); else the agent's.
        self._python_bin = task_python_dir(task_python) if task_python else python_bin_dir()
        self._task_user = task_user or DEFAULT_TASK_USER
        self._default_identity: tuple[int, int, str] | None = None
        self._hidden = [self._work_dir, *(os.path.abspath(p) for p in hidden_paths if p)]
        self._needed = _interpreter_paths(self._python_bin)
        self._agent_id = agent_id
        self._slot_types = {s.id: s.type for s in slots}
        self._base_env = inherited_env(os.environ) if base_env is None else dict(base_env)
        self._keep = keep_task_dirs
        self._tasks: dict[str, _Task] = {}
        self._contexts = ContextCache(os.path.join(self._work_dir, "contexts"))
        self._unshare: list[str] | None = None
        self._isolate = isolate
        if isolate is not False:
            self._unshare = _isolation_prefix()
            if self._unshare is None:
                if isolate:
                    raise RuntimeError(
                        "task isolation was required but `unshare --mount --pid` does not work "
                        "on this host; run as root or pass isolate=None to run without it"
                    )
                _warn_no_isolation()
        # The launcher isolates tasks itself, as root only (no user namespace of its own).
        self._warm: WarmLauncher | None = None
        if warm_start and (self._unshare is None or "--map-root-user" not in self._unshare):
            self._warm = WarmLauncher(env=self._base_env, harness=harness_dir())

    @property
    def isolated(self) -> bool:
        """Whether tasks run in private mount + pid namespaces."""
        return self._unshare is not None

    def running(self) -> list[str]:
        """Allocation ids started and not yet reported through ``on_exit``."""
        return list(self._tasks)

    async def start(self, spec: dict[str, Any], on_log: OnLog, on_exit: OnExit) -> int | None:
        """See :meth:`Runtime.start`."""
        allocation_id = str(spec.get("allocation_id") or "")
        if allocation_id in self._tasks:
            raise ValueError(f"allocation {allocation_id!r} is already running on this agent")
        task = _Task(allocation_id, on_log, on_exit)
        self._tasks[allocation_id] = task
        argv: list[str] = []
        try:
            if not allocation_id:
                raise LaunchError("invalid task spec: allocation_id is missing")
            if "entrypoint" not in spec:
                raise LaunchError("invalid task spec: entrypoint is missing")
            ident = await self._identity(spec)
            taskdir = await asyncio.to_thread(make_task_dir, self._work_dir, allocation_id)
            write_info_files(taskdir, spec.get("info_files") or {})
            isolated = self._unshare is not None
            try:
                env = build_env(
                    spec,
                    base=self._base_env,
                    agent_id=self._agent_id,
                    slot_types=self._slot_types,
                    harness=harness_dir(),
                    python_bin=self._python_bin,
                    home=f"{RUN_MOUNT}/home" if isolated else taskdir.home,
                    user=ident.user or account_name(ident.uid),
                )
                argv = entrypoint_argv(spec["entrypoint"])
            except (ValueError, TypeError) as e:
                raise LaunchError(f"invalid task spec: {e}") from e
            await fetch_context(spec, taskdir.work, self._contexts)
            if spec.get("task_type") == "TRIAL":
                await asyncio.to_thread(snapshot_model_dir, taskdir)
            await asyncio.to_thread(hand_over, taskdir, ident.uid, ident.gid)
            if task.killed:
                raise LaunchError("killed before it started", exit_code=137)
            mounts = list(spec.get("mounts") or [])
            steps: list[tuple[str, ...]] = []
            if isolated:
                await asyncio.to_thread(create_mount_sources, mounts, ident)
                self._make_mountpoints(mounts)
                steps = mount_plan(
                    run_dir=taskdir.run, work_dir=taskdir.work, mounts=mounts,
                    hidden=self._hidden, needed=self._needed, uid=ident.uid, gid=ident.gid,
                    stage_dir=taskdir.stage,
                )
            elif mounts:
                _warn_no_isolation()
            cwd = WORKDIR_MOUNT if isolated else taskdir.work
            proc = await self._start_warm(spec["entrypoint"], env, cwd, steps, ident)
            if proc is None:
                proc = self._start_cold(argv, env, taskdir, steps, ident)
        except LaunchError as e:
            self._fail(task, str(e), e.exit_code)
            return None
        except FileNotFoundError as e:
            self._fail(task, f"cannot execute {argv[:1]}: {e.strerror} (exit 127)", 127)
            return None
        except PermissionError as e:
            self._fail(task, f"cannot execute {argv[:1]}: {e.strerror} (exit 126)", 126)
            return None
        except Exception as e:  # never leave an allocation without its on_exit
            log.exception("launching %s failed", allocation_id)
            self._fail(task, f"launching the task failed: {e!r}", 1)
            return None
        task.proc = proc
        if task.killed:  # a kill arrived while the process was being spawned
            _killpg(proc.pid)
        task.watcher = asyncio.create_task(self._watch(task, taskdir.root))
        log.info("task %s started as pid %d", allocation_id, proc.pid)
        return proc.pid

    async def _identity(self, spec: dict[str, Any]) -> Identity:
        """Who the task runs as (see ``_isolation.resolve_identity``); LaunchError when the
        agent is root and cannot isolate, since it never runs tasks as root by itself."""
        try:
            ident = resolve_identity(spec, euid=os.geteuid(), egid=os.getegid(),
                                     default_user=self._default_account)
        except ValueError as e:
            raise LaunchError(f"invalid task spec: {e}") from e
        except RuntimeError as e:
            raise LaunchError(str(e)) from e
        if ident.switch and self._unshare is None and self._isolate is not False:
            raise LaunchError(
                "the agent runs as root but cannot isolate tasks (`unshare --mount --pid` "
                "failed), and it runs no task as root or as another user without isolation; "
                "fix the host's namespaces or run the agent as an unprivileged user")
        if self._isolate is False:  # the explicit unisolated mode: the agent's own user
            return Identity(os.geteuid(), os.getegid(), None, False, "agent")
        return ident

    def _default_account(self) -> tuple[int, int, str]:
        if self._default_identity is None:
            self._default_identity = ensure_account(self._task_user)
        return self._default_identity

    def _start_cold(
        self, argv: list[str], env: dict[str, str], taskdir: TaskDir, steps: list[tuple[str, ...]],
        ident: Identity,
    ) -> subprocess.Popen[bytes]:
        """The task as a new process (inside ``unshare`` when isolated)."""
        stdin = subprocess.DEVNULL
        cwd = taskdir.work
        if self._unshare is not None:
            lock_path = os.path.join(taskdir.root, "parent.lock")
            lock = open_parent_lock(lock_path)
            argv = isolated_argv(
                self._unshare, argv, steps=steps, identity=ident,
                parent_lock=lock_path if lock is not None else None,
            )
            stdin = subprocess.DEVNULL if lock is None else lock
            cwd = "/"
        try:
            return subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=make_preexec(os.getpid()),
            )
        finally:
            if stdin != subprocess.DEVNULL:
                os.close(stdin)  # unshare (and only it, once the preamble ran) holds the lock

    async def _start_warm(
        self, entrypoint: Any, env: dict[str, str], cwd: str, steps: list[tuple[str, ...]],
        ident: Identity,
    ) -> WarmProcess | None:
        """The task forked by the warm launcher, or None to start it cold."""
        argv = self._warm.python_argv(entrypoint, env) if self._warm is not None else None
        if argv is None:
            return None
        isolate = None
        if self._unshare is not None:
            isolate = {"steps": [list(s) for s in steps], "uid": ident.uid, "gid": ident.gid,
                       "switch": ident.switch}
        try:
            return await self._warm.spawn(argv, cwd=cwd, env=env, isolate=isolate)  # type: ignore[union-attr]
        except WarmStartError as e:
            log.warning("warm start failed (%s); starting the task cold", e)
            return None

    async def kill(self, allocation_id: str) -> None:
        """See :meth:`Runtime.kill`."""
        task = self._tasks.get(allocation_id)
        if task is None:
            return
        task.killed = True
        if task.proc is not None:
            # The group holds the entrypoint (or `unshare`, whose death takes the whole pid
            # namespace with it thanks to --kill-child).
            _killpg(task.proc.pid)

    async def shutdown(self) -> None:
        """See :meth:`Runtime.shutdown`."""
        tasks = list(self._tasks.values())
        for task in tasks:
            await self.kill(task.allocation_id)
        if tasks:
            waits = [asyncio.create_task(t.done.wait()) for t in tasks]
            _, pending = await asyncio.wait(waits, timeout=SHUTDOWN_TIMEOUT)
            for w in pending:
                w.cancel()
        if self._warm is not None:
            self._warm.close()

    def _make_mountpoints(self, mounts: list[dict[str, str]]) -> None:
        for m in mounts:
            try:
                os.makedirs(m["container_path"], exist_ok=True)
            except OSError as e:
                # The mount in the task's preamble then fails and says why in the task log.
                log.warning("cannot create mountpoint %s: %s", m["container_path"], e)

    def _fail(self, task: _Task, message: str, exit_code: int) -> None:
        log.warning("task %s failed to launch: %s", task.allocation_id, message)
        line = LogLine(0, "stderr", message + "\n", utc_now(), None)
        self._report(task, [line], exit_code, message)

    def _report(
        self, task: _Task, lines: list[LogLine], exit_code: int, reason: str | None
    ) -> None:
        self._tasks.pop(task.allocation_id, None)
        task.done.set()
        try:
            if lines:
                task.on_log(task.allocation_id, lines)
            task.on_exit(task.allocation_id, exit_code, reason)
        except Exception:
            log.exception("exit callback for %s failed", task.allocation_id)

    async def _watch(self, task: _Task, root: str) -> None:
        proc = task.proc
        assert proc is not None and proc.stdout is not None and proc.stderr is not None

        def emit(allocation_id: str, lines: list[LogLine]) -> None:
            try:
                task.on_log(allocation_id, lines)
            except Exception:
                log.exception("log callback for %s failed", allocation_id)

        batcher = LogBatcher(task.allocation_id, emit)
        readers = [
            asyncio.create_task(pump_pipe(proc.stdout, "stdout", batcher)),
            asyncio.create_task(pump_pipe(proc.stderr, "stderr", batcher)),
        ]
        returncode = await (proc.wait() if isinstance(proc, WarmProcess) else wait_process(proc))
        # The task ends with its main process: nothing it started may outlive it.
        _killpg(proc.pid)
        _, pending = await asyncio.wait(readers, timeout=EXIT_GRACE)
        for reader in pending:
            # Something that escaped the group still holds a pipe; stop reading it.
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        batcher.close()
        exit_code = 128 - returncode if returncode < 0 else returncode
        reason = "killed" if task.killed else None
        log.info("task %s exited with %d", task.allocation_id, exit_code)
        # Report first: the slot is free now, and the master can place the next task while
        # this one's directory is removed.
        self._report(task, [], exit_code, reason)
        if not self._keep:
            await asyncio.to_thread(shutil.rmtree, root, True)
