"""Warm starts: Python tasks forked from a launcher that has already started the interpreter and
imported the harness (``_zygote.py``), instead of a new interpreter per task.

A task is warm-started only when its command is the agent's own Python running a script or a
module (``python3 train.py …``, ``python -u -m pkg.mod …``) and its environment asks nothing
of interpreter start-up that differs from the launcher's (``PYTHON*`` variables other than
PYTHONPATH and PYTHONUNBUFFERED). Anything else — a shell command, another interpreter, other
options — starts cold, as does every task while the launcher cannot be reached.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import IO, Any

from ._launch import make_preexec

log = logging.getLogger(__name__)

ZYGOTE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_zygote.py")
_PYTHON_NAME = re.compile(r"python(3(\.\d+)?)?")
_SHELL_SYNTAX = set("|&;<>()$`\\*?[]{}~!#\n")
_STARTUP_FREE = {"PYTHONPATH", "PYTHONUNBUFFERED"}


class WarmStartError(Exception):
    """The launcher could not start the task (the caller starts it cold)."""


class WarmProcess:
    """A task process forked by the launcher: the part of ``Popen`` the runtime uses."""

    def __init__(self, pid: int, stdout: IO[bytes], stderr: IO[bytes], exited: asyncio.Future[int]) -> None:
        self.pid = pid
        self.stdout = stdout
        self.stderr = stderr
        self._exited = exited

    async def wait(self) -> int:
        """The returncode, as ``Popen.returncode`` gives it (negative: killed by that signal)."""
        return await asyncio.shield(self._exited)


class WarmLauncher:
    """The agent's side of the launcher: started on first use, restarted after it dies."""

    def __init__(self, *, env: Mapping[str, str], harness: str | None) -> None:
        self._env = dict(env)
        if harness:
            path = self._env.get("PYTHONPATH")
            self._env["PYTHONPATH"] = f"{harness}{os.pathsep}{path}" if path else harness
        self._bin_dir = os.path.dirname(os.path.abspath(sys.executable))
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._next_id = 0
        self._started: dict[str, asyncio.Future[int]] = {}
        self._exits: dict[str, asyncio.Future[int]] = {}

    def python_argv(self, entrypoint: str | Sequence[str], env: Mapping[str, str]) -> list[str] | None:
        """The interpreter's arguments (``[-u] script args…`` or ``[-u] -m module args…``) when
        the task can start warm, else None."""
        if isinstance(entrypoint, str):
            if any(c in _SHELL_SYNTAX for c in entrypoint):
                return None
            try:
                argv = shlex.split(entrypoint)
            except ValueError:
                return None
        else:
            argv = [str(a) for a in entrypoint]
        if not argv or "=" in argv[0]:
            return None
        exe = shutil.which(argv[0], path=env.get("PATH"))
        if exe is None or os.path.dirname(os.path.abspath(exe)) != self._bin_dir:
            return None
        if not _PYTHON_NAME.fullmatch(os.path.basename(exe)):
            return None
        rest = argv[1:]
        body = rest[1:] if rest[:1] == ["-u"] else rest
        if not body or (body[0].startswith("-") and body[0] != "-m") or body == ["-m"]:
            return None
        keys = {k for k in (*env, *self._env) if k.startswith("PYTHON") and k not in _STARTUP_FREE}
        if any(env.get(k) != self._env.get(k) for k in keys):
            return None
        return rest

    async def spawn(
        self, argv: list[str], *, cwd: str, env: Mapping[str, str], isolate: dict[str, Any] | None,
    ) -> WarmProcess:
        """Fork the task (``argv`` from :meth:`python_argv`) in the launcher; its stdout and
        stderr come back as pipes."""
        sock = self._ensure()
        loop = asyncio.get_running_loop()
        self._next_id += 1
        job_id = str(self._next_id)
        env = dict(env)
        if argv[:1] == ["-u"]:
            argv = argv[1:]
            env["PYTHONUNBUFFERED"] = "1"
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        started = self._started[job_id] = loop.create_future()
        self._exits[job_id] = loop.create_future()
        message = {"id": job_id, "argv": argv, "cwd": cwd, "env": env, "isolate": isolate}
        try:
            socket.send_fds(sock, [json.dumps(message).encode()], [out_w, err_w])
            pid = await started
        except BaseException as e:
            for fd in (out_r, err_r):
                os.close(fd)
            self._started.pop(job_id, None)
            self._exits.pop(job_id, None)
            if isinstance(e, (OSError, WarmStartError)):
                raise WarmStartError(str(e)) from e
            raise
        finally:
            os.close(out_w)
            os.close(err_w)
        return WarmProcess(pid, os.fdopen(out_r, "rb", buffering=0), os.fdopen(err_r, "rb", buffering=0),
                           self._exits[job_id])

    def close(self) -> None:
        """Stop the launcher (tasks it forked die with it)."""
        if self._sock is not None:
            asyncio.get_event_loop().remove_reader(self._sock.fileno())
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None
        self._fail_all("the warm launcher stopped")

    def _ensure(self) -> socket.socket:
        if self._sock is not None:
            return self._sock
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, ZYGOTE],
                env={**self._env, "DET_LAUNCHER_FD": str(theirs.fileno())},
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=make_preexec(os.getpid()),
            )
        except OSError as e:
            ours.close()
            raise WarmStartError(f"cannot start the warm launcher: {e}") from e
        finally:
            theirs.close()
        self._sock = ours
        asyncio.get_running_loop().add_reader(ours.fileno(), self._on_readable)
        log.info("warm launcher started as pid %d", self._proc.pid)
        return ours

    def _on_readable(self) -> None:
        assert self._sock is not None
        try:
            data = self._sock.recv(1 << 16)
        except OSError:
            data = b""
        if not data:
            log.warning("the warm launcher exited; Python tasks start cold until it is restarted")
            asyncio.get_running_loop().remove_reader(self._sock.fileno())
            self._sock.close()
            self._sock = None
            if self._proc is not None:
                self._proc.wait()
                self._proc = None
            self._fail_all("the warm launcher exited")
            return
        reply = json.loads(data)
        job_id = reply["id"]
        if "pid" in reply:
            fut = self._started.pop(job_id, None)
            if fut is not None and not fut.done():
                fut.set_result(int(reply["pid"]))
        elif "error" in reply:
            fut = self._started.pop(job_id, None)
            if fut is not None and not fut.done():
                fut.set_exception(WarmStartError(reply["error"]))
        else:
            exit_fut = self._exits.pop(job_id, None)
            if exit_fut is not None and not exit_fut.done():
                exit_fut.set_result(os.waitstatus_to_exitcode(int(reply["status"])))

    def _fail_all(self, why: str) -> None:
        for fut in self._started.values():
            if not fut.done():
                fut.set_exception(WarmStartError(why))
        for fut in self._exits.values():
            if not fut.done():
                fut.set_result(-9)  # its tasks were killed with it (PDEATHSIG)
        self._started.clear()
        self._exits.clear()
