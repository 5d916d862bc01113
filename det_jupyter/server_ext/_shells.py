"""/api/v1/shells (``det shell start|list|open|kill|set priority``) and the shells' tunnel.

A shell is a task running an SSH server; nobody reaches it but through
``/det-jupyter/tunnel/{taskId}``: a websocket whose binary frames the master relays to and from
a TCP connection to the shell's own address (recorded when it was placed, never taken from the
request). ``det shell tunnel`` — the ``ProxyCommand`` of the ssh command ``det shell open``
runs — is its client. Who gets through: the shell's owner (or an admin), by a det session token
(``Authorization: Bearer``) or the task's ticket (``det_ticket``); anyone else gets the same 404
as for a shell that does not exist. The private key of ``v1Shell.privateKey`` is in responses to
the owner only.

Unlike Determined, whose shell tunnel needs no det credentials (the SSH key is the only
lock), the tunnel is the owner's alone: the stock CLI's unauthenticated
``python -m determined.cli.tunnel`` is refused (404); use this package's ``det shell open``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from tornado import ioloop, iostream, tcpclient, websocket

from ..errors import DetError, NotFound
from ..services.access.authz import Perm
from ..services.accounts.auth import User
from ..services.interactive.ssh import PUBLIC_KEY, public_config, ssh_username
from ._api import api, users
from ._base import CONTEXT_HINT, MAX_BODY, DetHandler
from ._commands import command_json
from ._notebooks import kill_proxied, launch_request, launch_warnings, listed, set_proxied_priority
from ._wire import LAUNCH, PRIORITY

log = logging.getLogger("det_jupyter.tunnel")

KIND = "SHELL"
TICKET_PARAM = "det_ticket"
_CHUNK = 64 * 1024
#: Seconds between "in use" marks while a tunnel is open: a connected session is not idle.
TOUCH_INTERVAL = 2.0


def owners_key(handler: DetHandler, row: Any) -> str | None:
    """The shell's private key, opened (it is stored sealed), when the caller is its owner;
    None for anyone else, admins included."""
    return handler.master.commands.private_key(row) if handler.user.id == row.owner_id else None


def shell_json(row: Any, ready: bool, private_key: str | None) -> dict[str, Any]:
    """A ``v1Shell``: a command's fields, its keys (``private_key``: what ``owners_key`` gave,
    None outside its owner's own requests), and whether its SSH server answers yet."""
    out = command_json(row)
    if out["state"] == "STATE_RUNNING" and not ready:
        out["state"] = "STATE_STARTING"  # placed, the SSH server not answering yet
    if row.end_time is not None and (row.exit_reason or "").startswith("culled"):
        out["exitStatus"] = row.exit_reason
    cfg = row.config or {}
    out["publicKey"] = cfg.get(PUBLIC_KEY, "")
    if private_key is not None:
        out["privateKey"] = private_key
    out["idleTimeout"] = cfg.get("idle_timeout")
    # The stock CLI's ssh command logs in as this user; the task's sshd takes any name.
    out["agentUserGroup"] = {"user": ssh_username(row.username)}
    return out


class ShellsHandler(DetHandler):
    max_body = MAX_BODY
    too_large_hint = CONTEXT_HINT
    permissions = {"GET": Perm.VIEW_NSC, "POST": Perm.CREATE_NSC}

    @api(query=[users()])
    def get(self) -> None:
        rows = listed(self, KIND)
        ready = self.master.notebooks.ready
        # Listings never carry private keys, not even the caller's own: GET one shell for it.
        self.send({"shells": [shell_json(r, r.task_id in ready, None) for r in rows]})

    @api(body=LAUNCH, errors=(503,))
    def post(self) -> None:
        config, files, workspace = launch_request(self, "the shell's")
        row = self.master.commands.launch(self.user, config, files, kind=KIND, workspace_id=workspace)
        warnings = launch_warnings(self, row)
        self.send({"shell": shell_json(row, False, owners_key(self, row)),
                   "config": public_config(row.config), "warnings": warnings})


class ShellHandler(DetHandler):
    permissions = {"GET": Perm.VIEW_NSC}

    @api(errors=(503,))
    def get(self, task_id: str) -> None:
        self.authorize_task(task_id)
        row = self.master.notebooks.visible(self.user, task_id, KIND)
        ready = task_id in self.master.notebooks.ready
        self.send({"shell": shell_json(row, ready, owners_key(self, row)),
                   "config": public_config(row.config)})


class ShellKillHandler(DetHandler):
    permissions = {"POST": Perm.UPDATE_NSC}

    @api(errors=(503,))
    def post(self, task_id: str) -> None:
        row = kill_proxied(self, task_id, KIND)
        self.send({"shell": shell_json(row, False, owners_key(self, row))})


class ShellPriorityHandler(DetHandler):
    """``det shell set priority``: changes when it starts; once running it is not preempted."""

    permissions = {"POST": Perm.UPDATE_NSC}

    @api(body=PRIORITY, errors=(503,))
    def post(self, task_id: str) -> None:
        row = set_proxied_priority(self, task_id, KIND)
        ready = task_id in self.master.notebooks.ready
        self.send({"shell": shell_json(row, ready, owners_key(self, row))})


class ShellTunnelHandler(websocket.WebSocketHandler):
    """``/det-jupyter/tunnel/{taskId}``: websocket binary frames ↔ the shell's TCP port."""

    permissions = {"GET": Perm.UPDATE_NSC}  # checked by NotebookService.visible

    _stream: iostream.IOStream | None = None
    _touch: ioloop.PeriodicCallback | None = None

    @property
    def master(self) -> Any:
        return self.settings["det_master"]

    def check_xsrf_cookie(self) -> None:
        return None  # credentials are a header or the ticket, never a cookie

    def _user(self, task_id: str) -> User | None:
        scheme, _, token = self.request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            try:
                return self.master.auth.user_for_token(token.strip())
            except DetError:
                return None
        ticket = self.get_query_argument(TICKET_PARAM, None)
        return self.master.notebooks.user_for_ticket(task_id, ticket) if ticket else None

    def _refuse(self, code: int, message: str) -> None:
        self.set_status(code)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"message": message, "code": code}))

    async def get(self, task_id: str) -> None:  # type: ignore[override]
        user = self._user(task_id)
        try:
            if user is None:
                raise NotFound("no user")
            row = self.master.notebooks.visible(user, task_id, KIND)
        except DetError:
            self._refuse(404, f"shell {task_id} not found; det shell list shows yours")
            return
        if self.request.headers.get("Upgrade", "").lower() != "websocket":
            self._refuse(400, f"shell {task_id} speaks SSH over a websocket: det shell open "
                              f"{task_id}")
            return
        target = self.master.notebooks.target_of(row)
        if target is None:
            self._refuse(503, f"shell {task_id} is not running yet (det shell list shows its state)")
            return
        host, _, port = target.address.rpartition(":")
        try:
            self._stream = await tcpclient.TCPClient().connect(host, int(port), timeout=10)
        except (OSError, ValueError, iostream.StreamClosedError) as exc:  # TimeoutError is an OSError
            log.info("tunnel to %s failed: %s", task_id, exc)
            self._refuse(502, f"shell {task_id} refused the connection; try again")
            return
        self._stream.set_nodelay(True)
        self._task_id = task_id
        self.master.notebooks.touched(task_id)
        await super().get(task_id)
        if self.ws_connection is None and self._stream is not None:  # the handshake failed
            self._stream.close()
            self._stream = None

    def open(self, *args: Any, **kwargs: Any) -> None:
        self.set_nodelay(True)
        self._touch = ioloop.PeriodicCallback(
            lambda: self.master.notebooks.touched(self._task_id), TOUCH_INTERVAL * 1000)
        self._touch.start()
        ioloop.IOLoop.current().spawn_callback(self._from_shell)

    async def _from_shell(self) -> None:
        stream = self._stream
        try:
            while stream is not None:
                data = await stream.read_bytes(_CHUNK, partial=True)
                await self.write_message(data, binary=True)  # waits: the client sets the pace
        except (iostream.StreamClosedError, websocket.WebSocketClosedError):
            pass
        self.close()

    async def on_message(self, message: str | bytes) -> None:
        if self._stream is None:
            return
        self.master.notebooks.touched(self._task_id)
        try:
            await self._stream.write(message.encode() if isinstance(message, str) else message)
        except iostream.StreamClosedError:
            self.close()

    def on_close(self) -> None:
        if self._touch is not None:
            self._touch.stop()
            self._touch = None
        if self._stream is not None:
            self._stream.close()
            self._stream = None
