"""Task config policies (``det config-policies``), as 0.38.1 keeps them: per workload type
(experiments, or notebooks/shells/commands/TensorBoards), globally and per workspace; a global
policy wins over a workspace's. ``invariant_config`` is laid over submitted configs;
``constraints`` refuse configs past ``resource_constraints.max_slots`` or ``priority_limit``."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
import yaml

from ...errors import InvalidRequest
from ...store import config_policies as rows
from ...store import reader
from ..common.clock import Clock

#: The workload types on the wire.
WORKLOAD_TYPES = ("EXPERIMENT", "NTSC")
GLOBAL = rows.GLOBAL
_KEYS = {"invariant_config", "constraints"}
_CONSTRAINTS = {"resource_constraints", "priority_limit"}


def parse_policy(text: str) -> dict[str, Any]:
    """The policy document (YAML or JSON) checked; InvalidRequest naming what is wrong."""
    try:
        doc = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        raise InvalidRequest(f"config policies are not valid YAML or JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise InvalidRequest(
            "config policies must be a mapping with invariant_config and/or constraints"
        )
    unknown = set(doc) - _KEYS
    if unknown:
        raise InvalidRequest(
            f"config policies: unknown field(s) {', '.join(sorted(unknown))}; "
            "allowed: constraints, invariant_config"
        )
    cons = doc.get("constraints") or {}
    if not isinstance(cons, dict) or set(cons) - _CONSTRAINTS:
        raise InvalidRequest("constraints may hold only resource_constraints and priority_limit")
    limit = cons.get("priority_limit")
    if limit is not None and (
        not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 99
    ):
        raise InvalidRequest(
            f"constraints.priority_limit must be an integer from 1 to 99, got {limit!r}"
        )
    rc = cons.get("resource_constraints") or {}
    if not isinstance(rc, dict) or set(rc) - {"max_slots"}:
        raise InvalidRequest("constraints.resource_constraints may hold only max_slots")
    ms = rc.get("max_slots")
    if ms is not None and (not isinstance(ms, int) or isinstance(ms, bool) or ms < 0):
        raise InvalidRequest(
            f"constraints.resource_constraints.max_slots must be a non-negative integer, got {ms!r}"
        )
    inv = doc.get("invariant_config")
    if inv is not None and not isinstance(inv, dict):
        raise InvalidRequest("invariant_config must be a mapping (a partial task config)")
    return json.loads(json.dumps(doc))


def overlay(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """``top`` laid over ``base``, mappings merged key by key."""
    out = dict(base)
    for k, v in top.items():
        out[k] = overlay(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


class ConfigPolicies:
    def __init__(self, engine: sa.Engine, clock: Clock) -> None:
        self._engine = engine
        self._reader = reader(engine)
        self._clock = clock

    def get(self, scope: int, workload_type: str) -> dict[str, Any]:
        with self._reader.connect() as conn:
            return rows.get(conn, scope, workload_type) or {}

    def put(self, scope: int, workload_type: str, text: str, user_id: int) -> dict[str, Any]:
        policy = parse_policy(text)
        with self._engine.begin() as conn:
            rows.put(conn, scope, workload_type, policy, user_id=user_id, now=self._clock.now())
        return policy

    def delete(self, scope: int, workload_type: str) -> None:
        """As 0.38.1: deleting policies that are not set is not an error."""
        with self._engine.begin() as conn:
            rows.delete(conn, scope, workload_type)

    def apply(
        self, workspace_id: int, workload_type: str, config: dict[str, Any]
    ) -> dict[str, Any]:
        """``config`` with the invariant configs laid over it (the global one last: it wins),
        once it is within the constraints (the global ones checked first); InvalidRequest
        naming the limit otherwise."""
        with self._reader.connect() as conn:
            ws = rows.get(conn, workspace_id, workload_type) or {}
            gl = rows.get(conn, GLOBAL, workload_type) or {}
        out = config  # the same object when no invariant config applies
        for doc in (ws, gl):
            if doc.get("invariant_config"):
                out = overlay(out, doc["invariant_config"])
        res = out.get("resources") or {}
        slots = res.get(
            "slots_per_trial", res.get("slots", 1 if workload_type == "EXPERIMENT" else 0)
        )
        priority = res.get("priority")
        for where, doc in (("global", gl), (f"workspace {workspace_id}", ws)):
            cons = doc.get("constraints") or {}
            ms = (cons.get("resource_constraints") or {}).get("max_slots")
            if ms is not None and isinstance(slots, int) and slots > ms:
                raise InvalidRequest(
                    f"resources requested ({slots} slots) exceed the {where} config policy's "
                    f"constraints.resource_constraints.max_slots of {ms}"
                )
            limit = cons.get("priority_limit")
            if limit is not None and isinstance(priority, int) and priority < limit:
                raise InvalidRequest(
                    f"priority {priority} is past the {where} config policy's "
                    f"constraints.priority_limit of {limit}"
                )
        return out
