"""Experiment housekeeping: archive, unarchive, move between projects, delete — one at a time
or in bulk (``/api/v1/projects/{id}/experiments/...``).

A bulk action acts only on experiments of the project in its path, and on each only where the
caller may: an experiment the caller may not see is reported "not found", one it may see but
not change is reported refused, and neither is touched (Determined 0.27–0.31 changed rows
outside the caller's reach when "select all" met a filter).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from ...errors import Conflict, DetError, InvalidRequest, NotFound
from ...store import experiments as store
from ...store import reader
from ..access.authz import Grants, Perm
from ..access.rbac import RbacService
from ..common.states import TERMINAL
from ..workspaces.service import WorkspaceService
from . import purge as _purge

_TERMINAL = [s.value for s in TERMINAL]
_ACTIVE_ALIASES = {"QUEUED", "PULLING", "STARTING", "RUNNING"}


@dataclass(frozen=True)
class BulkFilters:
    """``v1BulkExperimentFilters``: which experiments of the project a bulk action selects."""

    name: str | None = None
    description: str | None = None
    archived: bool | None = None
    labels: tuple[str, ...] = ()
    states: tuple[str, ...] = ()
    user_ids: tuple[int, ...] = ()
    excluded: tuple[int, ...] = ()

    @classmethod
    def parse(cls, raw: Any) -> BulkFilters:
        if not isinstance(raw, dict):
            raise InvalidRequest("filters must be an object (v1BulkExperimentFilters)")
        for key in ("name", "description"):
            if raw.get(key) is not None and not isinstance(raw[key], str):
                raise InvalidRequest(f"filters.{key} must be a string")
        if raw.get("archived") is not None and not isinstance(raw["archived"], bool):
            raise InvalidRequest("filters.archived must be true or false")
        states = []
        for s in _strs(raw.get("states"), "filters.states"):
            s = s.removeprefix("STATE_")
            states.append("ACTIVE" if s in _ACTIVE_ALIASES else s)
        return cls(raw.get("name") or None, raw.get("description") or None, raw.get("archived"),
                   _strs(raw.get("labels"), "filters.labels"), tuple(states),
                   int_list(raw.get("userIds"), "filters.userIds"),
                   int_list(raw.get("excludedExperimentIds"), "filters.excludedExperimentIds"))


def int_list(value: Any, where: str) -> tuple[int, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise InvalidRequest(f"{where} must be a list of integers")
    return tuple(value)


def _strs(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidRequest(f"{where} must be a list of strings")
    return tuple(value)


class ExperimentAdmin:
    def __init__(self, engine: sa.Engine, rbac: RbacService, workspaces: WorkspaceService,
                 cluster_id: str, on_deleted: Callable[[], None] = lambda: None) -> None:
        self._engine = engine
        self._reader = reader(engine)
        self._rbac = rbac
        self._workspaces = workspaces
        self._cluster_id = cluster_id
        self._on_deleted = on_deleted  # drop caches keyed by ids that may now be reused

    # -- one experiment ---------------------------------------------------------------------

    def set_archived(self, exp_id: int, archived: bool) -> None:
        """Archive (only once it has ended) or unarchive; doing it twice is no error."""
        with self._engine.begin() as conn:
            row = self._row(conn, exp_id)
            if archived and row.state not in _TERMINAL:
                raise Conflict(f"experiment {exp_id} is {row.state}; only ended experiments can be "
                               "archived (kill or cancel it first)")
            store.update(conn, exp_id, archived=archived)

    def move(self, exp_id: int, dest_project: int) -> None:
        self._workspaces.check_open_project(dest_project, "move experiments into")
        with self._engine.begin() as conn:
            self._row(conn, exp_id)
            store.update(conn, exp_id, project_id=dest_project)
        self._rbac.invalidate()  # it may now live in another workspace

    def delete(self, exp_ids: list[int]) -> None:
        """Delete ended experiments with every row and file they own (Conflict otherwise); the
        files go in a background thread once the rows are gone."""
        with self._engine.begin() as conn:
            for exp_id in exp_ids:
                self._row(conn, exp_id)
            _purge.check_deletable(conn, exp_ids)
            doomed = _purge.purge_experiments(conn, exp_ids, self._cluster_id)
        self._rbac.invalidate()
        self._on_deleted()
        _purge.remove_dirs_soon(doomed)  # the answer does not wait on the disk

    def delete_tensorboard_files(self, exp_id: int) -> bool:
        """Remove the experiment's TensorBoard files from its checkpoint storage (``det e
        delete-tb-files``); whether there were any. Its metrics and checkpoints stay."""
        with self._reader.connect() as conn:
            self._row(conn, exp_id)
            config = store.config(conn, exp_id)
        root = _purge.storage_root((config or {}).get("checkpoint_storage"))
        if root is None:
            return False
        return _purge.remove_dirs([_purge.tensorboard_dir(root, self._cluster_id, exp_id)]) > 0

    # -- bulk -------------------------------------------------------------------------------

    def bulk(self, action: str, grants: Grants, perm: Perm, project_id: int, ids: tuple[int, ...],
             filters: BulkFilters | None, dest_project: int | None = None) -> list[dict[str, Any]]:
        """Apply ``action`` (archive, unarchive, move, delete) to the experiments of
        ``project_id`` named by ``ids`` (or selected by ``filters``), each only where ``grants``
        hold ``perm``. Returns ``v1ExperimentActionResult`` dicts: ``error`` empty on success."""
        ws = self._rbac.workspace_of_project(project_id)
        selected = self._select(project_id, ids, filters)
        found = set(selected)
        results = []
        wanted = ids if filters is None else selected
        for exp_id in wanted:
            if exp_id not in found or not grants.can(Perm.VIEW_EXPERIMENT_METADATA, ws):
                results.append({"id": exp_id, "error": f"experiment {exp_id} not found"})
                continue
            if not grants.can(perm, ws):
                results.append({"id": exp_id, "error": f"you may not {perm.value.lower().replace('_', ' ')} "
                                                       f"on experiment {exp_id}"})
                continue
            try:
                if action == "move":
                    assert dest_project is not None
                    self.move(exp_id, dest_project)
                elif action == "delete":
                    self.delete([exp_id])
                else:
                    self.set_archived(exp_id, action == "archive")
                results.append({"id": exp_id, "error": ""})
            except DetError as exc:
                results.append({"id": exp_id, "error": exc.message})
        return results

    def _select(self, project_id: int, ids: tuple[int, ...], filters: BulkFilters | None) -> list[int]:
        if filters is None and not ids:
            return []
        with self._reader.connect() as conn:
            if filters is None:
                rows = store.of_project(conn, project_id, ids=ids)
            else:
                rows = store.of_project(conn, project_id, name=filters.name, description=filters.description,
                                        archived=filters.archived, states_=filters.states,
                                        user_ids=filters.user_ids, excluded=filters.excluded)
        need = set(filters.labels) if filters is not None else set()
        return [r.id for r in rows if need <= set(r.labels or [])]

    def _row(self, conn: sa.Connection, exp_id: int) -> Any:
        row = store.id_and_state(conn, exp_id)
        if row is None:
            raise NotFound(f"experiment {exp_id} not found")
        return row
