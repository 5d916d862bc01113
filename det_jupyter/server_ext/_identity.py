"""Jupyter's login with det credentials (``det-jupyter up``): one identity for the whole server.

``DetIdentityProvider`` (``ServerApp.identity_provider_class``) makes Jupyter's ``/login`` page
ask for a det user name and password. Only admins get in: the server's kernels and terminals
run as the master's own OS account, with its data dir and database in reach, so a Lab session
is an admin's power whatever the det user (other users run ``det notebook start``). A good pair opens a det session (as ``POST
/api/v1/auth/login`` does) whose token rides in Jupyter's signed, HTTP-only login cookie: the
JupyterLab session *is* that det user, and the sidebar's ``POST /det-jupyter/session``
(``_lab.LabSessionHandler``) hands the same session to the page. Every request re-checks the
session (cached by ``AuthService.user_for_token``): a logout, an expiry or a deactivation ends
the Lab session too. Jupyter's own token still works (typed in the password field with no user
name, or ``?token=``), for tools such as ``jupyter server list``; nobody needs to look for it,
and the log never shows it (``app._RedactUrlSecrets``).
"""

from __future__ import annotations

import hmac
import json
from typing import Any

from jupyter_server.auth.identity import IdentityProvider, User
from jupyter_server.auth.login import LoginFormHandler
from tornado import web
from tornado.escape import url_escape, xhtml_escape
from traitlets import default

from ..errors import DetError

#: The cookie's field holding the det session token (absent for Jupyter-token users).
_DET_TOKEN = "det_token"
NOT_ADMIN = (
    "Only admins log in here: this JupyterLab runs code as the master's own account. "
    "Start a notebook of your own on the cluster instead: det notebook start"
)


class DetUser(User):
    """A Jupyter user who logged in with det credentials; ``det_token`` is their det session."""

    det_token: str = ""


def det_session(user: Any) -> tuple[str, str] | None:
    """``(username, det session token)`` of a Jupyter user who logged in as a det user."""
    if isinstance(user, DetUser) and user.det_token:
        return user.username, user.det_token
    return None


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>det-jupyter: log in</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body {{ font-family: system-ui, sans-serif; background: #f5f5f5; margin: 0; }}
main {{ max-width: 22rem; margin: 12vh auto; background: #fff; padding: 2rem;
        border-radius: 6px; box-shadow: 0 1px 4px rgba(0,0,0,.15); }}
h1 {{ font-size: 1.3rem; margin: 0 0 1.2rem; }}
label {{ display: block; margin: .8rem 0 .3rem; font-size: .9rem; }}
input {{ width: 100%; box-sizing: border-box; padding: .5rem; font-size: 1rem; }}
button {{ margin-top: 1.2rem; width: 100%; padding: .6rem; font-size: 1rem; }}
.error {{ color: #b00020; margin-top: 1rem; }}
.hint {{ color: #555; font-size: .85rem; margin-top: 1.2rem; }}
</style></head>
<body><main>
<h1>det-jupyter</h1>
<form action="{action}" method="post" id="det-login">
{xsrf}
<label for="username_input">det user name</label>
<input name="username" id="username_input" autocomplete="username" value="{username}" autofocus>
<label for="password_input">password</label>
<input type="password" name="password" id="password_input" autocomplete="current-password">
<button type="submit" id="login_submit">Log in</button>
</form>
{hub}
{message}
<p class="hint">An admin of this master (<code>det user list</code>). The first start created
<code>admin</code> with the password in <code>&lt;data dir&gt;/admin_password</code>.
Jupyter's own token works too, in the password field with no user name.</p>
</main></body></html>
"""


class DetLoginHandler(LoginFormHandler):
    """Jupyter's login form, with a det user name beside the password."""

    def _render(self, message: dict[str, str] | None = None) -> None:
        next_url = self.get_argument("next", default=self.base_url)
        error = getattr(self, "_det_login_error", None) or (message or {}).get("error")
        self.write(
            _PAGE.format(
                action=xhtml_escape(f"{self.base_url}login?next={url_escape(next_url)}"),
                xsrf=self.xsrf_form_html(),
                username=xhtml_escape(self.get_argument("username", default="")),
                hub=self._hub_link(next_url),
                message=f'<p class="error" id="login_error">{xhtml_escape(error)}</p>'
                if error
                else "",
            )
        )


    def _hub_link(self, next_url: str) -> str:
        """Where the master serves a JupyterHub's users: a link to sign in through the hub."""
        if getattr(self.settings.get("det_master"), "hub_auth", None) is None:
            return ""
        href = f"{self.base_url}det-jupyter/hub/login?next={url_escape(next_url)}"
        return (f'<p><a id="hub_login" href="{xhtml_escape(href)}">Sign in with JupyterHub</a> '
                "(an admin of the hub)</p>")


class DetIdentityProvider(IdentityProvider):
    """Jupyter users are det users (see the module's doc)."""

    @default("login_handler_class")
    def _default_login_handler_class(self) -> type[web.RequestHandler]:
        return DetLoginHandler

    @property
    def login_available(self) -> bool:
        return True

    def process_login_form(self, handler: web.RequestHandler) -> User | None:
        username = handler.get_argument("username", default="").strip()
        if not username:  # a Jupyter token in the password field (the base class's own check
            typed = handler.get_argument("password", default="")  # calls a method it lacks)
            if self.token and hmac.compare_digest(self.token.encode(), typed.encode()):
                return self.generate_anonymous_user(handler)
            return None
        password = handler.get_argument("password", default="")
        master = handler.settings.get("det_master")
        if master is None:
            return None
        try:
            token, user = master.auth.login(username, password, False)
        except DetError as exc:
            self.log.info("det-jupyter: Jupyter login as %r refused (%s)", username, exc)
            return None
        if not user.admin:
            # This JupyterLab's kernels and terminals run as the master's own OS account (its
            # data dir, its database): only admins may have them. Others get notebooks of
            # their own on the cluster.
            master.auth.logout(token)
            self.log.info("det-jupyter: Jupyter login as %r refused (not an admin)", username)
            handler._det_login_error = NOT_ADMIN  # type: ignore[attr-defined]
            return None
        return self._user(user.username, token)

    def _user(self, username: str, token: str) -> DetUser:
        user = DetUser(username=username, name=username, display_name=username)
        user.det_token = token
        return user

    def user_to_cookie(self, user: User) -> str:
        session = det_session(user)
        if session is None:
            return super().user_to_cookie(user)
        return json.dumps({"username": session[0], _DET_TOKEN: session[1]})

    def user_from_cookie(self, cookie_value: str) -> User | None:
        data = json.loads(cookie_value)
        if _DET_TOKEN not in data:
            return super().user_from_cookie(cookie_value)
        return self._user(data["username"], data[_DET_TOKEN])

    def get_user_cookie(self, handler: web.RequestHandler) -> Any:
        user = super().get_user_cookie(handler)
        session = det_session(user)
        if session is None:
            return user
        master = handler.settings.get("det_master")
        try:  # the det session must still be good: logged out, expired, deactivated, no longer
            if master is None:  # an admin -> the login page
                return None
            det_user = master.auth.user_for_token(session[1])
        except DetError:
            return None
        if det_user.username != session[0] or not det_user.admin:
            return None
        return user
