"""Roles and grants (pure): the pre-canned roles nest, scopes are respected, and the hiding
rule gives 404 to whoever may not see an object and 403 to whoever may see it only."""

from __future__ import annotations

import pytest

from det_jupyter.errors import Forbidden, NotFound
from det_jupyter.services.access.authz import CLUSTER_ONLY, LADDER, ROLES, Grants, Perm, check_role


def test_the_ladder_nests() -> None:
    for lower, higher in zip(LADDER, LADDER[1:], strict=False):
        assert ROLES[lower][0] < ROLES[higher][0], (lower, higher)


def test_editor_restricted_cannot_launch_tasks_and_project_restricted_cannot_create_projects() -> None:
    assert Perm.CREATE_NSC not in ROLES["EditorRestricted"][0]
    assert Perm.CREATE_NSC in ROLES["Editor"][0]
    assert Perm.CREATE_PROJECT not in ROLES["EditorProjectRestricted"][0]
    assert Perm.CREATE_EXPERIMENT in ROLES["EditorProjectRestricted"][0]


def test_workspace_assignment_holds_only_there() -> None:
    g = Grants.build([("Editor", 2)])
    assert g.can(Perm.CREATE_EXPERIMENT, 2)
    assert not g.can(Perm.CREATE_EXPERIMENT, 3)
    assert not g.can(Perm.CREATE_EXPERIMENT)
    assert g.workspaces_with(Perm.VIEW_PROJECT) == frozenset({2})


def test_cluster_assignment_holds_everywhere() -> None:
    g = Grants.build([("Viewer", None)])
    assert g.can(Perm.VIEW_EXPERIMENT_METADATA, 7)
    assert g.workspaces_with(Perm.VIEW_EXPERIMENT_METADATA) is None
    assert not g.can(Perm.UPDATE_EXPERIMENT, 7)


def test_cluster_permissions_never_come_from_a_workspace() -> None:
    g = Grants.build([("WorkspaceAdmin", 2)])
    for p in CLUSTER_ONLY:
        assert not g.can(p, 2)


def test_admin_flag_is_cluster_admin() -> None:
    g = Grants.build([], admin=True)
    assert g.is_admin and all(g.can(p, 9) for p in Perm)


@pytest.mark.parametrize("role,perm,expected", [
    ("Viewer", Perm.UPDATE_EXPERIMENT, Forbidden),      # sees it, may not act: 403
    ("ModelRegistryViewer", Perm.UPDATE_EXPERIMENT, NotFound),  # may not see it: 404
    ("ModelRegistryViewer", Perm.VIEW_EXPERIMENT_METADATA, NotFound),
    ("Viewer", Perm.CREATE_MODEL_REGISTRY, Forbidden),
])
def test_hiding_rule(role: str, perm: Perm, expected: type) -> None:
    g = Grants.build([(role, 2)])
    with pytest.raises(expected):
        g.check(perm, 2, "experiment 1")
    with pytest.raises(NotFound):  # nothing at all in another workspace
        g.check(perm, 3, "experiment 1")


def test_role_scope_rules() -> None:
    with pytest.raises(ValueError, match="only be assigned on the cluster"):
        check_role("ClusterAdmin", on_workspace=True)
    with pytest.raises(ValueError, match="no role named"):
        check_role("Owner", on_workspace=True)
    assert Perm.CREATE_WORKSPACE in check_role("WorkspaceCreator", on_workspace=False)
