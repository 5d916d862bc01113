"""Task-facing routes: context, logs, allocations' signals, checkpoints."""

from __future__ import annotations

import json
from typing import Any

from ..config import tgz_to_b64
from ..errors import Conflict, Forbidden, NotFound
from ..services.access.authz import Perm
from ..services.accounts.auth import AllocationPrincipal
from ..services.common.states import AllocState
from ..services.interactive import generic
from . import _models
from . import _serialize as ser
from ._api import ANY, ANY_OBJECT, Q, api, array, dict_of, integer, obj, string
from ._base import DetHandler
from ._log_filters import QUERY as LOG_QUERY
from ._log_filters import log_filter
from ._wire import CHECKPOINT_STATES, LOG_LEVELS

#: ``v1TaskLog``, as the stock log shipper sends it (and its snake_case forms).
TASK_LOG = obj(("taskId", "log"), taskId=string(), log=string(64 * 1024 * 1024), allocationId=string(),
               agentId=string(), agent_id=string(), containerId=string(), rankId=integer(), rank_id=integer(),
               level={"type": "string", "enum": list(LOG_LEVELS)}, stdtype=string(), source=string(),
               timestamp=string(64), id=integer())
#: ``v1Checkpoint`` as a task reports it (``checkpoint.upload``).
CHECKPOINT_FIELDS = dict(
    uuid=string(64, min_length=1), allocationId=string(), taskId=string(), reportTime=string(64),
    metadata=ANY_OBJECT, resources=dict_of({"anyOf": [{"type": "string"}, {"type": "integer"}]}),
    state={"type": "string", "enum": list(CHECKPOINT_STATES)}, training=ANY_OBJECT, storageId=integer())

MAX_LONG_POLL_S = 600.0


def _experiment_of_task(task_id: str) -> int:
    head = task_id.split(".", 1)[0]
    if not head.isdigit():
        raise NotFound(f"task {task_id} not found")
    return int(head)


class TaskContextHandler(DetHandler):
    permissions = {"GET": Perm.VIEW_EXPERIMENT_ARTIFACTS}
    allow_task = True

    @api()
    def get(self, task_id: str) -> None:
        self.require_task(task_id)
        self.access.authorize_task_kind(task_id)
        if not task_id.split(".", 1)[0].isdigit():  # an interactive or generic task's
            self.master.commands.get(task_id, None)
            tgz = self.master.commands.context_tgz(task_id) or b""
            self.send({"b64Tgz": tgz_to_b64(tgz) if tgz else ""})
            return
        exp_id = _experiment_of_task(task_id)
        self.send({"b64Tgz": tgz_to_b64(self.master.experiments.context_tgz(exp_id))})


#: allocation state -> ``taskv1State``
_ALLOC_STATE = {"PENDING": "STATE_QUEUED", "ASSIGNED": "STATE_STARTING", "PULLING": "STATE_PULLING",
                "RUNNING": "STATE_RUNNING",
                "TERMINATING": "STATE_TERMINATING", "TERMINATED": "STATE_TERMINATED"}
#: Kinds whose readiness is their server answering (the proxy's probe), not their process running.
_PROBED = ("NOTEBOOK", "TENSORBOARD")


class TaskHandler(DetHandler):
    """``GET /api/v1/tasks/{id}`` (``v1GetTaskResponse``): a task's kind, times and allocations;
    the stock ``det notebook start`` and ``det tensorboard start`` wait on ``isReady``."""

    permissions = {"GET": Perm.VIEW_EXPERIMENT_METADATA}
    allow_task = True

    @api()
    def get(self, task_id: str) -> None:
        self.require_task(task_id)
        self.access.authorize_task_kind(task_id)
        kind, row = self.master.views.task(task_id)
        probed_ready = task_id in self.master.notebooks.ready
        allocs = [{
            "allocationId": a.allocation_id, "taskId": a.task_id, "slots": a.slots,
            "state": _ALLOC_STATE.get(a.state, "STATE_UNSPECIFIED"),
            "isReady": a.state == "RUNNING" and (probed_ready if kind in _PROBED else True),
            "startTime": ser.ts(a.start_time), "endTime": ser.ts(a.end_time),
            "exitReason": a.exit_reason, "statusCode": a.exit_code,
        } for a in self.master.views.task_allocations(task_id)]
        task: dict[str, Any] = {
            "taskId": task_id, "taskType": f"TASK_TYPE_{kind}", "allocations": allocs,
            "startTime": ser.ts(row.start_time), "endTime": ser.ts(row.end_time)}
        if kind == "GENERIC":  # as its user wrote it, with 0.38.1's generic-task fields
            cfg = row.config or {}
            origin = cfg.get(generic.ORIGIN) or {}
            task.update(config=json.dumps(cfg.get(generic.USER_CONFIG) or {}),
                        taskState=generic.state_of(cfg).wire, forkedFrom=origin.get("forked_from"),
                        parentId=origin.get("parent_id"), noPause=bool(origin.get("no_pause")))
        elif kind != "TRIAL":
            task["config"] = json.dumps(row.config)
        self.send({"task": {k: v for k, v in task.items() if v is not None}})


class TaskLogsHandler(DetHandler):
    permissions = {"GET": Perm.VIEW_EXPERIMENT_METADATA}
    allow_task = True

    @api(query=LOG_QUERY)
    async def get(self, task_id: str) -> None:
        self.require_task(task_id)
        self.access.authorize_task_kind(task_id)
        self.set_header("Content-Type", "application/x-ndjson")
        follow = self.bool_arg("follow")
        where = log_filter(self)
        limit = self.int_arg("limit", 0) or 0
        logs = self.master.logs
        rows = logs.query(task_id=task_id, where=where, limit=limit,
                          descending=self.get_query_argument("orderBy", "") == "ORDER_BY_DESC")
        last = max((r.id for r in rows), default=0)
        for r in rows:
            self.write(ser.ndjson(ser.task_log(r)))
        await self.flush()
        idle = 0
        while follow and not self.request.connection.stream.closed() and idle < 3600:
            rows = logs.query(task_id=task_id, where=where, after_id=last)
            for r in rows:
                self.write(ser.ndjson(ser.task_log(r)))
                last = r.id
            if rows:
                idle = 0
                await self.flush()
            elif not self.master.allocations.task_active(task_id):
                break  # it ended and every line it wrote was sent
            else:
                idle += 1
                await logs.wait_for_more(1.0)
        self.finish()


class PostTaskLogsHandler(DetHandler):
    # The stock harness ships up to 1,000 lines a request, and a line (a progress bar redrawn
    # with \r) can be long; what a task printed is kept even where it is not valid text.
    max_body = 64 * 1024 * 1024
    body_strings = "scrub"
    permissions = {"POST": Perm.UPDATE_EXPERIMENT}
    allow_task = True

    @api(body=obj(("logs",), logs=array(TASK_LOG, 100_000)), body_required=True)
    async def post(self) -> None:
        logs = (await self.body_json_async())["logs"]
        p = self.principal
        if isinstance(p, AllocationPrincipal):
            self.mark_checked()  # a task's own logs
            self.master.logs.append_shipped(p.task_id, p.allocation_id, p.trial_id, logs)
        else:
            entries = logs
            for task_id in sorted({e["taskId"] for e in entries}):
                self.access.authorize_task_kind(task_id)  # all checked before any is written
            self.mark_checked()
            for entry in entries:
                self.master.logs.append_shipped(entry["taskId"], entry.get("allocationId"), None, [entry])
        self.send({})


class PreemptionSignalHandler(DetHandler):
    """The long-poll: blocks up to ``timeout_seconds`` until the task is asked to stop."""

    permissions = {"GET": Perm.UPDATE_EXPERIMENT}
    allow_task = True

    @api(query=[Q("timeout_seconds", "integer", minimum=0, description=f"at most {MAX_LONG_POLL_S:g} s is waited"),
                Q("timeoutSeconds", "integer", minimum=0, description="the same (the binding's name)")])
    async def get(self, allocation_id: str) -> None:
        self.require_allocation(allocation_id)
        self.access.authorize_allocation(allocation_id)
        raw = self.int_arg("timeout_seconds")
        raw = self.int_arg("timeoutSeconds", 0) if raw is None else raw
        timeout = min(float(raw or 0), MAX_LONG_POLL_S)
        preempt = await self.master.allocations.wait_preemption(allocation_id, timeout)
        if not self.request.connection.stream.closed():
            self.send({"preempt": preempt})


class AckPreemptionHandler(DetHandler):
    permissions = {"POST": Perm.UPDATE_EXPERIMENT}
    allow_task = True

    @api(errors=(409,))
    def post(self, allocation_id: str) -> None:
        self.require_allocation(allocation_id)
        self.access.authorize_allocation(allocation_id)
        self.master.allocations.ack_preemption(allocation_id)
        self.send({})


class AllocationNoopHandler(DetHandler):
    """ready / waiting / acceleratorData / notify_container_running: accepted, nothing to do yet."""

    permissions = {"POST": Perm.UPDATE_EXPERIMENT}
    allow_task = True

    @api()
    def post(self, allocation_id: str, _what: str) -> None:
        self.require_allocation(allocation_id)
        self.access.authorize_allocation(allocation_id)
        self.send({})


class RendezvousHandler(DetHandler):
    permissions = {"GET": Perm.UPDATE_EXPERIMENT}
    allow_task = True

    @api()
    def get(self, allocation_id: str, resources_id: str) -> None:
        """Every container's address and slots, and the rank of the one asking
        (``DET_RESOURCES_ID`` is ``<allocation>.r<rank>``)."""
        self.require_allocation(allocation_id)
        self.access.authorize_allocation(allocation_id)
        alloc = self.master.allocations.get(allocation_id)
        placement = alloc.placement or [[alloc.agent_id, alloc.slot_ids or []]]
        known = {agent["id"]: agent["address"] for agent in self.master.rm.describe()}
        addresses = [known.get(a, "127.0.0.1") for a, _ in placement]
        _, _, rank = resources_id.rpartition(".r")
        self.send({"rendezvousInfo": {
            "addresses": addresses, "rank": int(rank) if rank.isdigit() else 0,
            "slots": [len(ids) for _, ids in placement],
        }})


class ProxyAddressHandler(DetHandler):
    """A task's report of the address its proxied server listens on (0.38.1's pods send their
    pod IP): the master's proxy reaches it there, on the port the master gave it. Only the
    task's own allocation token may say where it is; a task without a proxied server (a
    trial) is answered and nothing changes."""

    permissions = {"POST": Perm.UPDATE_EXPERIMENT}
    allow_task = True

    @api(body=obj(allocationId=string(), proxyAddress=string(255)), body_required=True, errors=(400,))
    def post(self, allocation_id: str) -> None:
        self.require_allocation(allocation_id)
        self.access.authorize_allocation(allocation_id)
        p = self.principal
        if not isinstance(p, AllocationPrincipal) or p.allocation_id != allocation_id:
            raise Forbidden("a proxy address is reported by the task itself (its allocation token)")
        address = str(self.body_json().get("proxyAddress") or "")
        if self.master.commands.report_proxy_address(p.task_id, allocation_id, address) is not None:
            self.master.notebooks.drop(p.task_id)  # probed again, at its new address
        self.send({})


class AllGatherHandler(DetHandler):
    """Blocks until ``numPeers`` participants of the allocation have posted (distinct
    ``requestUuid``), then answers each with all their data in arrival order
    (``services.allocation.all_gather``)."""
    max_body = 4 * 1024 * 1024

    permissions = {"POST": Perm.UPDATE_EXPERIMENT}
    allow_task = True

    @api(body=obj(data=ANY, allocationId=string(), numPeers=integer(), requestUuid=string()),
         errors=(400, 409, 503))
    async def post(self, allocation_id: str) -> None:
        self.require_allocation(allocation_id)
        self.access.authorize_allocation(allocation_id)
        body = self.body_json()
        allocations = self.master.allocations
        try:
            data = await self.master.all_gathers.gather(
                allocation_id, str(body.get("requestUuid") or ""), int(body.get("numPeers", 1)),
                body.get("data"),
                alive=lambda: allocations.get(allocation_id).state != AllocState.TERMINATED.value,
                connected=lambda: not self._client_gone)
        except Conflict:
            if self._client_gone:
                return  # nobody to answer
            raise
        self.send({"data": data})

    _client_gone = False

    def on_connection_close(self) -> None:
        self._client_gone = True  # its data no longer counts (seen within the poll interval)
        super().on_connection_close()


class CheckpointsHandler(DetHandler):
    max_body = 16 * 1024 * 1024
    permissions = {"POST": Perm.UPDATE_EXPERIMENT, "PATCH": Perm.UPDATE_EXPERIMENT,
                   "DELETE": Perm.UPDATE_EXPERIMENT}
    allow_task = True

    @api(body=_models.DELETE_CHECKPOINTS, body_required=True, errors=(409,))
    def delete(self) -> None:
        _models.delete_checkpoints(self)  # DeleteCheckpoints: users' deletes (see _models)

    @api(body=obj(checkpoint=obj(**CHECKPOINT_FIELDS), **CHECKPOINT_FIELDS), body_required=True)
    def post(self) -> None:
        p = self.principal
        if not isinstance(p, AllocationPrincipal):
            raise Forbidden("checkpoints are reported by the task that wrote them (its allocation token)")
        body = self.body_json()
        ckpt = body.get("checkpoint") or body
        trial_id, task_id, alloc_id = p.trial_id, p.task_id, p.allocation_id
        self.mark_checked()  # its own checkpoint
        self.master.checkpoints.report(ckpt, trial_id=trial_id, task_id=task_id, allocation_id=alloc_id)
        self.send({})

    @api(body=obj(checkpoints=array(obj(("uuid",), uuid=string(64), resources=ANY_OBJECT))))
    def patch(self) -> None:
        # Partial deletes (checkpoint.delete from a task): accepted, nothing removed.
        if not isinstance(self.principal, AllocationPrincipal):
            raise Forbidden("checkpoints are patched by the task that wrote them (its allocation token)")
        self.body_json()
        self.mark_checked()
        self.send({})


class CheckpointHandler(DetHandler):
    permissions = {"GET": Perm.VIEW_EXPERIMENT_ARTIFACTS}
    allow_task = True

    @api()
    def get(self, uuid: str) -> None:
        row = self.master.checkpoints.get(uuid)
        p = self.principal
        if isinstance(p, AllocationPrincipal) and row.experiment_id != p.experiment_id:
            raise NotFound(f"checkpoint {uuid} not found")
        self.authorize_checkpoint(uuid)
        trial = self.master.views.trial(row.trial_id) if row.trial_id else None
        cfg = self.master.experiments.get(row.experiment_id).config if row.experiment_id else None
        listed = self.master.checkpoints.with_metrics(uuid, cfg)  # the reports at its step
        self.send({"checkpoint": ser.listed_checkpoint(listed, trial_row=trial.row if trial else None,
                                                       exp_config=cfg)})

