"""The base of every det route: authentication, JSON in and out, one error mapping.

det routes authenticate det credentials themselves — a session token in
``Authorization: Bearer``, or a task's allocation token in
``Grpc-Metadata-x-allocation-token: Bearer`` — and never cookies, so Jupyter's XSRF check
(which guards cookie sessions) does not apply to them and is skipped.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from typing import Any

from tornado import web

from ..composition_root import Master
from ..errors import DetError, Forbidden, InvalidRequest, NotFound, PayloadTooLarge, Unauthenticated
from ..services.access.authz import CLUSTER_ONLY, Grants, Perm
from ..services.access.resolver import Caller
from ..services.accounts.auth import AllocationPrincipal, User
from ._api import MAX_ID, Api, spec_of
from ._json import checked_json

log = logging.getLogger("det_jupyter.api")

#: The body limit of an authenticated route that declares none (``max_body``), of the
#: unauthenticated routes, and of any request before its credentials are checked.
DEFAULT_MAX_BODY = 1024 * 1024
PUBLIC_MAX_BODY = 16 * 1024
#: The largest body any route takes: an experiment's context (95 MiB) in base64, and its config.
MAX_BODY = 128 * 1024 * 1024
CONTEXT_HINT = ("a context (model definition) may hold 95 MiB: leave files out with a .detignore file, "
                "and download data sets in your code instead")
#: How far past its limit a streamed body is read to answer 413 before the connection is cut,
#: and the most an authenticated caller's oversized body is read (and dropped) to answer it.
_SLACK = 64 * 1024
_DRAIN = 1024 * 1024 * 1024
VERBS = ("get", "post", "put", "patch", "delete", "head", "options")
#: Bodies at least this large are parsed off the event loop (``body_json_async``).
OFF_LOOP_BODY = 256 * 1024

Principal = User | AllocationPrincipal


def implemented_verbs(handler: type) -> list[str]:
    """The verbs (lower case) a handler class defines."""
    return [v for v in VERBS if getattr(handler, v, None) is not getattr(web.RequestHandler, v)]


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit // 1024} KiB"


def _refuse_oversized(fn: Any) -> Any:
    @functools.wraps(fn)
    def verb(self: DetHandler, *args: Any, **kwargs: Any) -> Any:
        if self._too_large is not None:
            raise self._too_large
        return fn(self, *args, **kwargs)

    verb.__det_guarded__ = True  # type: ignore[attr-defined]
    return verb


def _bearer(value: str | None, schemes: tuple[str, ...] = ("bearer",)) -> str | None:
    if not value:
        return None
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() not in schemes or not token.strip():
        return None
    return token.strip()


@web.stream_request_body
class DetHandler(web.RequestHandler):
    """Parse → one service call → serialize. Subclasses set ``allow_task`` where a task's
    allocation token may call the route, and ``public`` for the few unauthenticated ones.

    Every other route declares, in ``permissions``, the permission each verb needs. Cluster
    permissions (and ``AUTHENTICATED``) are checked before the verb runs; a workspace permission
    is checked by the verb once it knows the object's workspace (``authorize_*``) or, for a
    list, by filtering on ``visible_workspaces()``. A verb with no declaration is refused, and
    a success from a verb that never checked is logged (and refused under
    ``det_strict_authz``, as in the tests): a forgotten check fails closed.
    """

    public = False
    allow_task = False
    permissions: dict[str, Perm] = {}
    #: The most bytes this route's body may hold (413 past it); unauthenticated routes and
    #: requests not yet authenticated take at most ``PUBLIC_MAX_BODY``.
    max_body = DEFAULT_MAX_BODY
    #: Lone surrogates and NULs in a body's strings: "reject" (400), or "scrub" (replaced by
    #: U+FFFD, for text a task printed: its logs).
    body_strings = "reject"
    #: What to do about a body over ``max_body``, added to the 413's message.
    too_large_hint = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Each verb refuses (413) a body that went over the limit while it streamed in: the
        answer waits for the body to be read (and dropped), because answering while a client
        still sends closes the connection under it before it reads the answer."""
        super().__init_subclass__(**kwargs)
        for verb in VERBS:
            fn = cls.__dict__.get(verb)
            if fn is not None and not hasattr(fn, "__det_guarded__"):
                setattr(cls, verb, _refuse_oversized(fn))

    @property
    def master(self) -> Master:
        return self.settings["det_master"]

    def check_xsrf_cookie(self) -> None:
        """det routes never authenticate by cookie, so there is no cross-site request to forge."""
        return None

    def compute_etag(self) -> None:
        """No ETag: responses are ``no-store``, so hashing each body would be wasted work."""
        return None

    def set_default_headers(self) -> None:
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")
        self.set_header("X-Content-Type-Options", "nosniff")

    async def prepare(self) -> None:
        self.principal: Principal | None = None
        self._access: Caller | None = None
        self._checked = self.public
        self._body = bytearray()
        self._too_large: PayloadTooLarge | None = None
        self.request.body = self._body  # type: ignore[assignment]  # filled by data_received
        self._body_limit = PUBLIC_MAX_BODY  # until the caller is known
        if self.request.connection is not None and hasattr(self.request.connection, "set_max_body_size"):
            self.request.connection.set_max_body_size(PUBLIC_MAX_BODY + _SLACK)
        method = (self.request.method or "").lower()
        if method not in implemented_verbs(type(self)):
            raise web.HTTPError(405, f"{self.request.method} is not supported on {self.request.path}")
        if not self.public:
            try:
                self.principal = self._authenticate()
            except Unauthenticated:
                # A token JupyterHub issued, where the master serves a hub's users.
                hub = getattr(self.master, "hub_auth", None)
                token = _bearer(self.request.headers.get("Authorization"), schemes=("bearer", "token"))
                if hub is None or token is None:
                    raise
                self.principal = await hub.user_for_token(token)
        if self.public:
            self._limit_body(min(self.max_body, PUBLIC_MAX_BODY))
        else:
            self._limit_body(self.max_body, drain=True)
        for arg in self.path_args:
            # An id no database column can hold names nothing (and must not reach SQLite).
            if arg.isascii() and arg.isdigit() and int(arg) > MAX_ID:
                raise NotFound(f"{self.request.path}: no object has id {arg[:24]}…")
        if not self.public:
            # A cluster permission is settled before the query is read: who may not call the
            # route hears 403, not what its parameters should have been.
            perm = self.permissions.get(self.request.method or "")
            if perm is None:
                raise Forbidden(f"{self.request.method} {self.request.path} declares no permission; refused")
            if perm is Perm.AUTHENTICATED or perm in CLUSTER_ONLY:
                self.access.authorize_cluster(perm, self.request.path)
                self._checked = True
        self.spec.check_query(self.request.query_arguments)

    # -- the body, read as it streams in, up to this route's limit --------------------------

    def _limit_body(self, limit: int, *, drain: bool = False) -> None:
        """Refuse a declared ``Content-Length`` over ``limit`` now (413, before any of it is
        kept); a body streamed without one is counted as it arrives (``data_received``).

        The connection is cut once a body runs ``_SLACK`` past the limit, except that an
        authenticated caller's oversized body is read and dropped (``drain``, up to
        ``_DRAIN``), so that a client that sends it all before reading still gets the 413."""
        self._body_limit = limit
        length = self.request.headers.get("Content-Length", "")
        declared = int(length) if length.isdigit() else 0
        conn = self.request.connection
        if conn is not None and hasattr(conn, "set_max_body_size"):
            cut = (min(declared, _DRAIN) if declared else _DRAIN) if drain else limit
            conn.set_max_body_size(max(cut, limit) + _SLACK)
        if declared > limit:
            self._too_large = PayloadTooLarge(self._too_large_message(f"({declared} bytes) "))
            if not drain:
                raise self._too_large

    def _too_large_message(self, size: str = "") -> str:
        limit = self._body_limit
        return (f"the request body {size}is over this route's limit of {_size(limit)} ({limit} bytes)"
                + (f"; {self.too_large_hint}" if self.too_large_hint else ""))

    def data_received(self, chunk: bytes) -> None:
        if self._too_large is not None:
            return
        if len(self._body) + len(chunk) > self._body_limit:
            self._too_large = PayloadTooLarge(self._too_large_message())
            self._body.clear()
            return
        self._body += chunk

    @property
    def spec(self) -> Api:
        """This verb's declaration (``_api.api``)."""
        return spec_of(type(self), self.request.method or "")

    def _undeclared(self, what: str) -> None:
        """A verb read something its declaration does not name: the document would lie."""
        log.error("%s %s reads %s, which its declaration does not name",
                  self.request.method, self.request.path, what)
        if self.settings.get("det_strict_authz"):
            raise RuntimeError(f"{self.request.method} {self.request.path} reads undeclared {what}")

    # -- authorization: the access service's Caller (services.access.resolver) ---------------

    @property
    def perm(self) -> Perm:
        return self.permissions[self.request.method or ""]

    @property
    def access(self) -> Caller:
        """This request's caller: what it may do, and where the objects it names live."""
        if self._access is None:
            assert self.principal is not None
            self._access = self.master.access.caller(
                self.principal, self.permissions.get(self.request.method or ""),
                reading=self.request.method == "GET")
        return self._access

    @property
    def grants(self) -> Grants:
        return self.access.grants

    def authorize(self, workspace_id: int, what: str, perm: Perm | None = None) -> None:
        """This verb's permission (or ``perm``) on ``workspace_id``: 404 when the caller may
        not see ``what``, 403 when it may see it but not do this."""
        self.access.authorize(workspace_id, what, perm)

    def mark_checked(self) -> None:
        """The verb checked access itself (e.g. the caller's own object)."""
        self._checked = True

    def visible_workspaces(self, perm: Perm | None = None) -> frozenset[int] | None:
        """Where this verb's permission (or ``perm``) holds, to filter a list; None: everywhere."""
        return self.access.visible_workspaces(perm)

    def authorize_workspace(self, workspace_id: int, perm: Perm | None = None) -> None:
        self.access.authorize_workspace(workspace_id, perm)

    def authorize_project(self, project_id: int, perm: Perm | None = None) -> int:
        return self.access.authorize_project(project_id, perm)

    def authorize_experiment(self, experiment_id: int, perm: Perm | None = None) -> int:
        return self.access.authorize_experiment(experiment_id, perm)

    def authorize_trial(self, trial_id: int, perm: Perm | None = None) -> int:
        return self.access.authorize_trial(trial_id, perm)

    def authorize_checkpoint(self, uuid: str, perm: Perm | None = None) -> int:
        return self.access.authorize_checkpoint(uuid, perm)

    def authorize_task(self, task_id: str, perm: Perm | None = None) -> int:
        return self.access.authorize_task(task_id, perm)

    def authorize_model(self, name: str, perm: Perm | None = None) -> int:
        return self.access.authorize_model(name, perm)

    def authorize_template(self, name: str, perm: Perm | None = None) -> int:
        return self.access.authorize_template(name, perm)

    @property
    def _was_checked(self) -> bool:
        """Whether access was checked, by the verb or through its caller (true before
        ``prepare`` has run: nothing was answered yet)."""
        access = getattr(self, "_access", None)
        return getattr(self, "_checked", True) or (access is not None and access.checked)

    def finish(self, chunk: Any = None) -> Any:
        if not self._was_checked and self.get_status() < 400 and not self._headers_written:
            log.error("%s %s answered without an authorization check (declared %s)",
                      self.request.method, self.request.path,
                      self.permissions.get(self.request.method or ""))
            if self.settings.get("det_strict_authz"):
                self.clear()
                self.set_status(500)
                msg = "this route answered without checking authorization (a det-jupyter bug)"
                chunk = json.dumps({"error": {"error": msg}, "message": msg, "code": 500})
        return super().finish(chunk)

    def _authenticate(self) -> Principal:
        task_token = _bearer(self.request.headers.get("Grpc-Metadata-x-allocation-token"))
        if task_token is not None:
            if not self.allow_task:
                raise Forbidden("a task's allocation token cannot call this route")
            return self.master.allocations.principal_for_token(task_token)
        token = _bearer(self.request.headers.get("Authorization"))
        if token is None:
            raise Unauthenticated("authentication required: log in (det user login) and send Authorization: Bearer <token>")
        return self.master.auth.user_for_token(token)

    # -- principals ---------------------------------------------------------------------

    @property
    def user(self) -> User:
        p = self.principal
        if isinstance(p, AllocationPrincipal):
            return p.user
        assert p is not None
        return p

    def require_trial(self, trial_id: int) -> None:
        """A task may only touch its own trial (404 otherwise, hiding others' existence); a
        TensorBoard task may read (GET) the trials it was started on."""
        self.access.require_trial(trial_id)

    def require_allocation(self, allocation_id: str) -> None:
        self.access.require_allocation(allocation_id)

    def require_experiment(self, exp_id: int) -> None:
        self.access.require_experiment(exp_id)

    def require_task(self, task_id: str) -> None:
        self.access.require_task(task_id)

    # -- JSON ---------------------------------------------------------------------------

    def body_json(self) -> dict[str, Any]:
        """The body as a JSON object, checked: size, nesting (``MAX_DEPTH``), integers the store
        can hold, strings without lone surrogates or NULs, then the verb's declared schema."""
        if self._too_large is not None:
            raise self._too_large
        spec = self.spec
        if spec.declared and spec.body is None:
            self._undeclared("a request body")
        if not self._body:
            if spec.body_required:
                raise InvalidRequest("this route needs a JSON object as its request body")
            return _Body({}, self, spec.body_keys())
        body = checked_json(bytes(self._body), scrub=self.body_strings == "scrub")
        if not isinstance(body, dict):
            raise InvalidRequest("the request body must be a JSON object")
        for key, value in body.items():
            # Top-level numbers are ids, offsets, limits, priorities: none fits past 2**62, and
            # the database would overflow on it (a metric's values are nested, never checked).
            if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_ID:
                raise InvalidRequest(f"{key} is out of range ({str(value)[:24]}…)")
        spec.check_body(body)
        return _Body(body, self, spec.body_keys())

    async def body_json_async(self) -> dict[str, Any]:
        """``body_json``, parsed off the event loop when the body is large (an experiment's
        context), so other requests are not held up while it is decoded."""
        if len(self.request.body or b"") < OFF_LOOP_BODY:
            return self.body_json()
        return await asyncio.get_running_loop().run_in_executor(None, self.body_json)

    def send(self, obj: Any, status: int = 200) -> None:
        self.send_text(json.dumps(obj, separators=(",", ":")), status)

    def send_text(self, text: str, status: int = 200) -> None:
        """Send JSON already serialized (parts of it built by the database)."""
        self.set_status(status)
        self.finish(text)

    def _declared_param(self, name: str) -> None:
        spec = self.spec
        if spec.declared and spec.param(name) is None:
            self._undeclared(f"query parameter {name}")

    def get_query_argument(self, name: str, default: Any = web._ARG_DEFAULT, strip: bool = True) -> Any:
        self._declared_param(name)
        return super().get_query_argument(name, default, strip)

    def get_query_arguments(self, name: str, strip: bool = True) -> list[str]:
        self._declared_param(name)
        return super().get_query_arguments(name, strip)

    def int_arg(self, name: str, default: int | None = None) -> int | None:
        raw = self.get_query_argument(name, None)
        if raw is None or raw == "":
            return default
        q = self.spec.param(name)
        if q is not None and q.type == "integer":
            return q.parse(raw)
        if not raw.isascii() or not raw.lstrip("-").isdigit() or len(raw) > 20 or abs(int(raw)) > MAX_ID:
            raise InvalidRequest(f"query parameter {name} must be an integer (ASCII digits, at most "
                                 f"{MAX_ID}), got {raw[:40]!r}")
        return int(raw)

    def bool_arg(self, name: str, default: bool = False) -> bool:
        raw = self.get_query_argument(name, None)
        if raw is None or raw == "":
            return default
        return raw.lower() in ("1", "true", "yes")

    # -- errors -------------------------------------------------------------------------

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, DetError):
            message = exc.message
        elif isinstance(exc, web.HTTPError):
            message = exc.log_message or self._reason
        else:
            message = "internal error; see the master's log"
        self.set_header("Content-Type", "application/json")
        if status_code == 405:
            self.set_header("Allow", ", ".join(v.upper() for v in implemented_verbs(type(self))))
        self.finish(json.dumps({"error": {"error": message, "message": message, "code": status_code},
                                "message": message, "code": status_code}))

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        if isinstance(value, DetError):
            return
        super().log_exception(typ, value, tb)

    def _handle_request_exception(self, e: BaseException) -> None:
        if isinstance(e, DetError):
            if self._finished:
                return
            self.send_error(e.status, exc_info=(type(e), e, e.__traceback__))
            return
        super()._handle_request_exception(e)


class NotFoundHandler(DetHandler):
    """Any unknown /api/v1 route: a JSON 404 instead of Jupyter's HTML page."""

    public = True

    def _missing(self, *args: Any) -> None:
        raise NotFound(f"no such route: {self.request.method} {self.request.path}")

    get = post = put = patch = delete = head = options = _missing


class _Body(dict):
    """A request body whose reads of undeclared top-level keys are reported (``_undeclared``):
    what a verb reads is what its declaration, and so the served document, says it takes."""

    def __init__(self, data: dict[str, Any], handler: DetHandler, keys: frozenset[str] | None) -> None:
        super().__init__(data)
        self._handler, self._keys = handler, keys

    def _check(self, key: Any) -> None:
        if self._keys is not None and key not in self._keys:
            self._handler._undeclared(f"body key {key}")

    def get(self, key: Any, default: Any = None) -> Any:
        self._check(key)
        return super().get(key, default)

    def __getitem__(self, key: Any) -> Any:
        self._check(key)
        return super().__getitem__(key)

    def __contains__(self, key: Any) -> bool:
        self._check(key)
        return super().__contains__(key)
