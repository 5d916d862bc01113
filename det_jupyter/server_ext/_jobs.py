"""/api/v1/job-queues-v2: the read-only job queue (``det job list``)."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidRequest
from ..services.access.authz import Perm
from ..services.jobs.control import QueueUpdate
from ..services.jobs.page import QueueQuery
from ..services.jobs.queue import Job
from . import _serialize as ser
from ._api import Q, api, array, obj, service_checked, string
from ._base import DetHandler

# jobv1State: every value the stock client may send; we never backfill, so that one matches none.
_STATES = ("STATE_QUEUED", "STATE_SCHEDULED", "STATE_SCHEDULED_BACKFILLED")
_ORDERS = ("", "ORDER_BY_UNSPECIFIED", "ORDER_BY_ASC", "ORDER_BY_DESC")


def job_json(j: Job) -> dict[str, Any]:
    """A ``v1Job`` (0.38.1's required fields) plus ``waitReason`` for queued jobs."""
    out: dict[str, Any] = {
        "jobId": j.job_id,
        "type": f"TYPE_{j.job_type}",
        "submissionTime": ser.ts(j.submitted_at),
        "username": j.username,
        "userId": j.user_id,
        "resourcePool": j.resource_pool,
        "isPreemptible": j.preemptible,
        "priority": j.priority,
        "weight": j.weight,
        "entityId": j.entity_id,
        "name": j.name,
        "summary": {"state": j.state, "jobsAhead": j.jobs_ahead},
        "requestedSlots": j.requested_slots,
        "allocatedSlots": j.allocated_slots,
        "progress": j.progress,
        "workspaceId": j.workspace_id,
    }
    if j.wait_reason is not None:
        out["waitReason"] = j.wait_reason
    return out


class JobQueueHandler(DetHandler):
    """The queue of a pool; jobs in workspaces the caller may not see are left out."""

    permissions = {"GET": Perm.AUTHENTICATED}

    @api(query=[Q("offset", "integer", minimum=0), Q("limit", "integer", minimum=0),
                Q("states", many=True, enum=_STATES), Q("orderBy", enum=_ORDERS[1:]),
                Q("resourcePool", description="a pool of the cluster (GET /api/v1/resource-pools); "
                                              "empty: the default pool")])
    def get(self) -> None:
        offset = self.int_arg("offset", 0) or 0
        limit = self.int_arg("limit", 0) or 0
        query = QueueQuery(
            resource_pool=self.get_query_argument("resourcePool", "") or "",
            states=[s for s in self.get_query_arguments("states") if s],
            descending=(self.get_query_argument("orderBy", "") or "") == "ORDER_BY_DESC",
            offset=offset, limit=limit,
        )
        page, total = self.master.job_queue.page(self.access, query)
        self.send({"jobs": [{"full": job_json(j)} for j in page],
                   "pagination": ser.pagination(offset, limit, total, len(page))})


_UPDATE_KEYS = {"jobId", "priority", "weight", "resourcePool", "aheadOf", "behindOf"}
#: ``v1QueueControl``: one job and what to change (``parse_update`` checks it, naming the field).
QUEUE_CONTROL = {
    "type": "object", "required": ["jobId"], "additionalProperties": False,
    "properties": {"jobId": string(min_length=1), "priority": {"type": "integer", "minimum": 1, "maximum": 99,
                                                               "nullable": True},
                   "weight": {"type": "number", "minimum": 0, "exclusiveMinimum": True, "nullable": True},
                   "resourcePool": {**string(), "nullable": True}, "aheadOf": {**string(), "nullable": True},
                   "behindOf": {**string(), "nullable": True}},
    "description": "aheadOf and behindOf name other jobs; give one of them at most",
}


def parse_update(raw: Any, where: str) -> QueueUpdate:
    """One ``v1QueueControl`` from the request body, every problem named."""
    if not isinstance(raw, dict):
        raise InvalidRequest(f"{where} must be an object with jobId and what to change")
    unknown = sorted(set(raw) - _UPDATE_KEYS)
    if unknown:
        raise InvalidRequest(f"{where}: unknown field(s) {', '.join(unknown)}; "
                             f"allowed: {', '.join(sorted(_UPDATE_KEYS))}")
    job_id = raw.get("jobId")
    if not isinstance(job_id, str) or not job_id:
        raise InvalidRequest(f"{where}.jobId must be a job id string (det job list shows them)")
    for key in ("resourcePool", "aheadOf", "behindOf"):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise InvalidRequest(f"{where}.{key} must be a string")
    try:
        return QueueUpdate(
            job_id, priority=raw.get("priority"), weight=raw.get("weight"),
            resource_pool=raw.get("resourcePool") or None,
            ahead_of=raw.get("aheadOf") or None, behind_of=raw.get("behindOf") or None,
        )
    except InvalidRequest as exc:
        raise InvalidRequest(f"{where}: {exc}") from None


class JobQueueUpdateHandler(DetHandler):
    """``POST /api/v1/job-queues`` (``det job update``): all updates apply, or none."""

    permissions = {"POST": Perm.UPDATE_EXPERIMENT}

    @api(body=obj(("updates",), updates=service_checked(array(QUEUE_CONTROL, 1000, minItems=1))),
         body_required=True)
    def post(self) -> None:
        body = self.body_json()
        updates = body["updates"]
        if not isinstance(updates, list) or not updates:
            raise InvalidRequest("updates must be a non-empty list of {jobId, priority | weight | "
                                 "resourcePool | aheadOf | behindOf}")
        parsed = [parse_update(u, f"updates[{i}]") for i, u in enumerate(updates)]
        self.access.authorize_job_updates(u.job_id for u in parsed)  # all before any changes
        self.master.jobs.update(self.user, parsed)
        self.send({})
