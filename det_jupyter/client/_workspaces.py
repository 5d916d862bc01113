"""Workspaces and projects, and moving, archiving and deleting experiments.

    ws = client.create_workspace("vision")
    proj = client.create_project(ws["id"], "resnet")
    client.move_experiment(12, proj["id"])
    client.archive_experiment(12)

Workspaces and projects are the master's JSON (``v1Workspace``, ``v1Project``) as dicts.
"""

from __future__ import annotations

from typing import Any

from ._errors import NotFound
from ._experiment import Experiment
from .session import Session


class WorkspaceMethods:
    """Mixed into ``Determined``: needs ``self._session``."""

    _session: Session

    # -- workspaces -------------------------------------------------------------------------

    def list_workspaces(self, *, archived: bool | None = None) -> list[dict[str, Any]]:
        """The workspaces you may see, by id."""
        params = {} if archived is None else {"archived": str(archived).lower()}
        return self._session.get("/api/v1/workspaces", **params).get("workspaces") or []

    def get_workspace(self, name_or_id: str | int) -> dict[str, Any]:
        """A workspace by id, or by exact name; ``NotFound`` if you may see none such."""
        if isinstance(name_or_id, int):
            return self._session.get(f"/api/v1/workspaces/{name_or_id}")["workspace"]
        found = self._session.get("/api/v1/workspaces", nameCaseSensitive=name_or_id).get("workspaces") or []
        if not found:
            raise NotFound(404, f"workspace {name_or_id!r} not found")
        return found[0]

    def create_workspace(self, name: str) -> dict[str, Any]:
        """A new workspace; you become its WorkspaceAdmin."""
        return self._session.post("/api/v1/workspaces", {"name": name})["workspace"]

    def rename_workspace(self, workspace_id: int, name: str) -> dict[str, Any]:
        return self._session.request("PATCH", f"/api/v1/workspaces/{workspace_id}", {"name": name})["workspace"]

    def archive_workspace(self, workspace_id: int, archived: bool = True) -> None:
        """Archive (or unarchive): it then takes no new projects or experiments."""
        self._session.post(f"/api/v1/workspaces/{workspace_id}/{'archive' if archived else 'unarchive'}")

    def delete_workspace(self, workspace_id: int) -> None:
        """Delete it with all its projects, experiments (and their checkpoints) and models."""
        self._session.request("DELETE", f"/api/v1/workspaces/{workspace_id}")

    # -- projects ---------------------------------------------------------------------------

    def list_projects(self, workspace_id: int = 0, *, name: str | None = None) -> list[dict[str, Any]]:
        """A workspace's projects (0: those of every workspace you may see)."""
        params = {"name": name} if name else {}
        return self._session.get(f"/api/v1/workspaces/{workspace_id}/projects", **params).get("projects") or []

    def get_project(self, workspace: str | int, name: str | None = None) -> dict[str, Any]:
        """A project by id (``get_project(7)``) or by workspace and project name."""
        if name is None:
            return self._session.get(f"/api/v1/projects/{int(workspace)}")["project"]
        ws = self.get_workspace(workspace)
        for p in self.list_projects(ws["id"], name=name):
            if p["name"] == name:
                return p
        raise NotFound(404, f"project {name!r} not found in workspace {ws['name']!r}")

    def create_project(self, workspace_id: int, name: str, *, description: str | None = None,
                       key: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"name": name, "workspaceId": workspace_id}
        if description is not None:
            body["description"] = description
        if key is not None:
            body["key"] = key
        return self._session.post(f"/api/v1/workspaces/{workspace_id}/projects", body)["project"]

    def edit_project(self, project_id: int, *, name: str | None = None, description: str | None = None,
                     key: str | None = None) -> dict[str, Any]:
        body = {k: v for k, v in (("name", name), ("description", description), ("key", key)) if v is not None}
        return self._session.request("PATCH", f"/api/v1/projects/{project_id}", body)["project"]

    def archive_project(self, project_id: int, archived: bool = True) -> None:
        self._session.post(f"/api/v1/projects/{project_id}/{'archive' if archived else 'unarchive'}")

    def delete_project(self, project_id: int) -> None:
        """Delete it with all its experiments (refused while any has not ended)."""
        self._session.request("DELETE", f"/api/v1/projects/{project_id}")

    def move_project(self, project_id: int, workspace_id: int) -> None:
        self._session.post(f"/api/v1/projects/{project_id}/move",
                           {"projectId": project_id, "destinationWorkspaceId": workspace_id})

    def project_experiments(self, project_id: int, *, users: list[str] | None = None,
                            archived: bool | None = None) -> list[Experiment]:
        """The experiments of a project, oldest first (``users``/``archived`` narrow them)."""
        params: dict[str, Any] = {"projectId": project_id, "users": users or None,
                                  "archived": None if archived is None else str(archived).lower()}
        body = self._session.request("GET", "/api/v1/experiments", params=params)
        return [Experiment(self._session, e["id"], e) for e in body.get("experiments") or []]

    # -- experiments ------------------------------------------------------------------------

    def archive_experiment(self, experiment_id: int, archived: bool = True) -> None:
        """Archive an ended experiment (hidden from default lists), or unarchive it."""
        self._session.post(f"/api/v1/experiments/{experiment_id}/{'archive' if archived else 'unarchive'}")

    def move_experiment(self, experiment_id: int, project_id: int) -> None:
        self._session.post(f"/api/v1/experiments/{experiment_id}/move",
                           {"experimentId": experiment_id, "destinationProjectId": project_id})

    def delete_experiment(self, experiment_id: int) -> None:
        """Delete an ended experiment with its trials, metrics, logs and checkpoint files."""
        self._session.request("DELETE", f"/api/v1/experiments/{experiment_id}")
