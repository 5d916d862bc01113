"""Which workspace holds an object, and whether a principal may do something there.

``AccessService`` is what the REST handlers ask: it resolves experiments, trials,
checkpoints, tasks, allocations, jobs, models and templates to their workspaces (through the
RBAC service's cached lookups) and builds, per request, a ``Caller``: the principal, its
grants, the permission its verb declared, and whether any check has run yet. A handler (or a
service acting for it, such as experiment submission) checks through the ``Caller``; the
handler refuses an answer whose ``Caller`` never checked (``DetHandler.finish``).

The hiding rule is ``authz.Grants.check``'s: an object the caller may not see is 404, one it
may see but not change is 403. Nothing here writes state.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ...errors import Forbidden, NotFound
from ..accounts.auth import AllocationPrincipal, User
from ..interactive import tensorboards
from .authz import Grants, Perm

if TYPE_CHECKING:
    from .rbac import RbacService

Principal = User | AllocationPrincipal


class _Allocations(Protocol):
    def get(self, allocation_id: str) -> Any: ...


def task_perm(task_id: str, perm: Perm) -> Perm:
    """The permission a verb declaring ``perm`` needs on task ``task_id``: a trial's task
    (``<experiment>.<…>``) the verb's own; an interactive task the matching NSC one
    (UPDATE_NSC to act, VIEW_NSC otherwise)."""
    if task_id.split(".", 1)[0].isdigit():
        return perm
    return Perm.UPDATE_NSC if perm is Perm.UPDATE_EXPERIMENT else Perm.VIEW_NSC


def job_perm(is_experiment: bool, *, update: bool) -> Perm:
    """What reading (``update=False``) or changing a job needs: an experiment's job the
    experiment permission, an interactive task's the NSC one."""
    if update:
        return Perm.UPDATE_EXPERIMENT if is_experiment else Perm.UPDATE_NSC
    return Perm.VIEW_EXPERIMENT_METADATA if is_experiment else Perm.VIEW_NSC


class AccessService:
    """Where objects live (cached by the RBAC service) and per-request ``Caller`` objects."""

    def __init__(self, rbac: RbacService, allocations: _Allocations, commands: Any, views: Any) -> None:
        self._rbac = rbac
        self._allocations = allocations
        # For TensorBoard tasks, which may read the trials they were started on.
        self._commands = commands
        self._views = views

    # -- who ----------------------------------------------------------------------------

    def grants(self, user: User) -> Grants:
        return self._rbac.grants(user)

    def caller(self, principal: Principal, perm: Perm | None, *, reading: bool = False) -> Caller:
        """The access of ``principal`` for one request whose verb declared ``perm``;
        ``reading``: the verb only reads (GET), which a TensorBoard task may do on its trials."""
        return Caller(self, principal, perm, reading=reading)

    # -- where ----------------------------------------------------------------------------

    def workspace_of_project(self, project_id: int) -> int:
        return self._rbac.workspace_of_project(project_id)

    def workspace_of_experiment(self, experiment_id: int) -> int:
        return self._rbac.workspace_of_experiment(experiment_id)

    def workspace_of_trial(self, trial_id: int) -> int:
        return self._rbac.workspace_of_trial(trial_id)

    def workspace_of_checkpoint(self, uuid: str) -> int:
        return self._rbac.workspace_of_checkpoint(uuid)

    def workspace_of_task(self, task_id: str) -> int:
        return self._rbac.workspace_of_task(task_id)

    def workspace_of_model(self, name: str) -> int:
        return self._rbac.workspace_of_model(name)

    def workspace_of_template(self, name: str) -> int:
        return self._rbac.workspace_of_template(name)

    def workspaces_of_jobs(self, job_ids: list[str]) -> dict[str, tuple[int, bool]]:
        """Each job's workspace and whether it is an experiment's (jobs not found: absent)."""
        return self._rbac.workspaces_of_jobs(job_ids)

    def task_of_allocation(self, allocation_id: str) -> str:
        """The task of an allocation; NotFound for any failure to find it (hiding it)."""
        try:
            return str(self._allocations.get(allocation_id).task_id)
        except Exception:  # noqa: BLE001 - any lookup failure hides the allocation
            raise NotFound(f"allocation {allocation_id} not found") from None

    def check_workspace(self, grants: Grants, perm: Perm, workspace_id: int) -> None:
        """``perm`` on the workspace; a workspace that does not exist is 404 too."""
        self._rbac.check_workspace(grants, perm, workspace_id)

    def tensorboard_reads(self, principal: Principal | None, **what: int) -> bool:
        """Whether ``principal`` is a TensorBoard task started on this trial or experiment."""
        return tensorboards.may_read(self._commands, self._views, principal, **what)


class Caller:
    """One request's principal and what it may do; ``checked`` once any check has run.

    ``perm`` is the permission the request's verb declared: the one every check uses unless
    given another."""

    def __init__(self, service: AccessService, principal: Principal, perm: Perm | None, *,
                 reading: bool = False) -> None:
        self._service = service
        self.principal = principal
        self.perm = perm
        self.reading = reading
        self.checked = False
        self._grants: Grants | None = None

    @property
    def user(self) -> User:
        p = self.principal
        return p.user if isinstance(p, AllocationPrincipal) else p

    @property
    def grants(self) -> Grants:
        if self._grants is None:
            self._grants = self._service.grants(self.user)
        return self._grants

    def _perm(self, perm: Perm | None) -> Perm:
        chosen = perm or self.perm
        if chosen is None:
            raise Forbidden("this route declares no permission; refused")
        return chosen

    # -- checks ---------------------------------------------------------------------------

    def mark_checked(self) -> None:
        """The caller's access was decided another way (e.g. its own object)."""
        self.checked = True

    def can(self, perm: Perm | None = None, workspace_id: int | None = None) -> bool:
        """Whether ``perm`` (default: the verb's) holds there; not itself a check."""
        return self.grants.can(self._perm(perm), workspace_id)

    def authorize_cluster(self, perm: Perm, what: str) -> None:
        """A cluster permission (or ``AUTHENTICATED``): 403 without it."""
        self.grants.check(perm, None, what)
        self.checked = True

    def authorize(self, workspace_id: int, what: str, perm: Perm | None = None) -> None:
        """The verb's permission (or ``perm``) on ``workspace_id``: 404 when the caller may not
        see ``what``, 403 when it may see it but not do this."""
        self.grants.check(self._perm(perm), workspace_id, what)
        self.checked = True

    def visible_workspaces(self, perm: Perm | None = None) -> frozenset[int] | None:
        """Where the verb's permission (or ``perm``) holds, to filter a list; None: everywhere."""
        self.checked = True
        return self.grants.workspaces_with(self._perm(perm))

    def authorize_workspace(self, workspace_id: int, perm: Perm | None = None) -> None:
        self._service.check_workspace(self.grants, self._perm(perm), workspace_id)
        self.checked = True

    def authorize_project(self, project_id: int, perm: Perm | None = None) -> int:
        ws = self._service.workspace_of_project(project_id)
        self.authorize(ws, f"project {project_id}", perm)
        return ws

    def authorize_experiment(self, experiment_id: int, perm: Perm | None = None) -> int:
        ws = self._service.workspace_of_experiment(experiment_id)
        self.authorize(ws, f"experiment {experiment_id}", perm)
        return ws

    def may_see_experiment(self, experiment_id: int, perm: Perm | None = None) -> bool:
        """Whether the verb's permission (or ``perm``) holds on the experiment, to filter a
        list (by experiment: the lookup is cached, and a list's trials share a few)."""
        return self.grants.can(self._perm(perm), self._service.workspace_of_experiment(experiment_id))

    def authorize_trial(self, trial_id: int, perm: Perm | None = None) -> int:
        own = self._own_experiment(trial_id=trial_id)
        ws = (self._service.workspace_of_trial(trial_id) if own is None
              else self._service.workspace_of_experiment(own))
        self.authorize(ws, f"trial {trial_id}", perm)
        return ws

    def authorize_checkpoint(self, uuid: str, perm: Perm | None = None) -> int:
        ws = self._service.workspace_of_checkpoint(uuid)
        self.authorize(ws, f"checkpoint {uuid}", perm)
        return ws

    def authorize_task(self, task_id: str, perm: Perm | None = None) -> int:
        own = self._own_experiment(task_id=task_id)
        ws = (self._service.workspace_of_task(task_id) if own is None
              else self._service.workspace_of_experiment(own))
        self.authorize(ws, f"task {task_id}", perm)
        return ws

    def authorize_task_kind(self, task_id: str) -> int:
        """``authorize_task`` with the permission its kind needs (``task_perm``)."""
        return self.authorize_task(task_id, task_perm(task_id, self._perm(None)))

    def authorize_allocation(self, allocation_id: str) -> int:
        """An allocation is checked as its task (``authorize_task_kind``)."""
        p = self.principal
        if isinstance(p, AllocationPrincipal) and p.allocation_id == allocation_id:
            task_id = p.task_id  # a task asking about its own allocation: its task is known
        else:
            task_id = self._service.task_of_allocation(allocation_id)
        return self.authorize_task_kind(task_id)

    def authorize_model(self, name: str, perm: Perm | None = None) -> int:
        ws = self._service.workspace_of_model(name)
        self.authorize(ws, f"model {name}", perm)
        return ws

    def authorize_template(self, name: str, perm: Perm | None = None) -> int:
        ws = self._service.workspace_of_template(name)
        self.authorize(ws, f"template {name}", perm)
        return ws

    def authorize_global(self, edit: Perm, view: Perm, what: str, refusal: str, *,
                         creating: bool = False) -> None:
        """``edit`` cluster-wide, for an object of no workspace (a global webhook): 404 to a
        caller who may not ``view`` everywhere (it is hidden from lists too) unless
        ``creating``, else 403 saying ``refusal``."""
        self.checked = True
        if self.grants.can(edit):
            return
        if not creating and not self.grants.can(view):
            raise NotFound(f"{what} not found")
        raise Forbidden(refusal)

    # -- jobs -----------------------------------------------------------------------------

    def visible_jobs(self, job_ids: Sequence[str]) -> set[str] | None:
        """Of ``job_ids``, those the caller may see (None: all of them, without a lookup)."""
        spaces = self.grants.workspaces_with(Perm.VIEW_EXPERIMENT_METADATA)
        nsc = self.grants.workspaces_with(Perm.VIEW_NSC)
        if spaces is None and nsc is None:
            return None
        where = self._service.workspaces_of_jobs(list(job_ids))
        out = set()
        for job_id in job_ids:
            if job_id not in where:
                continue
            ws, is_exp = where[job_id]
            allowed = spaces if is_exp else nsc
            if allowed is None or ws in allowed:
                out.add(job_id)
        return out

    def authorize_job_updates(self, job_ids: Iterable[str]) -> None:
        """Every job may be changed by the caller (all checked before any change is made)."""
        ids = list(job_ids)
        where = self._service.workspaces_of_jobs(ids)
        for job_id in ids:
            if job_id not in where:
                raise NotFound(f"job {job_id} not found; det job list shows the jobs")
            ws, is_exp = where[job_id]
            self.authorize(ws, f"job {job_id}", job_perm(is_exp, update=True))

    # -- a task's own objects ---------------------------------------------------------------

    def _own_experiment(self, *, trial_id: int | None = None, task_id: str | None = None) -> int | None:
        """A trial's task asking about its own trial or task: its experiment, whose workspace
        is kept per experiment (instead of a lookup per trial)."""
        p = self.principal
        if (isinstance(p, AllocationPrincipal) and p.trial_id is not None and p.experiment_id is not None
                and (trial_id == p.trial_id or task_id == p.task_id)):
            return p.experiment_id
        return None

    def require_trial(self, trial_id: int) -> None:
        """A task may only touch its own trial (404 otherwise, hiding others' existence); a
        TensorBoard task may read the trials it was started on."""
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

    def require_task(self, task_id: str) -> None:
        p = self.principal
        if isinstance(p, AllocationPrincipal) and p.task_id != task_id:
            raise NotFound(f"task {task_id} not found")

    def _tensorboard_reads(self, **what: int) -> bool:
        return self.reading and self._service.tensorboard_reads(self.principal, **what)


__all__ = ["AccessService", "Caller", "Principal", "job_perm", "task_perm"]
