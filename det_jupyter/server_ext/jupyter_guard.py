"""A guard in front of Jupyter's own routes on the master (issue 25, "the API under hostile input").

The master runs inside a jupyter-server, whose routes (``/api/contents``, ``/api/kernels``,
``/login``, JupyterLab's pages, ``/det-jupyter/session``: every handler built on Jupyter's
``JupyterHandler``) carry Jupyter's own policy, which is too lax for a master:

- a token-authenticated request gets its ``Origin`` echoed in ``Access-Control-Allow-Origin``
  and skips the origin check altogether (``set_cors_headers``, ``skip_check_origin``);
- the origin check compares hosts only: ``https://host:port`` passes on ``http://host:port``;
- the trailing-slash handler turns ``/\\evil.com/`` into ``Location: /\\evil.com``, which
  browsers read as ``//evil.com``;
- the login page takes a ``next`` with CR/LF.

Nothing here forks Jupyter. ``install`` puts one routing rule ahead of every route, which
answers a request to a Jupyter route itself (403 for a foreign ``Origin``, 400 for a control
character in ``next``, 404 for a path the trailing-slash handler would send off-site) and lets
every other request through untouched; and one output transform, which replaces a Jupyter
route's redirect that leaves the request's origin with one to the base URL (as Jupyter's own
login does with a ``next`` it refuses) and drops an ``Access-Control-Allow-Origin`` naming an
origin not allowed. det's own routes (``/api/v1``, ``/proxy``, ``/agents``)
have their own origin policy and are left alone. ``modest_body_limits`` lowers the server's
512 MiB body limit, which Jupyter's unauthenticated ``POST /login`` buffered in full.

An origin is the request's scheme (``https`` only on a TLS listener, or from
``X-Forwarded-Proto``/``X-Scheme`` where ``ServerApp.trust_xheaders`` is set) with its
``Host``; the operator's ``ServerApp.allow_origin``/``allow_origin_pat`` add to it.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qs, urlsplit

from jupyter_server.utils import url_path_join
from tornado import httputil, web
from tornado.routing import Matcher, Rule

log = logging.getLogger("det_jupyter.jupyter_guard")

#: Jupyter's body limit (``ServerApp.max_body_size``/``max_buffer_size``) unless configured:
#: JupyterLab uploads a file over 15 MiB in 1 MiB pieces, one under that in one base64 PUT of
#: at most 20 MiB. det's own routes set their own limit per request (``_base.DetHandler``).
JUPYTER_MAX_BODY = 64 * 1024 * 1024
#: The body limit of Jupyter's ``POST /login`` (a password form), which takes no credential.
LOGIN_MAX_BODY = 64 * 1024

_DEFAULT_PORTS = {"http": 80, "https": 443}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
#: What a browser's URL parser strips: C0 controls and spaces at the ends, tab/LF/CR anywhere.
_C0_AND_SPACE = "".join(chr(c) for c in range(0x21))


# -- origins and redirect targets, as plain values -----------------------------------------------

def normalize_origin(value: str | None) -> str | None:
    """``scheme://host[:port]`` in lower case with the scheme's default port dropped; ``None``
    for anything else: ``null``, a path, user info, a scheme other than http(s), a bad port."""
    if not value or _CONTROL.search(value) or "\\" in value:
        return None
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if (scheme not in _DEFAULT_PORTS or not parts.hostname or parts.username is not None
            or parts.password is not None or parts.path or parts.query or parts.fragment
            or value.endswith(("?", "#")) or not value.lower().startswith(f"{scheme}://")):
        return None
    host = parts.hostname
    if ":" in host:
        host = f"[{host}]"
    elif not re.fullmatch(r"[a-z0-9_.-]+", host):
        return None
    return f"{scheme}://{host}" if port in (None, _DEFAULT_PORTS[scheme]) else f"{scheme}://{host}:{port}"


def request_origin(scheme: str, host: str | None) -> str | None:
    """The origin a request was sent to: its scheme and ``Host`` header (``None``: malformed)."""
    return normalize_origin(f"{scheme}://{host}") if host else None


def location_origin(location: str) -> str | None:
    """Where a browser takes a ``Location``: ``""`` for a place on the same origin (a path, a
    query, a fragment), the target's origin for an absolute URL, ``None`` for anything else
    (``//host``, ``/\\host``, ``javascript:``, ``http:host``, a control character)."""
    text = location.strip(_C0_AND_SPACE).replace("\t", "").replace("\n", "").replace("\r", "")
    if _CONTROL.search(text):
        return None
    text = text.replace("\\", "/")  # browsers read a backslash as a slash in http(s) URLs
    if text.startswith("//"):
        return None
    if not _SCHEME.match(text):
        return ""
    scheme, _, rest = text.partition(":")
    if not rest.startswith("//") or rest.startswith("///"):
        return None
    netloc = urlsplit(text).netloc
    return normalize_origin(f"{scheme}://{netloc}")


def trailing_slash_target(path: str) -> str:
    """The ``Location`` Jupyter's ``TrailingSlashHandler`` answers for ``path`` (its rule)."""
    return "/" + path.strip("/")


class OriginPolicy:
    """Which origins may call Jupyter's routes: the request's own, and what the operator
    allowed (``ServerApp.allow_origin``, ``"*"`` for any; ``allow_origin_pat``, matched at
    the start as Jupyter does)."""

    def __init__(self, allow_origin: str = "", allow_origin_pat: str = "") -> None:
        self.allow_origin = allow_origin
        try:
            self.pattern = re.compile(allow_origin_pat) if allow_origin_pat else None
        except re.error as exc:
            raise ValueError(f"allow_origin_pat={allow_origin_pat!r}: not a regular expression ({exc})") from None

    def allows(self, origin: str, own: str | None) -> bool:
        """Whether a request to origin ``own`` may come from ``origin`` (an ``Origin`` header)."""
        if self.allow_origin == "*":
            return True
        normal = normalize_origin(origin)
        if normal is not None and normal == own:
            return True
        if self.allow_origin:
            return origin.lower() == self.allow_origin.lower()
        return bool(self.pattern is not None and self.pattern.match(origin.lower()))

    def redirect_allowed(self, location: str, own: str | None) -> bool:
        """Whether a redirect to ``location`` stays on origin ``own`` or goes to an allowed one."""
        target = location_origin(location)
        if target is None:
            return False
        return target == "" or self.allows(target, own)


class Guard:
    """The decisions about one request to the master (pure: no side effects)."""

    def __init__(self, policy: OriginPolicy, exempt: Iterable[str], base_url: str = "/") -> None:
        """``exempt``: path patterns (as in a route table, joined to ``base_url``) of the routes
        this guard leaves alone."""
        patterns = [url_path_join(base_url, p) for p in exempt]
        self.policy = policy
        # Matched as tornado matches a route: from the start of the path, to its end.
        self.exempt = re.compile("(?:" + "|".join(f"(?:{p})" for p in patterns) + ")$" if patterns else r"(?!)")
        self.login_path = url_path_join(base_url, "login")

    def guards(self, request: httputil.HTTPServerRequest) -> bool:
        """Whether the request is for a route this guard covers (Jupyter's, not det's)."""
        return not self.exempt.match(request.path or "/")

    def body_limit(self, request: httputil.HTTPServerRequest) -> int | None:
        """A body limit below the server's for this request, or ``None``."""
        return LOGIN_MAX_BODY if request.path == self.login_path and self.guards(request) else None

    def refusal(self, request: httputil.HTTPServerRequest) -> tuple[int, str] | None:
        """``(status, message)`` when the request must not reach Jupyter's handler."""
        if not self.guards(request):
            return None
        nexts = parse_qs(request.query, keep_blank_values=True).get("next", [])
        if any(_CONTROL.search(value) for value in nexts):
            return 400, "the 'next' argument holds a control character (CR, LF, ...)"
        origin = request.headers.get("Origin")
        if origin is not None and not self.policy.allows(origin, self.own_origin(request)):
            return 403, "cross-origin request refused: the Origin is not this server's"
        path = request.path or "/"
        if path.endswith("/") and location_origin(trailing_slash_target(path)) != "":
            return 404, "no such page"
        return None

    @staticmethod
    def own_origin(request: httputil.HTTPServerRequest) -> str | None:
        return request_origin(request.protocol, request.headers.get("Host"))


# -- wiring into tornado -----------------------------------------------------------------------

class _GuardMatcher(Matcher):
    """Matches the requests ``Guard.refusal`` refuses, so that ``_RefusalHandler`` answers them.
    Tornado routes a request once its headers are in, before any body is read: the place to
    lower a route's body limit too."""

    def __init__(self, guard: Guard) -> None:
        self.guard = guard

    def match(self, request: httputil.HTTPServerRequest) -> dict[str, Any] | None:
        limit = self.guard.body_limit(request)
        conn = request.connection
        if limit is not None and conn is not None and hasattr(conn, "set_max_body_size"):
            conn.set_max_body_size(limit)
        return {} if self.guard.refusal(request) is not None else None


class _RefusalHandler(web.RequestHandler):
    """Answers a request the guard refused, as JSON, before Jupyter sees it (no CORS header)."""

    def initialize(self, guard: Guard) -> None:
        self.guard = guard

    def set_default_headers(self) -> None:
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")
        self.set_header("X-Content-Type-Options", "nosniff")

    def check_xsrf_cookie(self) -> None:
        """Nothing to check: the request is refused whatever it holds (tornado checks XSRF
        before ``prepare``, and would answer 403 for a missing ``_xsrf`` instead)."""

    def prepare(self) -> None:
        status, message = self.guard.refusal(self.request) or (400, "refused")
        if status == 403:  # as Jupyter logs its own refusals (the tests look for "Origin: …")
            log.warning("det-jupyter: blocking cross-origin request for %s. Origin: %s, Host: %s",
                        self.request.path, self.request.headers.get("Origin"), self.request.headers.get("Host"))
        self.set_status(status)
        self.finish(json.dumps({"message": message}))


class _ResponseTransform(web.OutputTransform):
    """On a guarded route's answer: replaces a redirect that would leave the request's origin
    (for one not allowed) with a redirect to the base URL, as Jupyter's login does for a refused
    ``next``, so that whatever a handler builds, the master never sends a browser off-site; and
    drops an ``Access-Control-Allow-Origin`` that names an origin not allowed."""

    def __init__(self, guard: Guard, base_url: str, request: httputil.HTTPServerRequest) -> None:
        self.guard = guard
        self.base_url = base_url
        self.request = request

    def transform_first_chunk(self, status_code: int, headers: httputil.HTTPHeaders, chunk: bytes,
                              finishing: bool) -> tuple[int, httputil.HTTPHeaders, bytes]:
        if not self.guard.guards(self.request):
            return status_code, headers, chunk
        own = Guard.own_origin(self.request)
        policy = self.guard.policy
        location = headers.get("Location")
        if location is not None and 300 <= status_code < 400 and not policy.redirect_allowed(location, own):
            log.warning("det-jupyter: a redirect of %s to %r would leave this server; sent to %s "
                        "instead", self.request.path, location, self.base_url)
            headers["Location"] = self.base_url
        # Jupyter echoes the request's Origin (an empty one too) to a token-authenticated
        # request: only an origin allowed here is ever named.
        allowed = headers.get("Access-Control-Allow-Origin")
        if allowed is not None and not policy.allows(allowed, own):
            del headers["Access-Control-Allow-Origin"]
        return status_code, headers, chunk


def install(web_app: web.Application, guard: Guard, base_url: str) -> None:
    """Put the guard's rule ahead of every route of ``web_app`` and its check on every
    response. Call it before the server starts (an extension's ``initialize_handlers``)."""
    router = web_app.default_router
    router.rules.insert(0, router.process_rule(Rule(_GuardMatcher(guard), _RefusalHandler, {"guard": guard})))
    # A transform is built per request as ``transform(request)``.
    web_app.transforms.append(functools.partial(_ResponseTransform, guard, base_url))  # type: ignore[arg-type]


def modest_body_limits(serverapp: Any) -> None:
    """Lower ``ServerApp.max_body_size``/``max_buffer_size`` (512 MiB) to ``JUPYTER_MAX_BODY``
    unless the operator configured them. The HTTP server is built from them after extensions
    load (``ServerApp.initialize``: ``load_server_extensions`` before ``init_httpserver``), so
    an extension's ``initialize_settings`` is early enough."""
    configured = serverapp.config.get("ServerApp", {})
    for name in ("max_body_size", "max_buffer_size"):
        if name not in configured:
            setattr(serverapp, name, min(getattr(serverapp, name), JUPYTER_MAX_BODY))
