"""The model registry: named models whose numbered versions are checkpoints.

    model = client.create_model("mnist", description="digits")
    version = model.register_version(exp.top_checkpoint().uuid, comment="best so far")
    print(version.version, version.checkpoint.uuid)
    client.get_model("mnist").versions()

Only a COMPLETED checkpoint can be registered; a registered checkpoint is never deleted by
garbage collection (nor by ``delete_checkpoints``) until its versions are deleted.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable
from typing import Any

from ._trial import Checkpoint
from .session import Session


def _path(name_or_id: str | int) -> str:
    return f"/api/v1/models/{urllib.parse.quote(str(name_or_id), safe='')}"


class ModelVersion:
    """One version of a model: ``version`` (1, 2, …), its ``checkpoint``, name and comment."""

    def __init__(self, session: Session, data: dict[str, Any]) -> None:
        self._session = session
        self._data = data
        self.version: int = int(data["version"])
        self.model_name: str = data["model"]["name"]

    def __repr__(self) -> str:
        return f"ModelVersion(model={self.model_name!r}, version={self.version})"

    @property
    def checkpoint(self) -> Checkpoint:
        return Checkpoint(self._session, self._data["checkpoint"])

    @property
    def name(self) -> str:
        return str(self._data.get("name") or "")

    @property
    def comment(self) -> str:
        return str(self._data.get("comment") or "")

    @property
    def username(self) -> str:
        return str(self._data.get("username") or "")

    @property
    def creation_time(self) -> str | None:
        return self._data.get("creationTime")

    def to_dict(self) -> dict[str, Any]:
        """The master's JSON (``v1ModelVersion``)."""
        return dict(self._data)

    def delete(self) -> None:
        self._session.request("DELETE", f"{_path(self.model_name)}/versions/{self.version}")


class Model:
    """A registered model. Attributes are the master's JSON as of the last ``reload()``."""

    def __init__(self, session: Session, data: dict[str, Any]) -> None:
        self._session = session
        self._data = data

    def __repr__(self) -> str:
        return f"Model(id={self.id}, name={self.name!r})"

    @property
    def id(self) -> int:
        return int(self._data["id"])

    @property
    def name(self) -> str:
        return str(self._data["name"])

    @property
    def description(self) -> str:
        return str(self._data.get("description") or "")

    @property
    def labels(self) -> list[str]:
        return list(self._data.get("labels") or [])

    @property
    def metadata(self) -> dict[str, Any]:
        return dict(self._data.get("metadata") or {})

    @property
    def workspace_id(self) -> int:
        return int(self._data.get("workspaceId") or 0)

    @property
    def username(self) -> str:
        return str(self._data.get("username") or "")

    @property
    def num_versions(self) -> int:
        return int(self._data.get("numVersions") or 0)

    @property
    def archived(self) -> bool:
        return bool(self._data.get("archived"))

    def to_dict(self) -> dict[str, Any]:
        """The master's JSON (``v1Model``)."""
        return dict(self._data)

    def reload(self) -> Model:
        self._data = self._session.get(_path(self.id))["model"]
        return self

    def update(self, **fields: Any) -> Model:
        """Change ``name``, ``description``, ``labels``, ``metadata`` or ``notes``."""
        self._data = self._session.request("PATCH", _path(self.id), fields)["model"]
        return self

    def register_version(self, checkpoint_uuid: str, *, name: str | None = None,
                         comment: str | None = None, labels: Iterable[str] = (),
                         metadata: dict[str, Any] | None = None) -> ModelVersion:
        """Make the checkpoint this model's next version (``Conflict`` if it is not
        COMPLETED or the model is archived)."""
        body: dict[str, Any] = {"checkpointUuid": checkpoint_uuid, "modelName": self.name,
                                "name": name, "comment": comment, "labels": list(labels) or None,
                                "metadata": metadata}
        body = {k: v for k, v in body.items() if v is not None}
        data = self._session.post(f"{_path(self.id)}/versions", body)["modelVersion"]
        self.reload()
        return ModelVersion(self._session, data)

    def versions(self, *, newest_first: bool = True) -> list[ModelVersion]:
        order = "ORDER_BY_DESC" if newest_first else "ORDER_BY_ASC"
        body = self._session.get(f"{_path(self.id)}/versions", orderBy=order)
        return [ModelVersion(self._session, v) for v in body.get("modelVersions") or []]

    def get_version(self, version: int) -> ModelVersion:
        return ModelVersion(self._session,
                            self._session.get(f"{_path(self.id)}/versions/{int(version)}")["modelVersion"])

    def archive(self, archived: bool = True) -> None:
        """Archive (it takes no new versions) or unarchive."""
        self._session.post(f"{_path(self.id)}/{'archive' if archived else 'unarchive'}")
        self.reload()

    def move(self, workspace: int | str) -> None:
        """Move it to another workspace, by id or by name (you need to be allowed to create
        models there)."""
        if isinstance(workspace, str):
            self._data = self._session.request("PATCH", _path(self.id), {"workspaceName": workspace})["model"]
            return
        self._session.post(f"{_path(self.id)}/move", {"destinationWorkspaceId": int(workspace)})
        self.reload()

    def delete(self) -> None:
        """Delete the model and its versions (their checkpoints stay)."""
        self._session.request("DELETE", _path(self.id))


class ModelMethods:
    """Mixed into ``Determined``: needs ``self._session``."""

    _session: Session

    def create_model(self, name: str, *, description: str = "", labels: Iterable[str] = (),
                     metadata: dict[str, Any] | None = None, workspace_name: str | None = None,
                     ) -> Model:
        """Register a new, empty model (in Uncategorized unless ``workspace_name``)."""
        body: dict[str, Any] = {"name": name, "description": description, "labels": list(labels),
                                "metadata": metadata or {}}
        if workspace_name:
            body["workspaceName"] = workspace_name
        return Model(self._session, self._session.post("/api/v1/models", body)["model"])

    def get_model(self, name_or_id: str | int) -> Model:
        """A model by name or id; ``NotFound`` if there is none you may see."""
        return Model(self._session, self._session.get(_path(name_or_id))["model"])

    def search_models(self, *, name: str | None = None, labels: Iterable[str] = (),
                      workspace_names: Iterable[str] = (), archived: bool | None = None,
                      ) -> list[Model]:
        """The models you may see, oldest first; ``name`` matches part of the name."""
        params: dict[str, Any] = {"name": name, "labels": list(labels) or None,
                                  "workspaceNames": list(workspace_names) or None,
                                  "archived": None if archived is None else str(archived).lower()}
        body = self._session.get("/api/v1/models", **{k: v for k, v in params.items() if v is not None})
        return [Model(self._session, m) for m in body.get("models") or []]

    def delete_checkpoints(self, uuids: Iterable[str]) -> None:
        """Delete checkpoints (their files go in the background). ``Conflict``, and nothing
        deleted, if one is used by a model version or is a running trial's latest."""
        self._session.request("DELETE", "/api/v1/checkpoints", {"checkpointUuids": list(uuids)})
