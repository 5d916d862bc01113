"""Signing in to the master through JupyterHub (browsers; single sign-on with whatever
authenticator the hub uses). The master is the hub's OAuth client: its service (``service-<name>``)
registers ``oauth_redirect_uri`` = ``<master>/det-jupyter/hub/oauth_callback``.

``GET /det-jupyter/hub/login?next=<path>`` sends the browser to the hub's authorize page with a
random ``state``, kept with ``next`` in a signed, HttpOnly cookie for ten minutes. The hub sends
it back to ``/det-jupyter/hub/oauth_callback?code=…&state=…``; the code is traded for a hub
token, whose owner is the det user of the same name (``services.accounts.hub``). Then:

- ``next`` is a ``/proxy/<task>/…`` path: the browser goes there with the task's ticket
  (``det_ticket``), which the proxy's origin trades for its cookie, if the user may open the
  task; anyone else gets the proxy's 404. The master's ``/proxy/…`` sends a browser with no
  credential here first, so a det notebook or TensorBoard link just works in a hub user's
  browser.
- any other ``next`` (the master's JupyterLab): an admin gets Jupyter's login cookie, holding a
  det session (``_identity``); others are told why not, as the login form tells them.
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets
from typing import Any
from urllib.parse import urlencode

from jupyter_server.auth.decorator import allow_unauthenticated
from jupyter_server.base.handlers import JupyterHandler
from tornado import web
from tornado.escape import xhtml_escape

from ..errors import DetError
from ._identity import NOT_ADMIN, DetUser

log = logging.getLogger("det_jupyter")

STATE_COOKIE = "det-hub-oauth"
STATE_MAX_AGE_DAYS = 10 / (24 * 60)  # ten minutes
_PAGE = ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>det-jupyter: sign-in</title>'
         '</head><body><main style="max-width:32rem;margin:12vh auto;font-family:system-ui,sans-serif">'
         '<h1>det-jupyter</h1><p id="hub-signin-message">{message}</p></main></body></html>')


def proxy_task(path: str) -> str | None:
    """The task id of a ``/proxy/<task>/…`` path, else None."""
    if not path.startswith("/proxy/"):
        return None
    task = path[len("/proxy/"):].split("/", 1)[0].split("?", 1)[0]
    return task or None


def safe_next(value: str | None, default: str) -> str:
    """``value`` when it is a path on this server (never another host), else ``default``."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return default
    return value


class _HubPage:
    """What both pages share (mixed into a tornado handler)."""

    public = True
    settings: dict[str, Any]
    request: Any

    @property
    def base(self) -> str:
        return str(self.settings.get("base_url", "/"))

    @property
    def hub(self) -> Any:
        hub = getattr(self.settings.get("det_master"), "hub_auth", None)
        if hub is None:
            raise web.HTTPError(404, "this master serves no JupyterHub (start it with --hub-api-url)")
        return hub

    def callback_url(self) -> str:
        configured = str(self.hub.oauth.callback_url or "")
        if configured:
            return configured
        return f"{self.request.protocol}://{self.request.host}{self.base}det-jupyter/hub/oauth_callback"

    def page(self, status: int, message: str) -> None:
        handler: Any = self
        handler.set_status(status)
        handler.set_header("Content-Type", "text/html; charset=utf-8")
        handler.set_header("Cache-Control", "no-store")
        handler.finish(_PAGE.format(message=xhtml_escape(message)))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        message = exc.log_message if isinstance(exc, web.HTTPError) and exc.log_message else "sign-in failed"
        handler: Any = self
        handler.set_header("Content-Type", "text/html; charset=utf-8")
        handler.finish(_PAGE.format(message=xhtml_escape(message)))


class HubLoginHandler(_HubPage, web.RequestHandler):
    """``GET /det-jupyter/hub/login?next=<path>``: off to the hub to sign in. A plain tornado
    handler, not Jupyter's: its one redirect leaves the master on purpose, for the hub (the
    guard of Jupyter's routes, ``jupyter_guard``, keeps theirs on site)."""

    def get(self) -> None:
        hub = self.hub
        state = secrets.token_urlsafe(24)
        target = safe_next(self.get_argument("next", None), f"{self.base}lab")
        self.set_signed_cookie(STATE_COOKIE, json.dumps({"state": state, "next": target}),
                               expires_days=STATE_MAX_AGE_DAYS, httponly=True, samesite="Lax",
                               path=f"{self.base}det-jupyter/hub/")
        self.set_header("Cache-Control", "no-store")
        self.redirect(hub.authorize_url(self.callback_url(), state))


class HubCallbackHandler(_HubPage, JupyterHandler):
    """``GET /det-jupyter/hub/oauth_callback?code=…&state=…``: back from the hub, signed in."""

    @allow_unauthenticated
    async def get(self) -> None:
        hub = self.hub
        raw = self.get_signed_cookie(STATE_COOKIE, max_age_days=STATE_MAX_AGE_DAYS)
        self.clear_cookie(STATE_COOKIE, path=f"{self.base}det-jupyter/hub/")
        try:
            kept = json.loads(raw) if raw else {}
        except ValueError:
            kept = {}
        state = self.get_argument("state", "")
        if not kept or not state or not hmac.compare_digest(str(kept.get("state", "")), state):
            self.page(400, "This sign-in link is stale or was not started here; sign in again "
                           f"from {self.base}det-jupyter/hub/login.")
            return
        code = self.get_argument("code", "")
        if not code:
            self.page(400, "JupyterHub sent no authorization code; sign in again.")
            return
        try:
            user = await hub.user_for_code(code, self.callback_url())
        except DetError as exc:
            self.page(exc.status, str(exc))
            return
        target = safe_next(kept.get("next"), f"{self.base}lab")
        master = self.settings["det_master"]
        task = proxy_task(target[len(self.base) - 1:] if target.startswith(self.base) else target)
        if task is not None:
            try:
                ticket = master.notebooks.ticket(user, task, None)
            except DetError:
                self.page(404, "notebook not found; det notebook list shows yours")
                return
            sep = "&" if "?" in target else "?"
            self.set_header("Cache-Control", "no-store")
            self.redirect(f"{target}{sep}{urlencode({'det_ticket': ticket})}")
            return
        if not user.admin:
            self.page(403, f"Signed in through JupyterHub as {user.username}. {NOT_ADMIN}")
            return
        token = master.auth.session_for(user.username)
        signed_in = DetUser(username=user.username, name=user.username, display_name=user.username)
        signed_in.det_token = token
        self.identity_provider.set_login_cookie(self, signed_in)
        log.info("det-jupyter: %r signed in to JupyterLab through JupyterHub", user.username)
        self.set_header("Cache-Control", "no-store")
        self.redirect(target)
