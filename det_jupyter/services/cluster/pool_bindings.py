"""Resource-pool-to-workspace bindings (``det resource-pool bindings``), as 0.38.1 keeps them:
a pool bound to workspaces serves only their experiments and tasks; an unbound pool serves
every workspace; the default pools cannot be bound."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from ...config.resources import ResourceConfig
from ...errors import Conflict, InvalidRequest, NotFound
from ...store import pool_bindings as rows
from ...store import reader
from .config_policies import ConfigPolicies


class PoolBindings:
    """Reads and changes the bindings; ``check`` is the one question submissions ask."""

    def __init__(self, engine: sa.Engine, resources: ResourceConfig) -> None:
        self._engine = engine
        self._reader = reader(engine)
        self._resources = resources

    # -- reads -----------------------------------------------------------------------------
    def workspaces(self, pool: str) -> list[int]:
        self._known(pool)
        with self._reader.connect() as conn:
            return rows.workspaces_of(conn, pool)

    def available_pools(self, workspace_id: int) -> list[str]:
        """The pools ``workspace_id`` may use: those bound to it and every unbound one
        (0.38.1's ``GET /workspaces/{id}/available-resource-pools``)."""
        with self._reader.connect() as conn:
            self._workspace_ids(conn, [workspace_id], [])
            mine = set(rows.pools_of(conn, workspace_id))
            bound = rows.bound_pools(conn)
        return [p for p in self._resources.pools if p in mine or p not in bound]

    def check(self, pool: str, workspace_id: int, workspace_name: str) -> None:
        """InvalidRequest (400) unless ``workspace_id`` may submit to ``pool`` ("" is the
        default pool, which is never bound)."""
        if not pool:
            return
        with self._reader.connect() as conn:
            bound = rows.workspaces_of(conn, pool)
        if bound and workspace_id not in bound:
            raise InvalidRequest(
                f"resource pool {pool!r} is not available to workspace {workspace_name!r}: "
                "it is bound to other workspaces (det workspace list-pools shows the "
                "pools a workspace may use)"
            )

    # -- changes (admins; the handler checks) ----------------------------------------------
    def add(self, pool: str, ids: Sequence[int], names: Sequence[str]) -> None:
        self._bindable(pool)
        with self._engine.begin() as conn:
            wanted = self._workspace_ids(conn, ids, names)
            already = set(rows.workspaces_of(conn, pool)) & set(wanted)
            if already:
                raise Conflict(
                    f"resource pool {pool!r} is already bound to workspace(s) "
                    f"{', '.join(str(w) for w in sorted(already))}"
                )
            rows.add(conn, pool, wanted)

    def remove(self, pool: str, ids: Sequence[int], names: Sequence[str]) -> None:
        self._known(pool)
        with self._engine.begin() as conn:
            wanted = self._workspace_ids(conn, ids, names)
            missing = set(wanted) - set(rows.workspaces_of(conn, pool))
            if missing:
                raise NotFound(
                    f"workspace(s) {', '.join(str(w) for w in sorted(missing))} and resource "
                    f"pool {pool!r}: binding doesn't exist"
                )
            rows.remove(conn, pool, wanted)

    def replace(self, pool: str, ids: Sequence[int], names: Sequence[str]) -> None:
        self._bindable(pool)
        with self._engine.begin() as conn:
            wanted = self._workspace_ids(conn, ids, names)
            rows.clear(conn, pool)
            rows.add(conn, pool, wanted)

    # -- helpers ---------------------------------------------------------------------------
    def _known(self, pool: str) -> None:
        if pool not in self._resources.pools:
            raise NotFound(
                f"resource pool {pool!r} does not exist (pools: "
                f"{', '.join(sorted(self._resources.pools))})"
            )

    def _bindable(self, pool: str) -> None:
        self._known(pool)
        if pool in (self._resources.default_compute_pool, self._resources.default_aux_pool):
            raise InvalidRequest(f"default resource pool {pool} cannot be bound to any workspace")

    @staticmethod
    def _workspace_ids(conn: sa.Connection, ids: Sequence[int], names: Sequence[str]) -> list[int]:
        """The workspaces named by id or name, deduplicated; NotFound naming any unknown one."""
        found: dict[int, None] = {}
        known = rows.workspace_ids_by_id(conn, list(ids)) if ids else set()
        for i in ids:
            if i not in known:
                raise NotFound(f"workspace {i} not found")
            found[i] = None
        by_name = rows.workspace_ids_by_name(conn, list(names)) if names else {}
        for n in names:
            if n not in by_name:
                raise NotFound(f"workspace {n!r} not found")
            found[by_name[n]] = None
        return list(found)


class Admission:
    """What submissions call, once the workspace is known: the config policies laid over the
    config and its constraints checked, then the pool's bindings (0.38.1's order)."""

    def __init__(self, bindings: PoolBindings, policies: ConfigPolicies) -> None:
        self._bindings = bindings
        self._policies = policies

    def __call__(
        self, workspace_id: int, workspace_name: str, workload_type: str, config: dict[str, Any]
    ) -> dict[str, Any]:
        """``config`` as admitted (the same object unless an invariant config changed it);
        InvalidRequest naming the limit or the pool otherwise."""
        out = self._policies.apply(workspace_id, workload_type, config)
        res = out.get("resources") if isinstance(out.get("resources"), dict) else {}
        pool = res.get("resource_pool") if isinstance(res, dict) else None
        self._bindings.check(pool if isinstance(pool, str) else "", workspace_id, workspace_name)
        return out
