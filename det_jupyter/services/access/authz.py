"""Permissions and roles (pure): Determined's pre-canned RBAC roles, always enforced.

A role is a set of permissions. A role is assigned to a user or a group on one workspace, or
on the cluster (then it holds in every workspace, plus its cluster permissions). ``Grants`` is
what one user holds, computed once per request from the assignments; every check is a set
lookup.

Hiding rule (Determined's ``SubIfUnauthorized``): a caller who may not *see* an object gets 404
for it, never 403, and never sees it in a list; a caller who may see it but not do the thing
asked gets 403.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ...errors import Forbidden, NotFound


class Perm(enum.Enum):
    # Workspace scope (a cluster-scope assignment grants them in every workspace).
    VIEW_WORKSPACE = "VIEW_WORKSPACE"
    UPDATE_WORKSPACE = "UPDATE_WORKSPACE"
    DELETE_WORKSPACE = "DELETE_WORKSPACE"
    ASSIGN_ROLES = "ASSIGN_ROLES"
    VIEW_PROJECT = "VIEW_PROJECT"
    CREATE_PROJECT = "CREATE_PROJECT"
    UPDATE_PROJECT = "UPDATE_PROJECT"
    DELETE_PROJECT = "DELETE_PROJECT"
    VIEW_EXPERIMENT_METADATA = "VIEW_EXPERIMENT_METADATA"
    VIEW_EXPERIMENT_ARTIFACTS = "VIEW_EXPERIMENT_ARTIFACTS"
    CREATE_EXPERIMENT = "CREATE_EXPERIMENT"
    UPDATE_EXPERIMENT = "UPDATE_EXPERIMENT"
    UPDATE_EXPERIMENT_METADATA = "UPDATE_EXPERIMENT_METADATA"
    DELETE_EXPERIMENT = "DELETE_EXPERIMENT"
    VIEW_NSC = "VIEW_NSC"
    CREATE_NSC = "CREATE_NSC"
    UPDATE_NSC = "UPDATE_NSC"
    VIEW_MODEL_REGISTRY = "VIEW_MODEL_REGISTRY"
    CREATE_MODEL_REGISTRY = "CREATE_MODEL_REGISTRY"
    EDIT_MODEL_REGISTRY = "EDIT_MODEL_REGISTRY"
    DELETE_MODEL_REGISTRY = "DELETE_MODEL_REGISTRY"
    DELETE_MODEL_VERSION = "DELETE_MODEL_VERSION"
    VIEW_TEMPLATES = "VIEW_TEMPLATES"
    CREATE_TEMPLATES = "CREATE_TEMPLATES"
    UPDATE_TEMPLATES = "UPDATE_TEMPLATES"
    DELETE_TEMPLATES = "DELETE_TEMPLATES"
    # Cluster scope only.
    CREATE_WORKSPACE = "CREATE_WORKSPACE"
    ADMINISTRATE_USER = "ADMINISTRATE_USER"
    ADMINISTRATE_TOKENS = "ADMINISTRATE_TOKEN"
    UPDATE_AGENTS = "UPDATE_AGENTS"
    CONTROL_JOB_QUEUE = "CONTROL_STRICT_JOB_QUEUE"
    ASSIGN_CLUSTER_ROLES = "UPDATE_ROLES"
    VIEW_MASTER_LOGS = "VIEW_MASTER_LOGS"
    VIEW_MASTER_CONFIG = "VIEW_MASTER_CONFIG"
    EDIT_MASTER_CONFIG = "UPDATE_MASTER_CONFIG"  # and the cluster-wide message, as in 0.38.1
    # Held by every authenticated, active user (their own session, tokens and password; the
    # cluster's shape). Declared so that every route names a permission.
    AUTHENTICATED = "AUTHENTICATED"


CLUSTER_ONLY = frozenset({
    Perm.CREATE_WORKSPACE, Perm.ADMINISTRATE_USER, Perm.ADMINISTRATE_TOKENS, Perm.UPDATE_AGENTS,
    Perm.CONTROL_JOB_QUEUE, Perm.ASSIGN_CLUSTER_ROLES, Perm.VIEW_MASTER_LOGS, Perm.VIEW_MASTER_CONFIG,
    Perm.EDIT_MASTER_CONFIG,
})

# What seeing an object needs: a caller without it gets 404 (existence hidden).
VIEW_OF = {
    Perm.VIEW_WORKSPACE: Perm.VIEW_WORKSPACE,
    Perm.UPDATE_WORKSPACE: Perm.VIEW_WORKSPACE,
    Perm.DELETE_WORKSPACE: Perm.VIEW_WORKSPACE,
    Perm.ASSIGN_ROLES: Perm.VIEW_WORKSPACE,
    Perm.CREATE_PROJECT: Perm.VIEW_WORKSPACE,
    Perm.VIEW_PROJECT: Perm.VIEW_PROJECT,
    Perm.UPDATE_PROJECT: Perm.VIEW_PROJECT,
    Perm.DELETE_PROJECT: Perm.VIEW_PROJECT,
    Perm.CREATE_EXPERIMENT: Perm.VIEW_PROJECT,
    Perm.VIEW_EXPERIMENT_METADATA: Perm.VIEW_EXPERIMENT_METADATA,
    Perm.VIEW_EXPERIMENT_ARTIFACTS: Perm.VIEW_EXPERIMENT_METADATA,
    Perm.UPDATE_EXPERIMENT: Perm.VIEW_EXPERIMENT_METADATA,
    Perm.UPDATE_EXPERIMENT_METADATA: Perm.VIEW_EXPERIMENT_METADATA,
    Perm.DELETE_EXPERIMENT: Perm.VIEW_EXPERIMENT_METADATA,
    Perm.VIEW_NSC: Perm.VIEW_NSC,
    Perm.CREATE_NSC: Perm.VIEW_WORKSPACE,
    Perm.UPDATE_NSC: Perm.VIEW_NSC,
    Perm.VIEW_MODEL_REGISTRY: Perm.VIEW_MODEL_REGISTRY,
    Perm.CREATE_MODEL_REGISTRY: Perm.VIEW_MODEL_REGISTRY,
    Perm.EDIT_MODEL_REGISTRY: Perm.VIEW_MODEL_REGISTRY,
    Perm.DELETE_MODEL_REGISTRY: Perm.VIEW_MODEL_REGISTRY,
    Perm.DELETE_MODEL_VERSION: Perm.VIEW_MODEL_REGISTRY,
    Perm.VIEW_TEMPLATES: Perm.VIEW_TEMPLATES,
    Perm.CREATE_TEMPLATES: Perm.VIEW_TEMPLATES,
    Perm.UPDATE_TEMPLATES: Perm.VIEW_TEMPLATES,
    Perm.DELETE_TEMPLATES: Perm.VIEW_TEMPLATES,
}

_MRV = frozenset({Perm.VIEW_MODEL_REGISTRY})
_VIEWER = _MRV | {
    Perm.VIEW_WORKSPACE, Perm.VIEW_PROJECT, Perm.VIEW_EXPERIMENT_METADATA,
    Perm.VIEW_EXPERIMENT_ARTIFACTS, Perm.VIEW_NSC, Perm.VIEW_TEMPLATES,
}
_EDITOR_RESTRICTED = _VIEWER | {
    Perm.CREATE_PROJECT, Perm.UPDATE_PROJECT, Perm.DELETE_PROJECT, Perm.CREATE_EXPERIMENT,
    Perm.UPDATE_EXPERIMENT, Perm.UPDATE_EXPERIMENT_METADATA, Perm.DELETE_EXPERIMENT,
    Perm.CREATE_MODEL_REGISTRY, Perm.EDIT_MODEL_REGISTRY, Perm.DELETE_MODEL_REGISTRY,
    Perm.DELETE_MODEL_VERSION, Perm.CREATE_TEMPLATES, Perm.UPDATE_TEMPLATES, Perm.DELETE_TEMPLATES,
}
_EDITOR = _EDITOR_RESTRICTED | {Perm.CREATE_NSC, Perm.UPDATE_NSC}
_WORKSPACE_ADMIN = _EDITOR | {Perm.UPDATE_WORKSPACE, Perm.DELETE_WORKSPACE, Perm.ASSIGN_ROLES}
_ALL = frozenset(Perm)

# name -> (permissions, may it be assigned on a workspace?, on the cluster?)
ROLES: dict[str, tuple[frozenset[Perm], bool, bool]] = {
    "ModelRegistryViewer": (frozenset(_MRV), True, True),
    "Viewer": (frozenset(_VIEWER), True, True),
    "EditorRestricted": (frozenset(_EDITOR_RESTRICTED), True, True),
    "EditorProjectRestricted": (frozenset(_EDITOR - {Perm.CREATE_PROJECT, Perm.UPDATE_PROJECT}), True, True),
    "Editor": (frozenset(_EDITOR), True, True),
    "WorkspaceAdmin": (frozenset(_WORKSPACE_ADMIN), True, True),
    "WorkspaceCreator": (frozenset({Perm.CREATE_WORKSPACE}), False, True),
    "ClusterAdmin": (_ALL, False, True),
}
# Ids in Determined's order of its pre-canned roles (ClusterAdmin is 1).
ROLE_IDS = {"ClusterAdmin": 1, "WorkspaceAdmin": 2, "WorkspaceCreator": 3, "Viewer": 4, "Editor": 5,
            "ModelRegistryViewer": 6, "EditorRestricted": 7, "EditorProjectRestricted": 8}
ROLE_BY_ID = {i: name for name, i in ROLE_IDS.items()}
# The order the authorization matrix walks (each holds at least what the one before holds,
# except the branch EditorProjectRestricted, which the matrix checks on its own).
LADDER = ("ModelRegistryViewer", "Viewer", "EditorRestricted", "Editor", "WorkspaceAdmin", "ClusterAdmin")


def check_role(name: str, *, on_workspace: bool) -> frozenset[Perm]:
    """The permissions of role ``name``; ValueError naming the problem if it cannot be given
    at that scope."""
    if name not in ROLES:
        raise ValueError(f"no role named {name!r}; roles are {', '.join(ROLES)}")
    perms, ws_ok, cluster_ok = ROLES[name]
    if on_workspace and not ws_ok:
        raise ValueError(f"role {name} can only be assigned on the cluster (omit the workspace)")
    if not on_workspace and not cluster_ok:
        raise ValueError(f"role {name} can only be assigned on a workspace")
    return perms


@dataclass(frozen=True)
class Grants:
    """What one user may do: cluster-wide permissions and per-workspace permissions."""

    cluster: frozenset[Perm]
    workspaces: dict[int, frozenset[Perm]] = field(default_factory=dict)

    @classmethod
    def build(cls, assignments: list[tuple[str, int | None]], *, admin: bool = False) -> Grants:
        """From (role, workspace id or None) pairs; ``admin`` (the user flag) is ClusterAdmin."""
        cluster: set[Perm] = {Perm.AUTHENTICATED}
        per_ws: dict[int, set[Perm]] = {}
        for role, ws in assignments:
            perms = ROLES.get(role, (frozenset(), False, False))[0]
            if ws is None:
                cluster |= perms
            else:
                per_ws.setdefault(ws, set()).update(perms - CLUSTER_ONLY)
        if admin:
            cluster |= _ALL
        return cls(frozenset(cluster), {ws: frozenset(p) for ws, p in per_ws.items()})

    @property
    def is_admin(self) -> bool:
        return Perm.ASSIGN_CLUSTER_ROLES in self.cluster and Perm.ADMINISTRATE_USER in self.cluster

    def can(self, perm: Perm, workspace_id: int | None = None) -> bool:
        if perm in self.cluster:
            return True
        if workspace_id is None or perm in CLUSTER_ONLY:
            return False
        return perm in self.workspaces.get(workspace_id, frozenset())

    def workspaces_with(self, perm: Perm) -> frozenset[int] | None:
        """The workspaces where ``perm`` holds; None means every workspace."""
        if perm in self.cluster:
            return None
        return frozenset(ws for ws, perms in self.workspaces.items() if perm in perms)

    def check(self, perm: Perm, workspace_id: int | None, what: str) -> None:
        """Raise NotFound when the caller may not see ``what``, Forbidden when it may see it but
        not do ``perm`` to it."""
        if self.can(perm, workspace_id):
            return
        view = VIEW_OF.get(perm)
        if view is not None and view is not perm and self.can(view, workspace_id):
            raise Forbidden(f"you may not {perm.value.lower().replace('_', ' ')} on {what}; "
                            "ask a workspace admin for a role that allows it")
        if view is None and perm in CLUSTER_ONLY:
            raise Forbidden(f"{perm.value.lower().replace('_', ' ')} needs a cluster role "
                            "(ClusterAdmin); ask an admin")
        raise NotFound(f"{what} not found")
