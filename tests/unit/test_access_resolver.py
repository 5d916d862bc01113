"""The handler-facing access service (``services.access.resolver``) on in-memory doubles: the
hiding rule, a task's own objects, jobs, global objects, and the ``checked`` flag."""

from __future__ import annotations

from typing import Any

import pytest

from det_jupyter.errors import Forbidden, NotFound
from det_jupyter.services.access.authz import Grants, Perm
from det_jupyter.services.access.resolver import AccessService, Caller, job_perm, task_perm
from det_jupyter.services.accounts.auth import AllocationPrincipal, User

ALICE = User(id=2, username="alice", admin=False, active=True)


class FakeLocations:
    """An RBAC service whose objects live where its dicts say; counts lookups."""

    def __init__(self, grants: Grants) -> None:
        self._grants = grants
        self.lookups: list[tuple[str, object]] = []
        self.experiments = {10: 5, 11: 6}
        self.trials = {100: 5, 110: 6}
        self.tasks = {"10.abc": 5, "cmd-1": 5}
        self.jobs = {"job-e5": (5, True), "job-c5": (5, False), "job-e6": (6, True)}

    def grants(self, user: User) -> Grants:
        return self._grants

    def _get(self, kind: str, table: dict, key: object) -> int:
        self.lookups.append((kind, key))
        if key not in table:
            raise NotFound(f"{kind} {key} not found")
        return table[key]

    def workspace_of_experiment(self, experiment_id: int) -> int:
        return self._get("experiment", self.experiments, experiment_id)

    def workspace_of_trial(self, trial_id: int) -> int:
        return self._get("trial", self.trials, trial_id)

    def workspace_of_task(self, task_id: str) -> int:
        return self._get("task", self.tasks, task_id)

    def workspaces_of_jobs(self, job_ids: list[str]) -> dict[str, tuple[int, bool]]:
        return {j: self.jobs[j] for j in job_ids if j in self.jobs}

    def check_workspace(self, grants: Grants, perm: Perm, workspace_id: int) -> None:
        grants.check(perm, workspace_id, f"workspace {workspace_id}")


class FakeAllocations:
    def get(self, allocation_id: str) -> Any:
        if allocation_id != "alloc-1":
            raise KeyError(allocation_id)
        return type("Alloc", (), {"task_id": "cmd-1"})()


def caller(grants: Grants, perm: Perm | None, principal: Any = ALICE, *, reading: bool = False,
           ) -> tuple[Caller, FakeLocations]:
    where = FakeLocations(grants)
    service = AccessService(where, FakeAllocations(), commands=None, views=None)  # type: ignore[arg-type]
    return service.caller(principal, perm, reading=reading), where


VIEWER_OF_5 = Grants.build([("Viewer", 5)])
EDITOR_OF_5 = Grants.build([("Editor", 5)])


@pytest.mark.parametrize(("task_id", "declared", "needed"), [
    ("10.abc", Perm.VIEW_EXPERIMENT_METADATA, Perm.VIEW_EXPERIMENT_METADATA),
    ("10.abc", Perm.UPDATE_EXPERIMENT, Perm.UPDATE_EXPERIMENT),
    ("cmd-1", Perm.UPDATE_EXPERIMENT, Perm.UPDATE_NSC),
    ("cmd-1", Perm.VIEW_EXPERIMENT_ARTIFACTS, Perm.VIEW_NSC),
    ("notebook-x", Perm.VIEW_EXPERIMENT_METADATA, Perm.VIEW_NSC),
])
def test_task_perm_maps_interactive_tasks_to_nsc(task_id: str, declared: Perm, needed: Perm) -> None:
    assert task_perm(task_id, declared) is needed


@pytest.mark.parametrize(("is_exp", "update", "needed"), [
    (True, True, Perm.UPDATE_EXPERIMENT), (False, True, Perm.UPDATE_NSC),
    (True, False, Perm.VIEW_EXPERIMENT_METADATA), (False, False, Perm.VIEW_NSC),
])
def test_job_perm(is_exp: bool, update: bool, needed: Perm) -> None:
    assert job_perm(is_exp, update=update) is needed


def test_an_experiment_the_caller_cannot_see_is_404_and_one_it_cannot_change_403() -> None:
    c, _ = caller(VIEWER_OF_5, Perm.UPDATE_EXPERIMENT)
    assert not c.checked
    with pytest.raises(NotFound, match="experiment 11 not found"):
        c.authorize_experiment(11)
    with pytest.raises(Forbidden):
        c.authorize_experiment(10)
    assert c.authorize_experiment(10, Perm.VIEW_EXPERIMENT_METADATA) == 5
    assert c.checked


def test_a_missing_object_is_404() -> None:
    c, _ = caller(EDITOR_OF_5, Perm.VIEW_EXPERIMENT_METADATA)
    with pytest.raises(NotFound, match="trial 999 not found"):
        c.authorize_trial(999)


def test_a_trial_task_reaches_its_own_trial_through_its_experiment() -> None:
    task = AllocationPrincipal("alloc-9", "10.abc", trial_id=100, experiment_id=10, user=ALICE)
    c, where = caller(EDITOR_OF_5, Perm.UPDATE_EXPERIMENT, task)
    assert c.authorize_trial(100) == 5
    assert c.authorize_task("10.abc") == 5
    assert where.lookups == [("experiment", 10), ("experiment", 10)]


def test_an_allocation_is_checked_as_its_task() -> None:
    c, where = caller(EDITOR_OF_5, Perm.UPDATE_EXPERIMENT)
    assert c.authorize_allocation("alloc-1") == 5  # cmd-1: UPDATE_NSC, which an Editor has
    assert where.lookups == [("task", "cmd-1")]
    with pytest.raises(NotFound, match="allocation alloc-2 not found"):
        c.authorize_allocation("alloc-2")


def test_a_task_may_touch_only_its_own_objects() -> None:
    task = AllocationPrincipal("alloc-9", "10.abc", trial_id=100, experiment_id=10, user=ALICE)
    c, _ = caller(EDITOR_OF_5, Perm.VIEW_EXPERIMENT_METADATA, task)
    c.require_trial(100)
    c.require_experiment(10)
    c.require_task("10.abc")
    c.require_allocation("alloc-9")
    for check, other in ((c.require_trial, 110), (c.require_experiment, 11), (c.require_task, "11.x"),
                         (c.require_allocation, "alloc-1")):
        with pytest.raises(NotFound):
            check(other)  # type: ignore[operator]
    users, _ = caller(EDITOR_OF_5, Perm.VIEW_EXPERIMENT_METADATA)
    users.require_trial(110)  # a user: the workspace check decides, not this one


def test_visible_jobs_filters_by_kind_and_workspace() -> None:
    nsc_only = Grants.build([("Viewer", 6)])
    c, _ = caller(nsc_only, Perm.AUTHENTICATED)
    assert c.visible_jobs(["job-e5", "job-c5", "job-e6", "gone"]) == {"job-e6"}
    admin, where = caller(Grants.build([], admin=True), Perm.AUTHENTICATED)
    assert admin.visible_jobs(["job-e5"]) is None and where.lookups == []


def test_job_updates_are_all_checked_before_any_and_name_the_missing_job() -> None:
    c, _ = caller(EDITOR_OF_5, Perm.UPDATE_EXPERIMENT)
    c.authorize_job_updates(["job-e5", "job-c5"])
    with pytest.raises(NotFound, match="job gone not found"):
        c.authorize_job_updates(["job-e5", "gone"])
    with pytest.raises(NotFound, match="job job-e6 not found"):
        c.authorize_job_updates(iter(["job-e6"]))


def test_a_global_object_needs_the_permission_cluster_wide() -> None:
    c, _ = caller(EDITOR_OF_5, Perm.CREATE_EXPERIMENT)
    with pytest.raises(NotFound, match="/x: webhook not found"):
        c.authorize_global(Perm.CREATE_EXPERIMENT, Perm.VIEW_EXPERIMENT_METADATA, "/x: webhook", "no")
    with pytest.raises(Forbidden, match="^no$"):
        c.authorize_global(Perm.CREATE_EXPERIMENT, Perm.VIEW_EXPERIMENT_METADATA, "/x: webhook", "no",
                           creating=True)
    assert c.checked
    admin, _ = caller(Grants.build([], admin=True), Perm.CREATE_EXPERIMENT)
    admin.authorize_global(Perm.CREATE_EXPERIMENT, Perm.VIEW_EXPERIMENT_METADATA, "/x: webhook", "no")


def test_lists_filter_and_count_as_checked() -> None:
    c, _ = caller(VIEWER_OF_5, Perm.VIEW_EXPERIMENT_METADATA)
    assert c.visible_workspaces() == frozenset({5})
    assert c.checked
    assert c.may_see_experiment(10) and not c.may_see_experiment(11)


def test_a_verb_without_a_permission_is_refused() -> None:
    c, _ = caller(EDITOR_OF_5, None)
    with pytest.raises(Forbidden):
        c.authorize_experiment(10)
