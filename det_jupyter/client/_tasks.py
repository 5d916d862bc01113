"""Interactive tasks: notebooks (JupyterLab behind the master's proxy, ``/proxy/{id}/`` on the
proxy's own origin) and commands
(one process on the cluster) — launch, list, wait, logs, kill, priority.

    nb = client.launch_notebook({"resources": {"slots": 0}, "idle_timeout": "20m"})
    nb.wait_running()
    print(nb.url)                      # <proxy origin>/proxy/<id>/lab?det_ticket=<ticket>

    cmd = client.launch_command(["python3", "train.py"], context="./src")
    for line in cmd.logs(follow=True):
        print(line)
    print(cmd.wait_ended().exit_code)
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, cast
from urllib.parse import quote

from ._errors import APIError, InvalidInput
from ._experiment import WaitTimeout
from ._trial import strip_state
from .session import Session

#: Task states (``taskv1State`` without the prefix) after which nothing changes.
TASK_ENDED = frozenset({"TERMINATED"})
_EXIT_CODE = re.compile(r"exited with code (-?\d+)")


class Task:
    """A notebook or a command. Attributes are the master's JSON as of the last ``reload()``."""

    kind = "commands"  # the REST collection: /api/v1/<kind>
    key = "command"  # the body's field naming the task

    def __init__(self, session: Session, task_id: str, data: dict[str, Any] | None = None) -> None:
        self._session = session
        self.id = str(task_id)
        self._data: dict[str, Any] = data if data is not None else {}
        self._body: dict[str, Any] = {}
        self.launch_warnings: list[str] = []
        if data is None:
            self.reload()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r}, state={self.state!r})"

    def reload(self) -> Task:
        self._body = self._session.get(f"/api/v1/{self.kind}/{self.id}")
        self._data = self._body[self.key]
        return self

    # -- what the master says -----------------------------------------------------------

    @property
    def state(self) -> str:
        """QUEUED, STARTING, RUNNING, TERMINATING or TERMINATED."""
        return strip_state(self._data.get("state"))

    @property
    def description(self) -> str:
        return str(self._data.get("description") or "")

    @property
    def username(self) -> str:
        return str(self._data.get("username") or "")

    @property
    def start_time(self) -> str | None:
        return self._data.get("startTime")

    @property
    def resource_pool(self) -> str:
        return str(self._data.get("resourcePool") or "")

    @property
    def job_id(self) -> str:
        return str(self._data.get("jobId") or "")

    @property
    def exit_status(self) -> str | None:
        """Why it ended (``exited with code 0``, ``culled: idle for …``); None while it runs."""
        return self._data.get("exitStatus")

    @property
    def exit_code(self) -> int | None:
        """The process's exit code, once it ended with one."""
        match = _EXIT_CODE.search(self.exit_status or "")
        return int(match.group(1)) if match else None

    @property
    def config(self) -> dict[str, Any]:
        """The task's stored config (as the master completed it); {} for a listed task."""
        return dict(self._body.get("config") or {})

    def to_dict(self) -> dict[str, Any]:
        return dict(self._data)

    # -- control --------------------------------------------------------------------------

    def kill(self) -> None:
        self._data = self._session.post(f"/api/v1/{self.kind}/{self.id}/kill")[self.key]

    def set_priority(self, priority: int) -> None:
        """Its job's priority (1-99, lower first): changes when it starts, never preempts it."""
        body = self._session.post(f"/api/v1/{self.kind}/{self.id}/set_priority",
                                  {"priority": int(priority)})
        self._data = body[self.key]

    def wait_reason(self) -> str | None:
        """Why it is still queued (the job queue's ``waitReason``), or None."""
        params = {"resourcePool": self.resource_pool} if self.resource_pool else {}
        try:
            jobs = self._session.get("/api/v1/job-queues-v2", **params).get("jobs") or []
        except APIError:
            return None  # the queue is a hint; the task's own state is what matters
        for job in jobs:
            full = job.get("full") or job
            if full.get("jobId") == self.job_id or full.get("entityId") == self.id:
                return full.get("waitReason")
        return None

    def _wait(self, done: Callable[[Task], bool], what: str, timeout: float | None,
              interval: float, on_update: Callable[[Task], None] | None) -> Task:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self.reload()
            if on_update is not None:
                on_update(self)
            if done(self):
                return self
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(f"{self.key} {self.id} is still {self.state} after {timeout:g} s "
                                  f"(waiting until it {what})")
            time.sleep(interval)

    def wait_running(self, timeout: float | None = None, interval: float = 0.5,
                     on_update: Callable[[Task], None] | None = None) -> Task:
        """Poll until it runs (for a notebook: until JupyterLab answers). A task that ends
        first is returned as it ended (check ``state``); ``WaitTimeout`` after ``timeout``."""
        return self._wait(lambda t: t.state in ("RUNNING", *TASK_ENDED), "runs", timeout,
                          interval, on_update)

    def wait_ended(self, timeout: float | None = None, interval: float = 0.5,
                   on_update: Callable[[Task], None] | None = None) -> Task:
        """Poll until it has ended and its exit status is recorded."""
        return self._wait(lambda t: t.state in TASK_ENDED and t.exit_status is not None, "ends",
                          timeout, interval, on_update)

    def logs(self, follow: bool = False) -> Iterator[str]:
        """Its log lines (without the newline); with ``follow`` until it ends."""
        params = {"follow": "true"} if follow else None
        for entry in self._session.stream(f"/api/v1/tasks/{self.id}/logs", params,
                                          timeout=None if follow else 120):
            yield str(entry.get("message") or entry.get("log") or "").rstrip("\n")


class Command(Task):
    """A command (``det cmd run``)."""


class Notebook(Task):
    """A notebook: JupyterLab as a task, reached through the master at ``url``."""

    kind = "notebooks"
    key = "notebook"

    @property
    def ticket(self) -> str | None:
        """The browser credential for this notebook only (from the last ``reload()``)."""
        return self._body.get("ticket")

    @property
    def service_address(self) -> str:
        return str(self._data.get("serviceAddress") or f"/proxy/{self.id}/")

    @property
    def proxy_url(self) -> str | None:
        """Its absolute address on the proxy's own origin (``proxyUrl``; None from a master
        that serves the proxy on its own origin)."""
        value = self._data.get("proxyUrl")
        return str(value) if value else None

    @property
    def url(self) -> str:
        """The link that opens JupyterLab in a browser: the ticket becomes a cookie there."""
        if self.ticket is None:
            self.reload()
        return notebook_url(self._session.master, self.id, self.ticket, self.proxy_url)

    @property
    def idle_timeout(self) -> float | None:
        return self._data.get("idleTimeout")


def notebook_url(master: str, task_id: str, ticket: str | None, proxy_url: str | None = None) -> str:
    """``<proxy_url>lab?det_ticket=<ticket>``: ``proxy_url`` is the master's ``proxyUrl`` for
    the task, on the proxy's own origin; without it ``<master>/proxy/<id>/``, which the master
    redirects there."""
    return task_link(proxy_url or f"{master.rstrip('/')}/proxy/{task_id}/", "lab", ticket)


def task_link(base: str, page: str, ticket: str | None) -> str:
    """``<base>/<page>?det_ticket=<ticket>`` (the ticket percent-encoded)."""
    url = f"{base.rstrip('/')}/{page}"
    return f"{url}?det_ticket={quote(ticket, safe='')}" if ticket else url


def _users(users: Iterable[str]) -> dict[str, Any]:
    wanted = list(users)
    return {"users": wanted} if wanted else {}


class TaskMethods:
    """What ``Determined`` can do with notebooks and commands (mixed into it)."""

    _session: Session

    def _launch(self, cls: type[Task], config: dict[str, Any],
                context: str | os.PathLike | None, includes: Iterable[str | os.PathLike],
                template: str | None = None) -> Task:
        from ._client import context_files

        if not isinstance(config, dict):
            raise InvalidInput(f"a task config must be a mapping, not {type(config).__name__}")
        request: dict[str, Any] = {"config": config, "files": context_files(context, includes)}
        if template:
            request["templateName"] = template  # merged into config by the master
        body = self._session.post(f"/api/v1/{cls.kind}", request)
        task = cls(self._session, body[cls.key]["id"], body[cls.key])
        task._body = body
        task.launch_warnings = [str(w) for w in body.get("warnings") or []]
        return task

    def launch_notebook(self, config: dict[str, Any] | None = None,
                        context: str | os.PathLike | None = None, *,
                        includes: Iterable[str | os.PathLike] = (),
                        template: str | None = None) -> Notebook:
        """Start JupyterLab as a task. ``config``: Determined's notebook keys
        (``resources.slots``/``resource_pool``/``priority``, ``environment.environment_variables``,
        ``idle_timeout``, ``notebook_idle_type``, ``work_dir``, ``description``); ``context``
        a directory uploaded into its working directory; ``template`` a config template
        merged into ``config`` by the master."""
        return cast(Notebook, self._launch(Notebook, dict(config or {}), context, includes, template))

    def launch_command(self, entrypoint: str | list[str], config: dict[str, Any] | None = None,
                       context: str | os.PathLike | None = None, *,
                       includes: Iterable[str | os.PathLike] = (),
                       template: str | None = None) -> Command:
        """Run ``entrypoint`` (a shell line, or an argv list) on the cluster, in ``context``'s
        files; ``config`` as a notebook's (``resources``, ``environment``, ``description``)."""
        cfg = dict(config or {})
        cfg["entrypoint"] = [entrypoint] if isinstance(entrypoint, str) else list(entrypoint)
        return cast(Command, self._launch(Command, cfg, context, includes, template))

    def get_notebook(self, task_id: str) -> Notebook:
        """The notebook; ``NotFound`` if there is none (or it is not yours)."""
        return Notebook(self._session, task_id)

    def get_command(self, task_id: str) -> Command:
        return Command(self._session, task_id)

    def list_notebooks(self, users: Iterable[str] = ()) -> list[Notebook]:
        """Notebooks you may see (an admin: everyone's), oldest first; ``users`` narrows."""
        body = self._session.get("/api/v1/notebooks", **_users(users))
        return [Notebook(self._session, n["id"], n) for n in body.get("notebooks") or []]

    def list_commands(self, users: Iterable[str] = ()) -> list[Command]:
        body = self._session.get("/api/v1/commands", **_users(users))
        return [Command(self._session, c["id"], c) for c in body.get("commands") or []]
