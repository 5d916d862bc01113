"""MixedRuntime: image tasks to the Docker runtime, the others to the process runtime."""

from __future__ import annotations

import asyncio
from typing import Any

from ..wire import LogLine
from ._base import OnExit, OnLog, Runtime
from ._logs import utc_now


def refuse_container(allocation_id: str, image: str, why: str, on_log: OnLog, on_exit: OnExit) -> None:
    """End an image task at once on an agent that runs no containers: a stderr line saying
    so (with ``why``, the reason ``hello.containers`` gave), then exit code 1."""
    message = f"cannot run image {image}: this agent runs no containers ({why})"
    on_log(allocation_id, [LogLine(0, "stderr", message + "\n", utc_now(), None)])
    on_exit(allocation_id, 1, message)


class MixedRuntime(Runtime):
    """Dispatches each spec by its ``container`` field: set, to ``docker``; absent, to
    ``process``. ``docker`` None means this agent runs no containers, for the reason
    ``no_docker`` (what ``hello.containers`` says); an image task then fails at once with that
    reason as a stderr line (the master should not send one: this is defense in depth)."""

    def __init__(self, process: Runtime, docker: Runtime | None, *, no_docker: str = "") -> None:
        if docker is None and not no_docker:
            raise ValueError("no_docker must say why containers are unavailable when docker is None")
        self.process = process
        self.docker = docker
        self._no_docker = no_docker

    @property
    def containers(self) -> str:
        """``"docker"``, or why image tasks cannot run here."""
        return "docker" if self.docker is not None else self._no_docker

    async def prepare(self, on_log: OnLog | None = None, on_exit: OnExit | None = None) -> None:
        """Before the first connection: the Docker runtime's :meth:`DockerRuntime.prepare`
        (re-attaches to the containers an earlier agent process left, with the callbacks)."""
        prepare = getattr(self.docker, "prepare", None)
        if prepare is not None:
            await prepare(on_log, on_exit)

    def _for(self, spec: dict[str, Any]) -> Runtime | None:
        return self.process if spec.get("container") is None else self.docker

    async def start(self, spec: dict[str, Any], on_log: OnLog, on_exit: OnExit) -> int | None:
        """See :meth:`Runtime.start`."""
        allocation_id = str(spec.get("allocation_id") or "")
        if allocation_id and allocation_id in self.running():
            raise ValueError(f"allocation {allocation_id!r} is already running on this agent")
        runtime = self._for(spec)
        if runtime is None:
            image = str((spec.get("container") or {}).get("image", "?"))
            refuse_container(allocation_id, image, self._no_docker, on_log, on_exit)
            return None
        return await runtime.start(spec, on_log, on_exit)

    async def kill(self, allocation_id: str) -> None:
        """See :meth:`Runtime.kill`."""
        for runtime in self._all():
            if allocation_id in runtime.running():
                await runtime.kill(allocation_id)

    def running(self) -> list[str]:
        """Allocation ids started and not yet reported through ``on_exit``."""
        return [a for runtime in self._all() for a in runtime.running()]

    async def shutdown(self) -> None:
        """See :meth:`Runtime.shutdown`: both runtimes at once."""
        await asyncio.gather(*(runtime.shutdown() for runtime in self._all()))

    def _all(self) -> list[Runtime]:
        return [self.process] if self.docker is None else [self.process, self.docker]
