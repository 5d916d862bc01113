"""``DetSpawner``: a hub user's server is a notebook task on a det master, scheduled like any.

The spawner calls the master's ``/api/v1/hub/servers`` with the user's server token (the master
verifies it through the hub, so the task is the user's own), passes the hub's variables in the
request body (never in argv; the master seals them and gives them to that task only), and
waits: in the queue for as long as it takes, streaming the wait reason and the queue position
to the hub's spawn page (``progress``), then at most ``det_start_timeout`` seconds for the
server to answer once placed. Its state (the task id, and the token to reach the master with)
survives a hub restart, so a running server is found again without a respawn.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any
from urllib.parse import quote

from jupyterhub.spawner import Spawner
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from traitlets import Dict, Integer, List, Unicode, default

ENDED = {"STATE_TERMINATED", "STATE_TERMINATING"}
#: Without ``det_start_timeout`` of its own, a hub gives ``start`` this long: the queue may hold
#: a spawn for hours, which is the point (jupyterhub#3095).
QUEUE_PATIENCE_S = 7 * 24 * 3600


class DetSpawner(Spawner):
    """Starts each hub user's server as a det notebook task (``c.JupyterHub.spawner_class =
    "det"``)."""

    master_url = Unicode(
        "", config=True, help="The det master's URL, e.g. http://det-master:8080 (required).")
    resource_pool = Unicode("", config=True, help="The pool servers run in (empty: the master's default).")
    slots = Integer(0, config=True, help="Slots (GPUs) each server gets; 0: a CPU-only server.")
    priority = Integer(None, allow_none=True, config=True, help="The servers' priority (1-99; none: the pool's default).")
    workspace_id = Integer(1, config=True, help="The det workspace servers are launched into.")
    image = Unicode("", config=True, help="environment.image of the servers (empty: processes on the agents).")
    notebook_config = Dict(
        config=True, help="More of a det notebook config, merged under the choices above "
        "(environment, bind_mounts, resources, idle_timeout...).")
    profiles = List(
        Dict(), config=True,
        help="Choices on the spawn form, like KubeSpawner's profile_list: [{display_name, slug, "
        "description, config: {<det notebook config>}}]; the first is the default.")
    det_start_timeout = Integer(
        300, config=True, help="Seconds a server may take to answer once the master placed it "
        "(time waiting in the queue does not count).")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        user = getattr(self, "user", None)
        hubs_name: Any = getattr(self, "oauth_client_id", None)
        if user is not None and hubs_name:
            # The hub names a server's OAuth client "jupyterhub-user-<user>[-<server>]", the
            # same for a-b/c and a/b-c (the second spawn then fails inside the hub): ours
            # escapes the dash, so every (user, server) pair gets a name of its own.
            self.oauth_client_id = oauth_client_id(user.name, self.name or "")

    @default("start_timeout")
    def _start_timeout_default(self) -> int:
        return QUEUE_PATIENCE_S

    @default("options_form")
    def _options_form_default(self) -> str:
        if len(self.profiles) < 2:
            return ""
        items = []
        for i, p in enumerate(self.profiles):
            slug = _attr(p.get("slug") or str(i))
            checked = " checked" if i == 0 else ""
            items.append(f'<label><input type="radio" name="profile" value="{slug}"{checked}> '
                         f'{_html(p.get("display_name") or slug)}</label>'
                         f'<p>{_html(p.get("description") or "")}</p>')
        return "\n".join(items)

    def options_from_form(self, formdata: dict[str, list[str]]) -> dict[str, Any]:
        return {"profile": (formdata.get("profile") or [""])[0]}

    # -- state --------------------------------------------------------------------------

    task_id: str | None = None
    _latest: dict[str, Any] | None = None  # the server as last read (progress shows it)

    def get_state(self) -> dict[str, Any]:
        state = super().get_state()
        if self.task_id:
            state["det_task_id"] = self.task_id
            state["det_token"] = self.api_token  # a hub restart does not keep the server's token
            state["det_client_id"] = self.oauth_client_id  # the one the running server knows
        return state

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        self.task_id = state.get("det_task_id") or None
        if state.get("det_token") and not getattr(self, "api_token", ""):
            self.api_token = state["det_token"]
        if state.get("det_client_id"):
            self.oauth_client_id = state["det_client_id"]

    def clear_state(self) -> None:
        super().clear_state()
        self.task_id = None
        self._latest = None

    # -- the master ---------------------------------------------------------------------

    async def _api(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        if not self.master_url:
            raise RuntimeError("DetSpawner.master_url is not set: give the det master's URL")
        request = HTTPRequest(
            self.master_url.rstrip("/") + path, method=method,
            headers={"Authorization": f"token {self.api_token}", "Content-Type": "application/json"},
            body=None if body is None else json.dumps(body), request_timeout=30, connect_timeout=10)
        try:
            resp = await AsyncHTTPClient().fetch(request)
        except HTTPClientError as e:
            detail = ""
            if e.response is not None and e.response.body:
                try:
                    detail = json.loads(e.response.body).get("message") or ""
                except ValueError:
                    detail = e.response.body[:200].decode(errors="replace")
            raise DetError(e.code, detail or str(e)) from None
        return json.loads(resp.body) if resp.body else {}

    def _config(self) -> dict[str, Any]:
        """The notebook config: ``notebook_config``, the chosen profile's, then the traits."""
        cfg = json.loads(json.dumps(self.notebook_config))  # a deep copy
        chosen = (self.user_options or {}).get("profile")
        profile = next((p for p in self.profiles if (p.get("slug") or "") == chosen),
                       self.profiles[0] if self.profiles else None)
        if profile:
            _merge(cfg, profile.get("config") or {})
        res = cfg.setdefault("resources", {})
        res.setdefault("slots", self.slots)
        if self.resource_pool:
            res.setdefault("resource_pool", self.resource_pool)
        if self.priority is not None:
            res.setdefault("priority", self.priority)
        if self.image:
            cfg.setdefault("environment", {}).setdefault("image", self.image)
        cfg.setdefault("description", f"JupyterHub server of {self.user.name}")
        return cfg

    async def _read_task(self) -> dict[str, Any] | None:
        """The server as the master sees it now; None when the master no longer has it."""
        try:
            server = (await self._api("GET", f"/api/v1/hub/servers/{self.task_id}"))["server"]
        except DetError as e:
            if e.code in (404, 401, 403):
                return None
            raise
        self._latest = server
        return server

    # -- the Spawner API ----------------------------------------------------------------

    async def start(self) -> str:
        env = self.get_env()
        body = {"config": self._config(), "prefix": self.server.base_url, "env": env,
                "workspaceId": self.workspace_id}
        created = (await self._api("POST", "/api/v1/hub/servers", body))["server"]
        self.task_id = created["id"]
        self._latest = created
        placed_at: float | None = None
        while True:
            server = await self._read_task()
            if server is None or server["state"] in ENDED:
                why = (server or {}).get("exitStatus") or "the det task is gone"
                raise RuntimeError(f"the server's det task {self.task_id} ended before it answered: {why}")
            if server["state"] not in ("STATE_QUEUED",) and placed_at is None:
                placed_at = time.monotonic()
            if server["state"] == "STATE_RUNNING" and server.get("url"):
                return str(server["url"])
            if placed_at is not None and time.monotonic() - placed_at > self.det_start_timeout:
                await self._kill()
                raise TimeoutError(f"the server's det task {self.task_id} did not answer within "
                                   f"{self.det_start_timeout} s of being placed")
            # Once placed the server answers within seconds: look often then (not in the queue).
            await asyncio.sleep(1.0 if placed_at is None else 0.1)

    async def progress(self) -> Any:
        last = None
        while True:
            server = self._latest or {}
            state = server.get("state")
            if state == "STATE_QUEUED":
                ahead = server.get("jobsAhead")
                why = server.get("waitReason") or "waiting for the scheduler"
                message = f"Queued on the det cluster: {why}" + (
                    f" ({ahead} job{'s' if ahead != 1 else ''} ahead)" if isinstance(ahead, int) else "")
                event = {"progress": 10, "message": message}
            elif state == "STATE_PULLING":
                event = {"progress": 40, "message": "Pulling the server's image"}
            elif state in ("STATE_STARTING", "STATE_RUNNING"):
                event = {"progress": 70, "message": f"Placed by the det master (task {self.task_id}); starting"}
            else:
                event = {"progress": 5, "message": "Submitting the server to the det master"}
            if event != last:
                yield event
                last = event
            await asyncio.sleep(1.0)

    async def poll(self) -> int | None:
        if not self.task_id:
            return 0
        try:
            server = await self._read_task()
        except (DetError, OSError):
            return None  # the master is unreachable: do not report a running server dead
        if server is None:
            return 0
        if server["state"] in ENDED:
            code = server.get("exitCode")
            return int(code) if isinstance(code, int) and code != 0 else 0
        return None

    async def stop(self, now: bool = False) -> None:
        if not self.task_id:
            return
        await self._kill()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            server = await self._read_task()
            if server is None or server["state"] == "STATE_TERMINATED":
                return
            await asyncio.sleep(0.5)

    async def _kill(self) -> None:
        try:
            await self._api("POST", f"/api/v1/notebooks/{self.task_id}/kill", {})
        except DetError as e:
            if e.code != 404:
                raise


class DetError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"det master answered {code}: {message}")
        self.code = code


def oauth_client_id(user: str, server: str = "") -> str:
    """A server's OAuth client name, distinct for every (user, server) pair: the parts are
    percent-encoded with ``-`` encoded too, so the dash between them is never ambiguous (and
    the name is still a valid cookie name, which the hub makes of it)."""
    def part(text: str) -> str:
        return quote(text, safe="").replace("-", "%2D")

    return f"jupyterhub-user-{part(user)}" + (f"-{part(server)}" if server else "")


def _merge(into: dict[str, Any], more: dict[str, Any]) -> None:
    for key, value in more.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _attr(text: str) -> str:
    return _html(text).replace('"', "&quot;")
