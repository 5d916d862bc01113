"""The base of every det route: authentication, JSON in and out, one error mapping.

det routes authenticate det credentials themselves — a session token in
``Authorization: Bearer``, or a task's allocation token in
``Grpc-Metadata-x-allocation-token: Bearer`` — and never cookies, so Jupyter's XSRF check
(which guards cookie sessions) does not apply to them and is skipped.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from tornado import web

from ..errors import DetError, Forbidden, InvalidRequest, NotFound, Unauthenticated
from ..services import tensorboards
from ..services.auth import AllocationPrincipal, User
from ..services.authz import CLUSTER_ONLY, Grants, Perm
from ..services.master import Master

log = logging.getLogger("det_jupyter.api")

MAX_BODY = 128 * 1024 * 1024
MAX_ID = 2**62

Principal = User | AllocationPrincipal


def _bearer(value: str | None) -> str | None:
    if not value:
        return None
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


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
        self._grants: Grants | None = None
        self._checked = self.public
        if self.public:
            return
        self.principal = self._authenticate()
        for arg in self.path_args:
            # An id no database column can hold names nothing (and must not reach SQLite).
            if arg.isdigit() and int(arg) > MAX_ID:
                raise NotFound(f"{self.request.path}: no object has id {arg[:24]}…")
        perm = self.permissions.get(self.request.method or "")
        if perm is None:
            raise Forbidden(f"{self.request.method} {self.request.path} declares no permission; refused")
        if perm is Perm.AUTHENTICATED or perm in CLUSTER_ONLY:
            self.grants.check(perm, None, self.request.path)
            self._checked = True

    # -- authorization --------------------------------------------------------------------

    @property
    def perm(self) -> Perm:
        return self.permissions[self.request.method or ""]

    @property
    def grants(self) -> Grants:
        if self._grants is None:
            self._grants = self.master.rbac.grants(self.user)
        return self._grants

    def authorize(self, workspace_id: int, what: str, perm: Perm | None = None) -> None:
        """This verb's permission (or ``perm``) on ``workspace_id``: 404 when the caller may
        not see ``what``, 403 when it may see it but not do this."""
        self.grants.check(perm or self.perm, workspace_id, what)
        self._checked = True

    def mark_checked(self) -> None:
        """The verb checked access itself (e.g. the caller's own object)."""
        self._checked = True

    def visible_workspaces(self, perm: Perm | None = None) -> frozenset[int] | None:
        """Where this verb's permission (or ``perm``) holds, to filter a list; None: everywhere."""
        self._checked = True
        return self.grants.workspaces_with(perm or self.perm)

    def authorize_workspace(self, workspace_id: int, perm: Perm | None = None) -> None:
        self.master.rbac.check_workspace(self.grants, perm or self.perm, workspace_id)
        self._checked = True

    def authorize_project(self, project_id: int, perm: Perm | None = None) -> int:
        ws = self.master.rbac.workspace_of_project(project_id)
        self.authorize(ws, f"project {project_id}", perm)
        return ws

    def authorize_experiment(self, experiment_id: int, perm: Perm | None = None) -> int:
        ws = self.master.rbac.workspace_of_experiment(experiment_id)
        self.authorize(ws, f"experiment {experiment_id}", perm)
        return ws

    def authorize_trial(self, trial_id: int, perm: Perm | None = None) -> int:
        own = self._own_experiment(trial_id=trial_id)
        ws = (self.master.rbac.workspace_of_trial(trial_id) if own is None
              else self.master.rbac.workspace_of_experiment(own))
        self.authorize(ws, f"trial {trial_id}", perm)
        return ws

    def authorize_checkpoint(self, uuid: str, perm: Perm | None = None) -> int:
        ws = self.master.rbac.workspace_of_checkpoint(uuid)
        self.authorize(ws, f"checkpoint {uuid}", perm)
        return ws

    def authorize_task(self, task_id: str, perm: Perm | None = None) -> int:
        own = self._own_experiment(task_id=task_id)
        ws = (self.master.rbac.workspace_of_task(task_id) if own is None
              else self.master.rbac.workspace_of_experiment(own))
        self.authorize(ws, f"task {task_id}", perm)
        return ws

    def _own_experiment(self, *, trial_id: int | None = None, task_id: str | None = None) -> int | None:
        """A trial's task asking about its own trial or task: its experiment, whose workspace
        is kept per experiment (instead of a lookup per trial)."""
        p = self.principal
        if (isinstance(p, AllocationPrincipal) and p.trial_id is not None and p.experiment_id is not None
                and (trial_id == p.trial_id or task_id == p.task_id)):
            return p.experiment_id
        return None

    def authorize_model(self, name: str, perm: Perm | None = None) -> int:
        ws = self.master.rbac.workspace_of_model(name)
        self.authorize(ws, f"model {name}", perm)
        return ws

    def authorize_template(self, name: str, perm: Perm | None = None) -> int:
        ws = self.master.rbac.workspace_of_template(name)
        self.authorize(ws, f"template {name}", perm)
        return ws

    def finish(self, chunk: Any = None) -> Any:
        if not getattr(self, "_checked", True) and self.get_status() < 400 and not self._headers_written:
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
        p = self.principal
        if isinstance(p, AllocationPrincipal) and p.trial_id != trial_id \
                and not self._tensorboard_reads(trial_id=trial_id):
            raise NotFound(f"trial {trial_id} not found")

    def require_allocation(self, allocation_id: str) -> None:
        p = self.principal
        if isinstance(p, AllocationPrincipal) and p.allocation_id != allocation_id:
            raise NotFound(f"allocation {allocation_id} not found")

    def require_experiment(self, exp_id: int) -> None:
        p = self.principal
        if isinstance(p, AllocationPrincipal) and p.experiment_id != exp_id \
                and not self._tensorboard_reads(experiment_id=exp_id):
            raise NotFound(f"experiment {exp_id} not found")

    def _tensorboard_reads(self, **what: int) -> bool:
        return self.request.method == "GET" and tensorboards.may_read(
            self.master.commands, self.master.views, self.principal, **what)

    def require_task(self, task_id: str) -> None:
        p = self.principal
        if isinstance(p, AllocationPrincipal) and p.task_id != task_id:
            raise NotFound(f"task {task_id} not found")

    # -- JSON ---------------------------------------------------------------------------

    def body_json(self) -> dict[str, Any]:
        if not self.request.body:
            return {}
        try:
            body = json.loads(self.request.body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise InvalidRequest(f"the request body is not valid JSON: {exc}") from None
        if not isinstance(body, dict):
            raise InvalidRequest("the request body must be a JSON object")
        for key, value in body.items():
            # Top-level numbers are ids, offsets, limits, priorities: none fits past 2**62, and
            # the database would overflow on it (a metric's values are nested, never checked).
            if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_ID:
                raise InvalidRequest(f"{key} is out of range ({str(value)[:24]}…)")
        return body

    def send(self, obj: Any, status: int = 200) -> None:
        self.send_text(json.dumps(obj, separators=(",", ":")), status)

    def send_text(self, text: str, status: int = 200) -> None:
        """Send JSON already serialized (parts of it built by the database)."""
        self.set_status(status)
        self.finish(text)

    def int_arg(self, name: str, default: int | None = None) -> int | None:
        raw = self.get_query_argument(name, None)
        if raw is None or raw == "":
            return default
        try:
            return int(raw)
        except ValueError:
            raise InvalidRequest(f"query parameter {name} must be an integer, got {raw!r}") from None

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

    get = post = put = patch = delete = _missing
